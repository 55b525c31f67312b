// Getting a model's bytes into the wasm loader, inside the worker: URLs (one, or a split
// GGUF's shards in order) streamed from the network or the Cache API, or a File/Blob/ArrayBuffer.
// Every chunk is copied straight into the wasm heap and dropped, so the model is never held
// twice; a download is written to the cache as it streams (with back-pressure), not afterwards.

import { ErrorCodes, TesseraError, abortError } from './errors.js';

export const CACHE_NAME = 'tessera-models-v1';

async function openCache(useCache) {
  if (!useCache || typeof caches === 'undefined') return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null; // e.g. an opaque origin or storage disabled: load without a cache
  }
}

function fetchFailed(url, why, cause) {
  return new TesseraError(ErrorCodes.MODEL_FETCH_FAILED, `cannot fetch model ${url}: ${why}`, { cause });
}

async function openUrl(url, cache, signal) {
  if (cache) {
    const hit = await cache.match(url).catch(() => undefined);
    if (hit) return { response: hit, fromCache: true };
  }
  let response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    if (signal?.aborted) throw abortError();
    throw fetchFailed(url, e.message || 'network error', e);
  }
  if (!response.ok) throw fetchFailed(url, `HTTP ${response.status} ${response.statusText}`.trim());
  if (!response.body) throw fetchFailed(url, 'the response has no body');
  return { response, fromCache: false };
}

// The body's length when the server says it. A compressed response's Content-Length is the
// compressed size, not the bytes the body yields: unknown then.
function contentLength(response) {
  const encoding = response.headers.get('content-encoding');
  if (encoding && encoding !== 'identity') return undefined;
  const n = Number(response.headers.get('content-length'));
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

// Streams a body into the loader; when `cacheWriter` is given, also into the cache.
async function pump(body, loader, onBytes, signal, cacheWriter) {
  const reader = body.getReader();
  try {
    for (;;) {
      if (signal?.aborted) throw abortError();
      const { done, value } = await reader.read();
      if (done) break;
      loader.push(value); // throws INVALID_GGUF at once when the header is not GGUF
      if (cacheWriter) {
        try {
          await cacheWriter.ready; // back-pressure: the cache never falls more than a chunk behind
          cacheWriter.write(value).catch(() => {});
        } catch {
          cacheWriter = null; // the cache refused (e.g. quota): go on without it
        }
      }
      onBytes(value.byteLength);
    }
  } catch (e) {
    reader.cancel().catch(() => {});
    throw e;
  }
}

// A writable stream whose bytes become the cached response for `url`; `done` settles when the
// cache has stored it (or failed to, which only costs the cache).
function cacheSink(cache, url, response) {
  const { readable, writable } = new TransformStream();
  const headers = new Headers();
  const length = contentLength(response);
  if (length !== undefined) headers.set('content-length', String(length));
  headers.set('content-type', 'application/octet-stream');
  const done = cache.put(url, new Response(readable, { headers })).then(
    () => true,
    () => false,
  );
  return { writer: writable.getWriter(), done };
}

/**
 * Feeds `source` into `loader` (a wasm ModelLoader). `onProgress({loaded, total})` gets the
 * bytes read so far (monotonic; `total` is undefined when the server sends no length).
 * Returns `{ fromCache }`.
 */
export async function loadSource(source, loader, { useCache = true, signal, onProgress }) {
  let loaded = 0;
  let total;
  const report = (n) => {
    loaded += n;
    onProgress?.({ loaded, total });
  };

  if (source instanceof ArrayBuffer) {
    total = source.byteLength;
    loader.beginShard(total);
    const bytes = new Uint8Array(source);
    const step = 1 << 22;
    for (let i = 0; i < bytes.length; i += step) {
      if (signal?.aborted) throw abortError();
      const chunk = bytes.subarray(i, i + step);
      loader.push(chunk);
      report(chunk.byteLength);
    }
    return { fromCache: false };
  }
  if (source instanceof Blob) {
    total = source.size;
    loader.beginShard(total);
    await pump(source.stream(), loader, report, signal);
    return { fromCache: false };
  }

  const urls = Array.isArray(source) ? source : [source];
  const cache = await openCache(useCache);
  // Every shard's response is opened first so that the total size is known from the start.
  const opened = [];
  for (const url of urls) opened.push(await openUrl(url, cache, signal));
  const lengths = opened.map((o) => contentLength(o.response));
  total = lengths.every((n) => n !== undefined) ? lengths.reduce((a, b) => a + b, 0) : undefined;

  for (let i = 0; i < opened.length; i++) {
    const { response, fromCache } = opened[i];
    loader.beginShard(lengths[i]);
    const sink = !fromCache && cache ? cacheSink(cache, urls[i], response) : null;
    try {
      await pump(response.body, loader, report, signal, sink?.writer);
      if (sink) {
        await sink.writer.close().catch(() => {});
        await sink.done;
      }
    } catch (e) {
      if (sink) await sink.writer.abort(e).catch(() => {});
      // Drop what may have been stored (a cached file that turned out to be bad); a GPU that
      // cannot take the model says nothing about the file, which the fallback reads again.
      if (cache && e?.code !== ErrorCodes.BACKEND_ERROR) {
        await Promise.all(urls.map((u) => cache.delete(u).catch(() => {})));
      }
      throw e;
    }
  }
  const forget = () => cache && Promise.all(urls.map((u) => cache.delete(u).catch(() => {})));
  return { fromCache: opened.every((o) => o.fromCache), forget };
}
