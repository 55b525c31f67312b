// `npm run demo`: serves the demo with the headers that make the page cross-origin isolated
// (COOP/COEP, so the engine can use threads): web/ at /, the demo at /demo/, the repository's
// models/ (or $TESSERA_MODELS) at /models/. PORT (default 5173) picks the port.

import { createServer } from 'node:http';
import { spawnSync } from 'node:child_process';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const webDir = resolve(fileURLToPath(new URL('..', import.meta.url)));
const modelsDir = resolve(process.env.TESSERA_MODELS || join(webDir, '..', 'models'));
/** The demo page's first preset (web/demo/demo.js). */
const DEFAULT_MODEL = 'SmolLM2-135M-Instruct.Q4_1.gguf';

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json', '.png': 'image/png',
};

function fileFor(path) {
  const [prefix, dir] = path.startsWith('/models/') ? ['/models/', modelsDir] : ['/', webDir];
  let file = normalize(join(dir, path.slice(prefix.length)));
  if (!file.startsWith(dir + sep)) return null;
  try {
    if (statSync(file).isDirectory()) file = join(file, 'index.html');
    return statSync(file).isFile() ? file : null;
  } catch {
    return null;
  }
}

/** Starts the server; `port: 0` picks a free one. Resolves to `{ url, close() }`. */
export async function startDemoServer({ port = Number(process.env.PORT ?? 5173), host = '127.0.0.1' } = {}) {
  const server = createServer((req, res) => {
    res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
    res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (path === '/' || path === '/demo') {
      res.writeHead(302, { Location: '/demo/' }).end();
      return;
    }
    const file = fileFor(path);
    if (!file) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
      return;
    }
    const { size, mtime } = statSync(file);
    // Validators, so the package's cache revalidation has something to compare.
    const etag = `"${size.toString(16)}-${mtime.getTime().toString(16)}"`;
    res.writeHead(200, {
      'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream',
      'Content-Length': size,
      'Last-Modified': mtime.toUTCString(),
      ETag: etag,
      'Cache-Control': 'no-cache',
    });
    if (req.method === 'HEAD') return res.end();
    createReadStream(file).pipe(res);
  });
  await new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, host, ok);
  });
  const url = `http://${host === '0.0.0.0' ? 'localhost' : host}:${server.address().port}/demo/`;
  return { url, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

/**
 * What `npm run demo` needs before it serves: the wasm builds (`npm run build`), else it stops
 * with the command to run; the default model, fetched with its progress when missing (the page
 * says how to get any other model the server lacks).
 */
function prepare() {
  if (!existsSync(join(webDir, 'pkg-st', 'tessera_wasm.js'))) {
    console.error('The demo needs the wasm builds: run `npm run build` first.');
    process.exit(1);
  }
  if (existsSync(join(modelsDir, DEFAULT_MODEL))) return;
  const fetchModels = join(webDir, '..', 'scripts', 'fetch-models.sh');
  const { status } = spawnSync(fetchModels, ['smollm2'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, TESSERA_MODELS: modelsDir },
  });
  if (status !== 0) {
    console.error(`The default model could not be fetched: run scripts/fetch-models.sh smollm2 (models from ${modelsDir}).`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  prepare();
  const { url } = await startDemoServer({ host: process.env.HOST ?? '127.0.0.1' });
  console.log(`Tessera demo: ${url}  (models from ${modelsDir}; Ctrl+C stops)`);
}
