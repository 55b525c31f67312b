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

// A minimal module using f32x4.relaxed_madd: validates only where relaxed SIMD is supported.
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
  0x03, 0x02, 0x01, 0x00, // one function of type 0
  0x0a, 0x3d, 0x01, 0x3b, 0x00, // code: one body of 59 bytes, no locals
  0xfd, 0x0c, ...new Array(16).fill(0), // v128.const 0
  0xfd, 0x0c, ...new Array(16).fill(0),
  0xfd, 0x0c, ...new Array(16).fill(0),
  0xfd, 0x85, 0x02, // f32x4.relaxed_madd
  0x0b, // end
]);

function relaxedSimdValidates() {
  try {
    return WebAssembly.validate(RELAXED_PROBE);
  } catch {
    return false;
  }
}

// The wasm-bindgen glue of each build, imported by a literal specifier so that bundlers (Vite,
// webpack) follow it: they emit the glue as a chunk and, through its
// `new URL('tessera_wasm_bg.wasm', import.meta.url)`, the wasm beside it. (A computed specifier
// such as `${dir}/tessera_wasm.js` is invisible to them, and the bundled app then fails to load.)
const GLUE = {
  st: () => import('../pkg-st/tessera_wasm.js'),
  'st-relaxed': () => import('../pkg-st-relaxed/tessera_wasm.js'),
  mt: () => import('../pkg-mt/tessera_wasm.js'),
  'mt-relaxed': () => import('../pkg-mt-relaxed/tessera_wasm.js'),
};

// The relaxed-SIMD build (fused multiply-add, relaxed_dot) where the browser has relaxed SIMD and
// fuses relaxed_madd, so its kernels give the SIMD128 build's bits; else the SIMD128 build.
// `simd: 'simd128'` asks for the SIMD128 build. The WebGPU backend is in the single-threaded
// builds only (threads > 1 means 'wasm').
async function loadWasm(requested, simd) {
  // No more threads than cores: the pool's workers spin between ops, and a spinning worker
  // that the OS has descheduled holds up every op that waits for its task.
  const threads = Math.min(requested, self.navigator?.hardwareConcurrency || requested);
  const threaded = threads > 1 && self.crossOriginIsolated === true;
  if (threaded) {
    try {
      const module = await loadBuild('mt', simd);
      // The engine's pool counts this worker as its first thread (crates/wasm/src/rayon_pool.rs).
      await module.initThreadPool(threads - 1);
      return module;
    } catch (e) {
      // The pool's helper workers re-import the glue by its own URL, which a bundler that
      // rewrites `import.meta.url` (webpack) breaks: the single-threaded build still runs.
      buildReason = `the threaded build could not start (${e?.message ?? e}), so the single-threaded build runs`;
    }
  }
  return loadBuild('st', simd);
}

// Why the build that runs is not the one asked for (undefined when it is).
let buildReason;

async function loadBuild(base, simd) {
  const init = async (build) => {
    const module = await GLUE[build]();
    await module.default();
    return module;
  };
  if (simd !== 'simd128' && relaxedSimdValidates()) {
    try {
      const module = await init(`${base}-relaxed`);
      if (module.kernelsExact()) return module;
      // relaxed_madd not fused here: the SIMD128 build runs
    } catch {
      // not built, or the browser rejects it: the SIMD128 build runs
    }
  }
  return init(base);
}

async function load(id, { source, options }) {
  const requested = options.backend ?? 'auto';
  const choice = await chooseBackend(requested);
  if (choice.error) throw new TesseraError(ErrorCodes.UNSUPPORTED_BACKEND, choice.error);
  let { backend, reason } = choice;
  post({ id, type: 'progress', loaded: 0, total: undefined, phase: 'backend', backend, reason });
  wasm = await loadWasm(backend === 'webgpu' ? 1 : options.threads, options.simd);
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
      wasm = await loadWasm(options.threads, options.simd);
    }
  }
  const loadOptions = { context_size: options.contextSize, batch_size: options.batchSize };
  let loaded = null;
  if (gpu) {
    try {
      // Every tensor goes straight into a GPU buffer as it arrives: the model is never in the
      // wasm heap.
      loaded = await receive(id, wasm.ModelLoader.onGpu(gpu), source, options, loadOptions);
    } catch (e) {
      const gpuCannot = e?.code === ErrorCodes.BACKEND_ERROR || e?.code === ErrorCodes.UNSUPPORTED_TYPE;
      if (requested !== 'auto' || !gpuCannot) throw e;
      // The GPU cannot take the model (too large, or a tensor type its kernels lack; with a
      // known length this fails as soon as the header has arrived, so little was downloaded):
      // it runs on wasm, received again (from the cache when it had been stored whole).
      backend = 'wasm';
      reason = `WebGPU could not take the model (${e.message}), so it runs on wasm`;
      post({ id, type: 'progress', loaded: 0, total: undefined, phase: 'backend', backend, reason });
      wasm = await loadWasm(options.threads, options.simd);
    } finally {
      gpu.free();
    }
  }
  loaded ??= await receive(id, new wasm.ModelLoader(), source, options, loadOptions);
  const { received, fromCache } = loaded;
  post({ id, type: 'progress', loaded: received, total: received, phase: 'ready' });
  return { ...engine.info(), backendReason: reason, buildReason, fromCache };
}

// Feeds the model into `loader` (a wasm ModelLoader, on the heap or on the GPU) and opens it
// as `engine`.
async function receive(id, loader, source, options, loadOptions) {
  try {
    const { fromCache, forget } = await loadSource(source, loader, {
      cache: options.cache ?? true,
      revalidate: options.revalidate !== false,
      signal: controllers.get(id).signal,
      onProgress: ({ loaded, total }) => {
        post({ id, type: 'progress', loaded, total, phase: 'download' });
      },
    });
    const received = loader.received();
    try {
      engine = loader.load(loadOptions);
    } catch (e) {
      // A model that does not load must not come back from the cache next time (a GPU that
      // cannot take it says nothing about the file).
      if (e?.code !== ErrorCodes.BACKEND_ERROR) await forget?.();
      throw e;
    }
    return { received, fromCache };
  } finally {
    loader.free();
  }
}

function needEngine() {
  if (!engine) throw new TesseraError(ErrorCodes.INVALID_STATE, 'no model is loaded');
  return engine;
}

async function generate(id, { prompt, messages, options, stream }) {
  const e = needEngine();
  const ids = messages !== undefined ? e.chatPrompt(messages, options) : e.tokenize(prompt, true, true);
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
    if (step.text) text += step.text;
    // A chat answer read into parts (tools offered, or a thinking model) streams OpenAI deltas.
    const delta = step.delta && Object.keys(step.delta).length > 0 ? step.delta : undefined;
    if (stream && (delta || (step.text && !step.delta))) {
      post({ id, type: 'chunk', text: step.text, delta });
    }
    if (step.done) {
      return {
        text, message: step.message, finish_reason: step.finish_reason, stats: step.stats,
        speculative: step.speculative,
      };
    }
    await yieldToEvents();
  }
}

// Forced decoding: the model's top-1 next token after every position of `ids`, one slice per
// wasm call (the KV cache is replaced).
async function predict(id, { ids }) {
  const e = needEngine();
  const all = Uint32Array.from(ids);
  const out = [];
  while (out.length < all.length) {
    if (isAborted(id)) throw abortError();
    const chunk = e.predictChunk(all, out.length);
    if (chunk === undefined) {
      await e.readBack();
      continue;
    }
    out.push(...chunk);
    await yieldToEvents();
  }
  return out;
}

const handlers = {
  predict,
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
