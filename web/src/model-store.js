// Where downloaded models are kept between visits: the Cache API (default) or the origin
// private file system (OPFS, `cache: 'opfs'`: for models larger than the browser lets the
// Cache API hold, and written as a file, not as one response). Both are used from the worker
// (loading) and the page (listing, deleting), through the same small interface:
//   match(url)   -> { body: ReadableStream, length, etag, lastModified } | null
//   sink(url, meta) -> { writer: WritableStreamDefaultWriter, finish(): Promise<boolean>, abort() }
//   delete(url)  -> Promise<boolean>
//   list()       -> Promise<[{ url, bytes, etag, lastModified, store }]>
// Each entry remembers the server's ETag and Last-Modified, so that a later load can ask the
// server whether the file changed (see model-source.js).

export const CACHE_NAME = 'tessera-models-v1';
export const OPFS_DIR = 'tessera-models-v1';

// Validators live in headers of our own on the cached response (the server's own headers are
// not kept: a cached response is built from the streamed bytes).
const ETAG = 'x-tessera-etag';
const LAST_MODIFIED = 'x-tessera-last-modified';

function cacheApiStore(cache) {
  return {
    kind: 'cache-api',
    async match(url) {
      const hit = await cache.match(url).catch(() => undefined);
      if (!hit?.body) return null;
      const length = Number(hit.headers.get('content-length'));
      return {
        body: hit.body,
        length: Number.isFinite(length) && length > 0 ? length : undefined,
        etag: hit.headers.get(ETAG) ?? undefined,
        lastModified: hit.headers.get(LAST_MODIFIED) ?? undefined,
      };
    },
    async sink(url, { length, etag, lastModified }) {
      const { readable, writable } = new TransformStream();
      const headers = new Headers({ 'content-type': 'application/octet-stream' });
      if (length !== undefined) headers.set('content-length', String(length));
      if (etag) headers.set(ETAG, etag);
      if (lastModified) headers.set(LAST_MODIFIED, lastModified);
      // The entry exists only once the stream has ended: an interrupted download leaves none.
      const stored = cache.put(url, new Response(readable, { headers })).then(() => true, () => false);
      const writer = writable.getWriter();
      return {
        writer,
        finish: async () => {
          await writer.close().catch(() => {});
          return stored;
        },
        abort: (e) => writer.abort(e).catch(() => {}),
      };
    },
    delete: (url) => cache.delete(url).catch(() => false),
    async list() {
      const out = [];
      for (const request of await cache.keys()) {
        const hit = await cache.match(request);
        const bytes = Number(hit?.headers.get('content-length'));
        out.push({
          url: request.url,
          bytes: Number.isFinite(bytes) ? bytes : undefined,
          etag: hit?.headers.get(ETAG) ?? undefined,
          lastModified: hit?.headers.get(LAST_MODIFIED) ?? undefined,
          store: 'cache-api',
        });
      }
      return out;
    },
  };
}

// OPFS: `<sha-256 of the URL>.gguf` holds the bytes and `<same>.json` the URL, size and
// validators. The JSON is written last, after the file is complete, so a file without it (an
// interrupted download) is never read.
async function fileName(url) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(url));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

async function readJson(dir, name) {
  try {
    const file = await (await dir.getFileHandle(name)).getFile();
    return JSON.parse(await file.text());
  } catch {
    return null;
  }
}

async function removeQuietly(dir, name) {
  try {
    await dir.removeEntry(name);
    return true;
  } catch {
    return false;
  }
}

function opfsStore(dir) {
  return {
    kind: 'opfs',
    async match(url) {
      const name = await fileName(url);
      const meta = await readJson(dir, `${name}.json`);
      if (!meta || meta.url !== url) return null;
      try {
        const file = await (await dir.getFileHandle(`${name}.gguf`)).getFile();
        if (meta.bytes !== undefined && file.size !== meta.bytes) return null;
        return { body: file.stream(), length: file.size, etag: meta.etag, lastModified: meta.lastModified };
      } catch {
        return null;
      }
    },
    async sink(url, { etag, lastModified }) {
      const name = await fileName(url);
      // An old entry's description goes first: until the new file is complete there is none.
      await removeQuietly(dir, `${name}.json`);
      const handle = await dir.getFileHandle(`${name}.gguf`, { create: true });
      if (typeof handle.createWritable !== 'function') throw new Error('this browser cannot write OPFS files from a stream');
      const writer = (await handle.createWritable()).getWriter();
      let bytes = 0;
      const write = writer.write.bind(writer);
      writer.write = (chunk) => {
        bytes += chunk.byteLength;
        return write(chunk);
      };
      return {
        writer,
        finish: async () => {
          try {
            await writer.close();
            const meta = await (await dir.getFileHandle(`${name}.json`, { create: true })).createWritable();
            await meta.write(JSON.stringify({ url, bytes, etag, lastModified }));
            await meta.close();
            return true;
          } catch {
            await removeQuietly(dir, `${name}.gguf`);
            return false;
          }
        },
        abort: async (e) => {
          await writer.abort(e).catch(() => {});
          await removeQuietly(dir, `${name}.gguf`);
        },
      };
    },
    async delete(url) {
      const name = await fileName(url);
      const described = await removeQuietly(dir, `${name}.json`);
      const stored = await removeQuietly(dir, `${name}.gguf`);
      return described || stored;
    },
    async list() {
      const out = [];
      for await (const [name, handle] of dir.entries()) {
        if (handle.kind !== 'file' || !name.endsWith('.json')) continue;
        const meta = await readJson(dir, name);
        if (meta?.url) out.push({ url: meta.url, bytes: meta.bytes, etag: meta.etag, lastModified: meta.lastModified, store: 'opfs' });
      }
      return out;
    },
  };
}

/**
 * The store for a `cache` option (`true` or 'cache-api': the Cache API; 'opfs': OPFS; false:
 * none), or null when the browser does not offer it here (then models load without a cache).
 */
export async function openStore(kind) {
  if (kind === false) return null;
  try {
    if (kind === 'opfs') {
      const root = await globalThis.navigator?.storage?.getDirectory?.();
      return root ? opfsStore(await root.getDirectoryHandle(OPFS_DIR, { create: true })) : null;
    }
    if (typeof caches === 'undefined') return null;
    return cacheApiStore(await caches.open(CACHE_NAME));
  } catch {
    return null; // e.g. an opaque origin, private browsing or storage disabled
  }
}

/** Every store this browser offers (for listing and deleting across both). */
export async function openAllStores() {
  return (await Promise.all([openStore('cache-api'), openStore('opfs')])).filter(Boolean);
}
