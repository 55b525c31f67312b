// Split GGUF files (llama.cpp's gguf-split): shards named `<prefix>-00001-of-00003.gguf`.
// As llama.cpp does, the first shard's name stands for the whole model: the others' URLs are
// derived from it, so a page passes one URL for a split model too.

// llama.cpp's split_path format: "%s-%05d-of-%05d.gguf".
const SHARD_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

/**
 * The URLs of every shard when `url` names the first shard of a split GGUF (query and hash
 * kept, e.g. `?download=true`), else `[url]`.
 */
export function shardUrls(url) {
  const u = new URL(url);
  const m = SHARD_NAME.exec(u.pathname);
  if (!m || Number(m[2]) !== 1) return [u.href];
  const count = Number(m[3]);
  if (count < 1) return [u.href];
  const urls = [];
  for (let i = 1; i <= count; i++) {
    const shard = new URL(u.href);
    shard.pathname = `${m[1]}-${String(i).padStart(5, '0')}-of-${m[3]}.gguf`;
    urls.push(shard.href);
  }
  return urls;
}
