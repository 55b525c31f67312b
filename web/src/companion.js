// Engines that hand requests to an OpenAI-compatible server instead of a worker:
// 'companion' (`tessera serve` on this machine: bigger models, native speed) and 'remote' (any
// OpenAI-compatible base URL: vLLM, TGI, llama-server, a hosted API). Same Engine API as the
// in-page engine: create() with or without streaming, signal, tokenize/detokenize (companion
// only), unload(); failures are TesseraErrors with the package's codes.

import { ErrorCodes, TesseraError, abortError } from './errors.js';

export const DEFAULT_COMPANION_URL = 'http://127.0.0.1:8080';

// Fields the in-page engine does not send to a server (its own options).
const LOCAL_ONLY = ['signal', 'return_token_ids'];

function errorOfStatus(status, body) {
  const message = body?.error?.message ?? `HTTP ${status}`;
  const type = body?.error?.type;
  if (status === 400 && type === 'exceed_context_size_error') return new TesseraError(ErrorCodes.CONTEXT_FULL, message);
  if (status === 400 || status === 404 || status === 413) return new TesseraError(ErrorCodes.INVALID_ARGUMENT, message);
  if (status === 401 || status === 403) return new TesseraError(ErrorCodes.COMPANION_REFUSED, message);
  if (status === 503) return new TesseraError(ErrorCodes.COMPANION_UNAVAILABLE, message);
  return new TesseraError(ErrorCodes.BACKEND_ERROR, message);
}

class HttpClient {
  constructor(baseUrl, apiKey) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.apiKey = apiKey;
  }

  headers(json) {
    const h = {};
    if (json) h['Content-Type'] = 'application/json';
    if (this.apiKey) h.Authorization = `Bearer ${this.apiKey}`;
    return h;
  }

  // fetch with the package's errors: a network failure is COMPANION_UNAVAILABLE, an HTTP error
  // its code, an abort ABORTED.
  async fetch(path, { method = 'GET', body, signal, base = this.baseUrl } = {}) {
    let res;
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (e) {
      if (signal?.aborted) throw abortError();
      throw new TesseraError(ErrorCodes.COMPANION_UNAVAILABLE, `cannot reach ${base}: ${e?.message ?? e}`);
    }
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      let parsed;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { error: { message: text || `HTTP ${res.status}` } };
      }
      throw errorOfStatus(res.status, parsed);
    }
    return res;
  }
}

// The `data:` payloads of a server-sent event stream, as they arrive. Leaving early (a
// `break` in the caller's for-await) cancels the response, which frees the server's slot.
async function* sseData(body, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let ended = false;
  try {
    for (;;) {
      let step;
      try {
        step = await reader.read();
      } catch (e) {
        ended = true;
        if (signal?.aborted) throw abortError();
        throw new TesseraError(ErrorCodes.COMPANION_UNAVAILABLE, `the stream broke: ${e?.message ?? e}`);
      }
      if (step.done) {
        ended = true;
        return;
      }
      buffer += decoder.decode(step.value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
        if (data) yield data;
      }
    }
  } finally {
    if (!ended) await reader.cancel().catch(() => {});
    reader.releaseLock?.();
  }
}

// The in-page engine's `timings` names next to llama-server's, so that a page reads the same
// fields whichever engine answered.
function withEngineTimings(response) {
  const t = response?.timings;
  if (t && t.predicted_per_second !== undefined) {
    Object.assign(t, {
      prompt_tokens_evaluated: t.prompt_n,
      prompt_ms: t.prompt_ms,
      generation_ms: t.predicted_ms,
      prompt_tokens_per_second: t.prompt_per_second,
      generation_tokens_per_second: t.predicted_per_second,
    });
  }
  return response;
}

export class RemoteEngine {
  constructor(client, { backend, reason, model, tokenizeBase }) {
    this._client = client;
    this.backend = backend;
    this.backendReason = reason;
    this.info = { backend, backendReason: reason, model };
    this._model = model;
    this._tokenizeBase = tokenizeBase;
    this._closed = null;
    this.chat = { completions: { create: (req, opts) => this._create('/chat/completions', req, opts) } };
    this.completions = { create: (req, opts) => this._create('/completions', req, opts) };
  }

  async _create(path, req, opts = {}) {
    if (this._closed) throw this._closed;
    if (!req || typeof req !== 'object') throw new TesseraError(ErrorCodes.INVALID_ARGUMENT, 'create() needs a request object');
    const signal = opts.signal ?? req.signal;
    if (signal?.aborted) throw abortError();
    const body = { model: this._model, ...req };
    for (const k of LOCAL_ONLY) delete body[k];
    const res = await this._client.fetch(path, { method: 'POST', body, signal });
    if (!req.stream) return withEngineTimings(await res.json());
    return this._chunks(res, signal);
  }

  async *_chunks(res, signal) {
    for await (const data of sseData(res.body, signal)) {
      if (data === '[DONE]') return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw errorOfStatus(chunk.error.code ?? 500, chunk);
      yield withEngineTimings(chunk);
    }
  }

  /** Token ids of `text` (the companion's /tokenize; a remote server may not have it). */
  async tokenize(text, { addSpecial = true, parseSpecial = true } = {}) {
    const res = await this._client.fetch('/tokenize', {
      method: 'POST', base: this._tokenizeBase, body: { content: text, add_special: addSpecial, parse_special: parseSpecial },
    });
    return (await res.json()).tokens;
  }

  async detokenize(ids) {
    const res = await this._client.fetch('/detokenize', { method: 'POST', base: this._tokenizeBase, body: { tokens: Array.from(ids) } });
    return (await res.json()).content;
  }

  /** Later calls reject with UNLOADED (the server keeps running). */
  async unload() {
    this._closed = new TesseraError(ErrorCodes.UNLOADED, 'the engine was unloaded');
  }
}

/**
 * An engine on `tessera serve` at `companionUrl`: checks /health (within `timeoutMs`) and picks
 * the server's first model unless `model` names one.
 */
export async function createCompanionEngine({ companionUrl = DEFAULT_COMPANION_URL, apiKey, model, signal, timeoutMs = 3000 } = {}) {
  const root = String(companionUrl).replace(/\/+$/, '');
  const client = new HttpClient(`${root}/v1`, apiKey);
  const timeout = AbortSignal.timeout(timeoutMs);
  const checkSignal = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let models;
  try {
    await client.fetch('/health', { base: root, signal: checkSignal });
    models = await (await client.fetch('/models', { signal: checkSignal })).json();
  } catch (e) {
    if (signal?.aborted) throw abortError();
    if (timeout.aborted) throw new TesseraError(ErrorCodes.COMPANION_UNAVAILABLE, `no companion host answered at ${root} within ${timeoutMs} ms`);
    throw e;
  }
  const name = model ?? models?.data?.[0]?.id;
  return new RemoteEngine(client, {
    backend: 'companion',
    reason: `tessera serve at ${root} runs ${name}`,
    model: name,
    tokenizeBase: root,
  });
}

/** An engine on any OpenAI-compatible server (`baseUrl` ends in /v1 for most). */
export async function createRemoteEngine({ baseUrl, apiKey, model, signal } = {}) {
  if (typeof baseUrl !== 'string' || !/^https?:\/\//.test(baseUrl)) {
    throw new TesseraError(ErrorCodes.INVALID_ARGUMENT, "backend 'remote' needs baseUrl (http(s)://host/v1)");
  }
  const client = new HttpClient(baseUrl, apiKey);
  let name = model;
  if (!name) {
    const models = await (await client.fetch('/models', { signal })).json();
    name = models?.data?.[0]?.id;
  }
  return new RemoteEngine(client, { backend: 'remote', reason: `OpenAI-compatible server at ${baseUrl}`, model: name, tokenizeBase: baseUrl.replace(/\/v1\/?$/, '') });
}
