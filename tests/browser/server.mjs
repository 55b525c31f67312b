// A local static server for the browser tests and benchmarks: the repo's web/ package and test
// pages, and the test models from $TESSERA_MODELS under /models/. `isolated` adds COOP/COEP so
// pages are cross-origin isolated (threads); requests are counted per path (cache tests).

import { createServer } from 'node:http';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const modelsDir = resolve(process.env.TESSERA_MODELS || join(repoRoot, 'models'));
export const fixturesDir = resolve(process.env.TESSERA_FIXTURES || join(repoRoot, 'tests/fixtures'));

const TYPES = {
  '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html', '.wasm': 'application/wasm',
  '.json': 'application/json', '.gguf': 'application/octet-stream', '.ts': 'text/plain',
  '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png',
};

// URL prefix -> directory served there.
const ROOTS = [
  ['/web/', join(repoRoot, 'web')],
  ['/pages/', join(repoRoot, 'tests/browser/pages')],
  ['/models/', modelsDir],
];

/** Extra routes: path -> (req, res) handler. `cors`: files may be fetched from other origins,
 * including cross-origin isolated ones (wasm-bindgen-test's runner). `roots`: [URL prefix,
 * directory] pairs served instead of the default ones (a bundled app's dist/, the demo);
 * a directory's URL serves its index.html. */
export async function startServer({ isolated, cors = false, routes = {}, roots = ROOTS } = {}) {
  const hits = new Map();
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    hits.set(path, (hits.get(path) || 0) + 1);
    if (isolated) {
      res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
      res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    }
    if (cors) {
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
    }
    res.setHeader('Cache-Control', 'no-store');
    if (routes[path]) return routes[path](req, res);
    for (const [prefix, dir] of roots) {
      if (!path.startsWith(prefix)) continue;
      let file = normalize(join(dir, path.slice(prefix.length)));
      if (path.endsWith('/')) file = join(file, 'index.html');
      if (!file.startsWith(dir + sep) || !existsSync(file) || !statSync(file).isFile()) break;
      res.writeHead(200, {
        'Content-Type': TYPES[extname(file)] || 'application/octet-stream',
        'Content-Length': statSync(file).size,
      });
      if (req.method === 'HEAD') return res.end();
      return createReadStream(file).pipe(res);
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('not found');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    origin: `http://127.0.0.1:${port}`,
    hits,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

// `node tests/browser/server.mjs [--isolated] [--cors]`: serves until killed, prints its origin.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const s = await startServer({ isolated: process.argv.includes('--isolated'), cors: process.argv.includes('--cors') });
  console.log(s.origin);
}
