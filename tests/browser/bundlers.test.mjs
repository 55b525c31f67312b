// The npm package inside real apps: `npm pack` of web/ installed into a fresh copy of
// examples/vite-app (and examples/webpack-app), type-checked against index.d.ts, built for
// production, and run in headless Chromium from the build output alone: the bundler must
// have found and emitted the worker, the wasm glue and the wasm (threaded and single builds).
// Needs npm registry access (the apps' lockfiles) and the wasm builds in web/pkg-*.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

import { launch } from './browser.mjs';
import { prepareApp } from './bundled-app.mjs';
import { modelsDir, startServer } from './server.mjs';

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';

let browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

// Opens the built app with `query` and waits for its answer (or its error).
async function runApp(origin, query) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    page.on('pageerror', (e) => console.error('[page error]', e.message));
    await page.goto(`${origin}/?${new URLSearchParams(query)}`);
    await page.waitForFunction(() => document.body.dataset.state, null, { timeout: 240_000 });
    return await page.evaluate(() => ({ state: document.body.dataset.state, result: window.result, failure: window.failure }));
  } finally {
    await context.close();
  }
}

function filesUnder(dir) {
  return readdirSync(dir, { recursive: true }).map(String);
}

// webpack bakes the build machine's path into `import.meta.url`, which wasm-bindgen-rayon's
// helper workers need to re-import the glue: there the engine falls back to the
// single-threaded build and says why (docs/js-api.md, "In a bundled app").
const APPS = [
  { name: 'vite-app', distDir: 'dist', typecheck: true, threaded: 'threads' },
  { name: 'webpack-app', distDir: 'dist', typecheck: false, threaded: 'single' },
];

for (const { name, distDir, typecheck, threaded } of APPS) {
  describe(`examples/${name}`, () => {
    let app;
    let server;
    before(async () => {
      app = prepareApp(name);
      if (typecheck) app.run('typecheck');
      app.run('build');
      const dist = join(app.dir, distDir);
      server = await startServer({ isolated: true, roots: [['/models/', modelsDir], ['/', dist]] });
    });
    after(async () => {
      await server?.close();
      app?.cleanup();
    });

    test('the production build holds the worker and every wasm build', () => {
      const files = filesUnder(join(app.dir, distDir));
      const wasm = files.filter((f) => f.endsWith('.wasm'));
      assert.equal(wasm.length, 4, `wasm files emitted: ${wasm.join(', ')}`);
    });

    test(`runs a chat answer with threads asked for (cross-origin isolated): the ${threaded} build`, async () => {
      const r = await runApp(server.origin, { model: MODEL, threads: 2 });
      assert.equal(r.state, 'done', JSON.stringify(r.failure));
      assert.equal(r.result.info.build, threaded);
      if (threaded === 'single') assert.match(r.result.info.buildReason, /threaded build could not start/);
      else assert.equal(r.result.info.buildReason, undefined);
      assert.match(r.result.text, /Paris/);
      assert.ok(r.result.timings.generation_tokens_per_second > 0);
    });

    test('and in the single-threaded build', async () => {
      const r = await runApp(server.origin, { model: MODEL, threads: 1 });
      assert.equal(r.state, 'done', JSON.stringify(r.failure));
      assert.equal(r.result.info.build, 'single');
      assert.match(r.result.text, /Paris/);
    });
  });
}
