// The page's view of the models kept between visits (in the Cache API and in OPFS): list them,
// ask whether one is there, delete one. A split GGUF is named by its first shard's URL, as
// when loading, and counts as cached only when every shard is.

import { ErrorCodes, TesseraError } from './errors.js';
import { openAllStores } from './model-store.js';
import { shardUrls } from './split-gguf.js';

function urlsOf(url) {
  if (typeof url !== 'string' && !(url instanceof URL)) {
    throw new TesseraError(ErrorCodes.INVALID_ARGUMENT, 'a model URL must be a string or a URL object');
  }
  return shardUrls(new URL(url, globalThis.location?.href).href);
}

/**
 * Every cached model file: `[{ url, bytes, etag, lastModified, store }]` (`store`: 'cache-api'
 * or 'opfs'; a split model's shards are listed one by one). Empty where the browser keeps none.
 */
export async function listCachedModels() {
  const lists = await Promise.all((await openAllStores()).map((s) => s.list().catch(() => [])));
  return lists.flat();
}

/** Whether `url` (every shard of a split model) would load from a cache, without a download. */
export async function hasCachedModel(url) {
  const urls = urlsOf(url);
  const stores = await openAllStores();
  for (const store of stores) {
    const hits = await Promise.all(urls.map((u) => store.match(u)));
    for (const hit of hits) hit?.body?.cancel().catch(() => {});
    if (hits.every(Boolean)) return true;
  }
  return false;
}

/** Removes `url` (every shard of a split model) from every cache; true when anything was there. */
export async function deleteCachedModel(url) {
  const urls = urlsOf(url);
  let deleted = false;
  for (const store of await openAllStores()) {
    for (const u of urls) deleted = (await store.delete(u)) || deleted;
  }
  return deleted;
}
