// The engine's Web Worker: loads the wasm build (threaded when the page is cross-origin
// isolated and more than one thread is asked for), receives the model, and runs requests one
// at a time. Generation advances one token per wasm call and returns to the event loop between
// tokens, so each token is posted as it comes and an abort is heard within one token. Heavy
// work never runs on the page's main thread.
//
// On WebGPU a step only submits GPU work and comes back `pending`: the worker awaits the
// engine's `readBack()` (the GPU buffer map, which completes on this event loop) and calls
// `step` again, which then finishes the step.

import { ErrorCodes, TesseraError, abortError, serializeError } from './errors.js';
import { loadSource } from './model-source.js';
import { chooseBackend } from './backend-choice.js';

let wasm = null; // the wasm-bindgen module
let engine = null; // its Engine
let queue = Promise.resolve(); // requests run in order
const controllers = new Map(); // request id -> AbortController, aborted when the page says so
const isAborted = (id) => controllers.get(id)?.signal.aborted === true;

// Back to the event loop without setTimeout's clamping: a message to ourselves.
const channel = new MessageChannel();
const wakeups = [];
channel.port1.onmessage = () => wakeups.shift()?.();
const yieldToEvents = () =>
  new Promise((resolve) => {
    wakeups.push(resolve);
    channel.port2.postMessage(0);
  });

const post = (msg) => self.postMessage(msg);

async function loadWasm(threads) {
  // The WebGPU backend is in the single-threaded build only (threads > 1 means 'wasm').
  const threaded = threads > 1 && self.crossOriginIsolated === true;
  const url = new URL(threaded ? '../pkg-mt/tessera_wasm.js' : '../pkg-st/tessera_wasm.js', import.meta.url);
  const module = await import(url.href);
  await module.default();
  if (threaded) await module.initThreadPool(threads);
  return module;
}

async function load(id, { source, options }) {
  const requested = options.backend ?? 'auto';
  const choice = await chooseBackend(requested);
  if (choice.error) throw new TesseraError(ErrorCodes.UNSUPPORTED_BACKEND, choice.error);
  let { backend, reason } = choice;
  post({ id, type: 'progress', loaded: 0, total: undefined, phase: 'backend', backend, reason });
  wasm = await loadWasm(backend === 'webgpu' ? 1 : options.threads);
  // The device is requested before the download, so a refusal costs no download.
  let gpu = null;
  if (backend === 'webgpu') {
    try {
      gpu = await wasm.requestWebGpu();
    } catch (e) {
      if (requested === 'webgpu') throw e;
      backend = 'wasm';
      reason = `WebGPU not used: ${e.message}`;
      post({ id, type: 'progress', loaded: 0, total: undefined, phase: 'backend', backend, reason });
      wasm = await loadWasm(options.threads);
    }
  }
  const loader = new wasm.ModelLoader();
  const signal = controllers.get(id).signal;
  const { fromCache, forget } = await loadSource(source, loader, {
    useCache: options.cache !== false,
    signal,
    onProgress: ({ loaded, total }) => {
      post({ id, type: 'progress', loaded, total, phase: 'download' });
    },
  });
  const received = loader.received();
  const loadOptions = { context_size: options.contextSize, batch_size: options.batchSize };
  try {
    engine = gpu ? loader.loadWebGpu(loadOptions, gpu, requested === 'auto') : loader.load(loadOptions);
  } catch (e) {
    // A model that does not load must not come back from the cache next time (a GPU that
    // cannot take it says nothing about the file).
    if (e?.code !== ErrorCodes.BACKEND_ERROR) await forget?.();
    throw e;
  } finally {
    loader.free();
    gpu?.free();
  }
  const { fallback, ...info } = engine.info();
  if (fallback) {
    backend = 'wasm';
    reason = fallback;
    post({ id, type: 'progress', loaded: received, total: received, phase: 'backend', backend, reason });
  }
  post({ id, type: 'progress', loaded: received, total: received, phase: 'ready' });
  return { ...info, backendReason: reason, fromCache };
}

function needEngine() {
  if (!engine) throw new TesseraError(ErrorCodes.INVALID_STATE, 'no model is loaded');
  return engine;
}

async function generate(id, { prompt, messages, options, stream }) {
  const e = needEngine();
  const ids = messages !== undefined ? e.chatPrompt(messages) : e.tokenize(prompt, true, true);
  e.begin(ids, options);
  let text = '';
  for (;;) {
    if (isAborted(id)) {
      e.cancel();
      throw abortError();
    }
    const step = e.step();
    if (step.pending) {
      await e.readBack();
      continue;
    }
    if (step.text) {
      text += step.text;
      if (stream) post({ id, type: 'chunk', text: step.text });
    }
    if (step.done) return { text, finish_reason: step.finish_reason, stats: step.stats };
    await yieldToEvents();
  }
}

const handlers = {
  load,
  generate,
  tokenize: (id, { text, addSpecial, parseSpecial }) =>
    Array.from(needEngine().tokenize(text, addSpecial ?? true, parseSpecial ?? true)),
  detokenize: (id, { ids, special }) => needEngine().detokenize(Uint32Array.from(ids), special ?? false),
  info: () => ({ ...needEngine().info() }),
};

self.onmessage = ({ data }) => {
  if (data.op === 'abort') {
    controllers.get(data.target)?.abort();
    return;
  }
  const handler = handlers[data.op];
  const id = data.id;
  controllers.set(id, new AbortController());
  queue = queue.then(async () => {
    try {
      if (isAborted(id)) throw abortError();
      if (!handler) throw new TesseraError(ErrorCodes.INVALID_ARGUMENT, `unknown operation ${data.op}`);
      const value = await handler(id, data);
      post({ id, type: 'result', value });
    } catch (e) {
      post({ id, type: 'error', error: serializeError(e) });
    } finally {
      controllers.delete(id);
    }
  });
};
