// Getting a model's bytes into the wasm loader, inside the worker: URLs (one, or a split
// GGUF's shards in order) streamed from the network or the Cache API, or a File/Blob/ArrayBuffer.
// Every chunk is copied straight into the wasm heap and dropped, so the model is never held
// twice; a download is written to the cache as it streams (with back-pressure), not afterwards.

import { ErrorCodes, TesseraError, abortError } from './errors.js';
import { openStore } from './model-store.js';

function fetchFailed(url, why, cause) {
  return new TesseraError(ErrorCodes.MODEL_FETCH_FAILED, `cannot fetch model ${url}: ${why}`, { cause });
}

// Whether a cached copy is still the server's file: a HEAD request (no body, and no CORS
// preflight) compared by ETag, else by Last-Modified. Offline, or when the server cannot say
// (an error status, no validators), the cached copy is used: a cache that needed the network
// would be no use offline.
async function stillCurrent(url, hit, signal) {
  if (!hit.etag && !hit.lastModified) return true;
  let head;
  try {
    head = await fetch(url, { method: 'HEAD', signal, cache: 'no-store' });
  } catch {
    if (signal?.aborted) throw abortError();
    return true;
  }
  if (!head.ok) return true;
  const etag = head.headers.get('etag');
  const lastModified = head.headers.get('last-modified');
  if (hit.etag && etag) return etag === hit.etag;
  if (hit.lastModified && lastModified) return lastModified === hit.lastModified;
  return true;
}

async function openUrl(url, store, { signal, revalidate }) {
  if (store) {
    const hit = await store.match(url);
    if (hit && (!revalidate || (await stillCurrent(url, hit, signal)))) {
      return { body: hit.body, length: hit.length, fromCache: true };
    }
    if (hit) await hit.body.cancel().catch(() => {}); // changed on the server: download it again
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
  return {
    body: response.body,
    length: contentLength(response),
    etag: response.headers.get('etag') ?? undefined,
    lastModified: response.headers.get('last-modified') ?? undefined,
    fromCache: false,
  };
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

/**
 * Feeds `source` into `loader` (a wasm ModelLoader). `onProgress({loaded, total})` gets the
 * bytes read so far (monotonic; `total` is undefined when the server sends no length).
 * Returns `{ fromCache }`.
 */
export async function loadSource(source, loader, { cache = true, revalidate = true, signal, onProgress }) {
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
  const store = await openStore(cache === true ? 'cache-api' : cache);
  // Every shard's response is opened first so that the total size is known from the start:
  // one progress across a split model's shards.
  const opened = [];
  for (const url of urls) opened.push(await openUrl(url, store, { signal, revalidate }));
  const lengths = opened.map((o) => o.length);
  total = lengths.every((n) => n !== undefined) ? lengths.reduce((a, b) => a + b, 0) : undefined;

  const forget = () => store && Promise.all(urls.map((u) => store.delete(u)));
  for (let i = 0; i < opened.length; i++) {
    const shard = opened[i];
    loader.beginShard(lengths[i]);
    const sink = !shard.fromCache && store ? await store.sink(urls[i], shard).catch(() => null) : null;
    try {
      await pump(shard.body, loader, report, signal, sink?.writer);
      await sink?.finish();
    } catch (e) {
      await sink?.abort(e);
      for (const later of opened.slice(i + 1)) later.body.cancel().catch(() => {});
      // Drop what may have been stored (a cached file that turned out to be bad); a GPU that
      // cannot take the model says nothing about the file, which the fallback reads again.
      if (e?.code !== ErrorCodes.BACKEND_ERROR) await forget();
      throw e;
    }
  }
  return { fromCache: opened.every((o) => o.fromCache), forget };
}
