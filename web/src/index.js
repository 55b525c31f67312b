// The page side: createEngine starts the worker and returns a thin proxy with an OpenAI-shaped
// API. Nothing heavy runs here; every call is a message to the worker.

import { ErrorCodes, TesseraError, abortError, deserializeError } from './errors.js';
import { createCompanionEngine, createRemoteEngine } from './companion.js';
import { generationPayload, requestSignal } from './request.js';
import { missingWasmFeatures } from './capabilities.js';
import { shardUrls } from './split-gguf.js';

export { ErrorCodes, TesseraError } from './errors.js';
export { listCachedModels, hasCachedModel, deleteCachedModel } from './model-cache.js';

const BACKENDS = ['auto', 'wasm', 'webgpu', 'companion', 'remote'];

function invalid(message) {
  return new TesseraError(ErrorCodes.INVALID_ARGUMENT, message);
}

// URLs are resolved here: the worker's base URL is not the page's.
function normalizeSource(model) {
  const base = globalThis.location?.href;
  const resolve = (u) => {
    if (typeof u !== 'string' && !(u instanceof URL)) throw invalid('model URLs must be strings or URL objects');
    return new URL(u, base).href;
  };
  // A split GGUF's first shard (`name-00001-of-00003.gguf`) stands for all of them, as in llama.cpp.
  if (typeof model === 'string' || model instanceof URL) {
    const urls = shardUrls(resolve(model));
    return { source: urls.length > 1 ? urls : urls[0], transfer: [] };
  }
  if (Array.isArray(model)) {
    if (model.length === 0) throw invalid('model: an empty list of URLs');
    return { source: model.map(resolve), transfer: [] };
  }
  if (model instanceof Blob) return { source: model, transfer: [] }; // File is a Blob
  if (model instanceof ArrayBuffer) return { source: model, transfer: [model] };
  if (ArrayBuffer.isView(model)) {
    const copy = model.buffer.slice(model.byteOffset, model.byteOffset + model.byteLength);
    return { source: copy, transfer: [copy] };
  }
  throw invalid('model must be a URL, a list of URLs (split GGUF), a File, a Blob or an ArrayBuffer');
}

function defaultThreads() {
  const n = globalThis.navigator?.hardwareConcurrency ?? 1;
  return Math.max(1, Math.min(n, 8));
}

class WorkerClient {
  constructor(worker) {
    this.worker = worker;
    this.nextId = 1;
    this.pending = new Map(); // id -> { resolve, reject, onMessage }
    this.closed = null; // the error every call rejects with once the worker is gone
    worker.onmessage = ({ data }) => this.receive(data);
    worker.onerror = (ev) => {
      ev.preventDefault?.();
      this.fail(new TesseraError(ErrorCodes.WORKER_FAILED, `engine worker failed: ${ev.message || 'script error'}`));
    };
  }

  receive(msg) {
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.type === 'result') {
      this.pending.delete(msg.id);
      p.resolve(msg.value);
    } else if (msg.type === 'error') {
      this.pending.delete(msg.id);
      p.reject(deserializeError(msg.error));
    } else {
      p.onMessage?.(msg);
    }
  }

  // Sends a request; `onMessage` gets its progress/chunk messages. Aborting `signal` tells the
  // worker to stop; the worker then rejects the request with ABORTED.
  call(op, payload, { signal, onMessage, transfer = [] } = {}) {
    if (this.closed) return Promise.reject(this.closed);
    if (signal?.aborted) return Promise.reject(abortError());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => this.worker.postMessage({ op: 'abort', target: id });
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = (f) => (v) => {
        signal?.removeEventListener('abort', onAbort);
        f(v);
      };
      this.pending.set(id, { resolve: done(resolve), reject: done(reject), onMessage });
      this.worker.postMessage({ id, op, ...payload }, transfer);
    });
  }

  abort(id) {
    this.worker.postMessage({ op: 'abort', target: id });
  }

  fail(error) {
    if (this.closed) return;
    this.closed = error;
    this.worker.terminate();
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
  }
}

// A queue the worker's chunks go into and an async iterator takes them from.
function chunkStream() {
  const items = [];
  let wake = null;
  let end = null; // { error } or { done: true }
  const notify = () => {
    wake?.();
    wake = null;
  };
  return {
    push(item) {
      items.push(item);
      notify();
    },
    close(result) {
      end = result;
      notify();
    },
    async *iterate() {
      for (;;) {
        if (items.length) {
          yield items.shift();
          continue;
        }
        if (end) {
          if (end.error) throw end.error;
          return;
        }
        await new Promise((r) => (wake = r));
      }
    },
  };
}

const now = () => Math.floor(Date.now() / 1000);
let completionCounter = 0;

function usageOf(stats) {
  return {
    prompt_tokens: stats.prompt_tokens,
    completion_tokens: stats.completion_tokens,
    total_tokens: stats.prompt_tokens + stats.completion_tokens,
  };
}

function timingsOf(stats, speculative) {
  const timings = {
    prompt_tokens_evaluated: stats.prompt_tokens_evaluated,
    prompt_ms: stats.prompt_ms,
    generation_ms: stats.generation_ms,
    prompt_tokens_per_second: stats.prompt_tokens_per_s,
    generation_tokens_per_second: stats.generation_tokens_per_s,
  };
  // Speculative requests: draft tokens verified and accepted (llama-server's names), and
  // llama.cpp's statistics lines.
  if (speculative) {
    timings.draft_n = speculative.drafted;
    timings.draft_n_accepted = speculative.accepted;
    timings.draft_stats = speculative.lines;
  }
  return timings;
}

class Engine {
  constructor(client, info, modelName) {
    this._client = client;
    this.info = info;
    /** 'wasm' or 'webgpu': the backend that runs the model. */
    this.backend = info.backend;
    /** Why that backend runs it (what 'auto' found, or a fallback's cause). */
    this.backendReason = info.backendReason;
    this._model = modelName;
    this.chat = { completions: { create: (req, options) => this._create('chat', req, options) } };
    this.completions = { create: (req, options) => this._create('text', req, options) };
  }

  _create(kind, req, options) {
    let payload;
    let signal;
    try {
      payload = generationPayload(kind, req);
      signal = requestSignal(req, options);
    } catch (e) {
      return Promise.reject(e);
    }
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${++completionCounter}`;
    const created = now();
    const model = this._model;
    if (!req.stream) {
      return this._client.call('generate', payload, { signal }).then((r) => {
        const choice = kind === 'chat'
          ? { index: 0, message: r.message ?? { role: 'assistant', content: r.text }, finish_reason: r.finish_reason }
          : { index: 0, text: r.text, finish_reason: r.finish_reason };
        if (req.return_token_ids) choice.token_ids = r.stats.tokens;
        return {
          id, object: kind === 'chat' ? 'chat.completion' : 'text_completion', created, model,
          choices: [choice], usage: usageOf(r.stats), timings: timingsOf(r.stats, r.speculative),
        };
      });
    }
    return Promise.resolve(this._stream(kind, id, created, payload, signal));
  }

  _stream(kind, id, created, payload, signal) {
    const chunks = chunkStream();
    const controller = new AbortController();
    const forward = () => controller.abort();
    signal?.addEventListener('abort', forward, { once: true });
    if (signal?.aborted) controller.abort();
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    const model = this._model;
    let first = true;
    // `delta`: a chat answer read into parts (content, reasoning_content, tool_calls).
    const chunk = (text, finish_reason, delta) => {
      const parts = delta ?? { content: text };
      const choice = kind === 'chat'
        ? { index: 0, delta: first ? { role: 'assistant', ...parts } : parts, finish_reason }
        : { index: 0, text, finish_reason };
      first = false;
      return { id, object, created, model, choices: [choice] };
    };
    this._client
      .call('generate', payload, {
        signal: controller.signal,
        onMessage: (m) => m.type === 'chunk' && chunks.push(chunk(m.text, null, m.delta)),
      })
      .then((r) => {
        const last = chunk('', r.finish_reason);
        if (payload.returnTokenIds) last.choices[0].token_ids = r.stats.tokens;
        last.usage = usageOf(r.stats);
        last.timings = timingsOf(r.stats, r.speculative);
        chunks.push(last);
        chunks.close({ done: true });
      }, (error) => chunks.close({ error }))
      .finally(() => signal?.removeEventListener('abort', forward));
    const iterator = chunks.iterate();
    // Leaving a for-await loop early stops the generation.
    const stop = iterator.return.bind(iterator);
    iterator.return = (v) => {
      controller.abort();
      return stop(v);
    };
    return iterator;
  }

  /** Token ids of `text` (special-token text parsed, BOS per the model unless told not to). */
  tokenize(text, { addSpecial = true, parseSpecial = true } = {}) {
    if (typeof text !== 'string') return Promise.reject(invalid('tokenize: text must be a string'));
    return this._client.call('tokenize', { text, addSpecial, parseSpecial });
  }

  /** The text of token ids (control tokens rendered only when `special`). */
  detokenize(ids, { special = false } = {}) {
    if (!Array.isArray(ids) && !ArrayBuffer.isView(ids)) return Promise.reject(invalid('detokenize: ids must be an array'));
    return this._client.call('detokenize', { ids: Array.from(ids), special });
  }

  /**
   * Forced decoding: feeds `ids` as one sequence (replacing the KV cache) and resolves to the
   * model's most likely next token after each position (element i follows ids[0..=i]). For
   * evaluating a model on a text (top-1 accuracy) or comparing backends; on WebGPU only the ids
   * leave the GPU. `signal` aborts between slices (ABORTED).
   */
  predictTokens(ids, { signal } = {}) {
    if (!Array.isArray(ids) && !ArrayBuffer.isView(ids)) return Promise.reject(invalid('predictTokens: ids must be an array'));
    return this._client.call('predict', { ids: Array.from(ids) }, { signal });
  }

  /** Stops the worker and frees the model; later calls reject with UNLOADED. */
  async unload() {
    this._client.fail(new TesseraError(ErrorCodes.UNLOADED, 'the engine was unloaded'));
  }
}

/**
 * Starts an engine in a Web Worker and loads a model into it. See docs/js-api.md.
 */
export async function createEngine(options = {}) {
  const {
    model, backend = 'auto', threads = defaultThreads(), simd = 'auto', contextSize, batchSize, onProgress, signal,
    cache = true, revalidate = true, workerUrl,
  } = options;
  if (!BACKENDS.includes(backend)) throw invalid(`backend must be one of ${BACKENDS.join(', ')}`);
  if (backend === 'companion') return createCompanionEngine({ ...options, model: options.companionModel });
  if (backend === 'remote') return createRemoteEngine(options);
  // 'auto' with a companion URL: the host first, else the in-page engine, saying why.
  let companionReason;
  if (backend === 'auto' && options.companionUrl) {
    try {
      return await createCompanionEngine({ ...options, model: options.companionModel });
    } catch (e) {
      if (e.code === ErrorCodes.ABORTED) throw e;
      companionReason = `companion host not used (${e.message})`;
    }
  }
  if (!Number.isInteger(threads) || threads < 1) throw invalid('threads must be a positive integer');
  if (simd !== 'auto' && simd !== 'simd128') throw invalid("simd must be 'auto' or 'simd128'");
  for (const [name, v] of [['contextSize', contextSize], ['batchSize', batchSize]]) {
    if (v !== undefined && (!Number.isInteger(v) || v < 0)) throw invalid(`${name} must be a non-negative integer`);
  }
  if (cache !== true && cache !== false && cache !== 'cache-api' && cache !== 'opfs') {
    throw invalid("cache must be true, false, 'cache-api' or 'opfs'");
  }
  if (model === undefined || model === null) throw invalid('model is required');
  // Every backend runs the engine's wasm (WebGPU's only drives the GPU from it), and every wasm
  // build needs SIMD128: without it the worker could only fail with a wasm compile error.
  const missing = missingWasmFeatures();
  if (missing) throw new TesseraError(ErrorCodes.UNSUPPORTED_BACKEND, missing);
  const { source, transfer } = normalizeSource(model);
  if (signal?.aborted) throw abortError();

  // The literal `new Worker(new URL('./worker.js', import.meta.url), ...)` is the form bundlers
  // (Vite, webpack) recognise: they bundle the worker and rewrite the URL. `workerUrl` is for
  // setups that copy web/src somewhere themselves.
  const worker = workerUrl
    ? new Worker(workerUrl, { type: 'module', name: 'tessera-engine' })
    : new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'tessera-engine' });
  const client = new WorkerClient(worker);
  let lastLoaded = -1;
  try {
    const info = await client.call(
      'load',
      { source, options: { backend, threads, simd, contextSize, batchSize, cache, revalidate } },
      {
        signal,
        transfer,
        onMessage: (m) => {
          if (m.type !== 'progress') return;
          // Bytes only grow: a fallback that receives the model again reports nothing until
          // it passes what was reported (its 'backend' event always comes through, with the
          // bytes reported so far).
          let loaded = m.loaded;
          if (m.phase === 'backend') loaded = Math.max(loaded, lastLoaded, 0);
          else if (loaded < lastLoaded) return;
          else lastLoaded = loaded;
          const progress = m.total ? Math.min(1, loaded / m.total) : undefined;
          const event = { loaded, total: m.total, progress, phase: m.phase };
          // 'backend' events say which backend was chosen and why ('auto' or a fallback).
          if (m.phase === 'backend') Object.assign(event, { backend: m.backend, reason: m.reason });
          onProgress?.(event);
        },
      },
    );
    const name = typeof source === 'string' ? source.split('/').pop() : Array.isArray(source) ? source[0].split('/').pop() : (model.name ?? 'model');
    if (companionReason) info.backendReason = `${companionReason}; ${info.backendReason}`;
    return new Engine(client, info, name);
  } catch (e) {
    client.fail(e);
    throw e;
  }
}
