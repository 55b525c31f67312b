// End-to-end tests of the npm package (web/) in headless Chromium: load SmolLM2 from a local
// server, greedy tokens against llama.cpp's fixture, streaming, abort, progress, the cache,
// error codes, and which wasm build runs with and without cross-origin isolation (and with and
// without relaxed SIMD).
// Run: node --test tests/browser/  (scripts/test-browser.sh builds the wasm first).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { launch, openPage } from './browser.mjs';
import { fixturesDir, modelsDir, startServer } from './server.mjs';

const SMOLLM2 = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const GEMMA3 = 'gemma-3-270m-q4_k_m.gguf';
const MODEL_URL = `/models/${SMOLLM2}`;

function fixture(name) {
  const path = join(fixturesDir, name);
  assert.ok(existsSync(path), `fixture ${path} is missing (set TESSERA_FIXTURES)`);
  return readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
}

let browser;
let plain; // server without COOP/COEP
let isolated; // server with them

before(async () => {
  assert.ok(existsSync(join(modelsDir, SMOLLM2)), `${SMOLLM2} missing in ${modelsDir}: run scripts/fetch-models.sh`);
  // A file that starts like GGUF and then is garbage, and one that is not GGUF at all.
  const corrupt = Buffer.alloc(4096, 0xab);
  corrupt.write('GGUF', 0, 'latin1');
  corrupt.writeUInt32LE(3, 4);
  const routes = {
    '/corrupt.gguf': (req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': corrupt.length });
      res.end(corrupt);
    },
  };
  [plain, isolated] = await Promise.all([startServer({ isolated: false, routes }), startServer({ isolated: true, routes })]);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await plain?.close();
  await isolated?.close();
});

describe('SmolLM2 in a plain page (single-threaded build)', () => {
  let context;
  let page;
  before(async () => {
    context = await browser.newContext();
    page = await openPage(context, plain.origin);
  });
  after(() => context.close());

  test('loads with monotonic progress ending at 100 %, single-threaded build', async () => {
    const r = await page.evaluate(async (url) => {
      const events = [];
      const engine = await window.tessera.createEngine({ model: url, threads: 2, contextSize: 512, onProgress: (p) => events.push(p) });
      window.engine = engine;
      return { events, info: engine.info };
    }, MODEL_URL);
    assert.equal(r.info.build, 'single');
    // This Chromium has relaxed SIMD and fuses relaxed_madd (x86-64 with FMA3).
    assert.equal(r.info.simd, 'simd128+relaxed');
    assert.equal(r.info.architecture, 'llama');
    assert.equal(r.info.fromCache, false);
    assert.ok(r.events.length > 2, `only ${r.events.length} progress events`);
    for (let i = 1; i < r.events.length; i++) {
      assert.ok(r.events[i].loaded >= r.events[i - 1].loaded, 'loaded went down');
      assert.ok((r.events[i].progress ?? 0) >= (r.events[i - 1].progress ?? 0), 'progress went down');
    }
    const last = r.events.at(-1);
    assert.equal(last.progress, 1);
    assert.equal(last.loaded, 98_362_432);
    assert.equal(last.phase, 'ready');
  });

  test('greedy 32 tokens are llama.cpp\'s (fixture)', async () => {
    const fx = fixture('greedy_smollm2.jsonl')[0];
    const r = await page.evaluate(async (prompt) => {
      const ids = await window.engine.tokenize(prompt);
      const c = await window.engine.completions.create({ prompt, max_tokens: 32, temperature: 0, ignore_eos: true, return_token_ids: true });
      return { ids, c };
    }, fx.prompt);
    assert.deepEqual(r.ids, fx.prompt_ids);
    assert.deepEqual(r.c.choices[0].token_ids, fx.gen_ids.slice(0, 32));
    assert.equal(r.c.choices[0].finish_reason, 'length');
    assert.equal(r.c.usage.completion_tokens, 32);
    assert.equal(r.c.usage.prompt_tokens, fx.prompt_ids.length);
    assert.ok(r.c.timings.generation_tokens_per_second > 0);
    const expected = await page.evaluate((ids) => window.engine.detokenize(ids), fx.gen_ids.slice(0, 32));
    assert.equal(r.c.choices[0].text, expected);
  });

  test('speculative requests give the plain text, with draft statistics', async () => {
    const r = await page.evaluate(async () => {
      const prompt = 'a b c d e f g a b c d e f g a b c d e f g a b c d e f g a b';
      const req = { prompt, max_tokens: 40, temperature: 0, ignore_eos: true, return_token_ids: true };
      const plain = await window.engine.completions.create(req);
      const spec = await window.engine.completions.create({
        ...req, speculative: { type: 'ngram-simple', ngram_size_n: 3, draft_max: 8 },
      });
      const code = (p) => p.then(() => 'resolved', (e) => e.code);
      const bad = await code(window.engine.completions.create({ ...req, speculative: { type: 'draft' } }));
      return { plain, spec, bad };
    });
    assert.deepEqual(r.spec.choices[0].token_ids, r.plain.choices[0].token_ids);
    assert.equal(r.spec.choices[0].text, r.plain.choices[0].text);
    assert.equal(r.plain.timings.draft_n, undefined);
    assert.ok(r.spec.timings.draft_n_accepted > 0, JSON.stringify(r.spec.timings));
    assert.ok(r.spec.timings.draft_n >= r.spec.timings.draft_n_accepted);
    assert.match(r.spec.timings.draft_stats[0], /^draft acceptance rate = /);
    assert.equal(r.bad, 'INVALID_ARGUMENT');
  });

  test('the SIMD128 build (simd: \'simd128\') gives the same greedy tokens', async () => {
    const fx = fixture('greedy_smollm2.jsonl')[0];
    const r = await page.evaluate(async ({ url, prompt }) => {
      const e = await window.tessera.createEngine({ model: url, threads: 1, simd: 'simd128', contextSize: 256 });
      const c = await e.completions.create({ prompt, max_tokens: 32, temperature: 0, ignore_eos: true, return_token_ids: true });
      const info = e.info;
      await e.unload();
      return { info, ids: c.choices[0].token_ids };
    }, { url: MODEL_URL, prompt: fx.prompt });
    assert.equal(r.info.build, 'single');
    assert.equal(r.info.simd, 'simd128');
    assert.deepEqual(r.ids, fx.gen_ids.slice(0, 32));
  });

  test('streaming chat gives the same text as non-streaming, in several chunks', async () => {
    const r = await page.evaluate(async () => {
      const req = { messages: [{ role: 'user', content: 'What is the capital of France?' }], max_tokens: 12, temperature: 0 };
      const whole = await window.engine.chat.completions.create(req);
      const chunks = [];
      for await (const c of await window.engine.chat.completions.create({ ...req, stream: true })) chunks.push(c);
      return { whole, chunks };
    });
    assert.equal(r.whole.object, 'chat.completion');
    assert.equal(r.whole.choices[0].message.role, 'assistant');
    assert.ok(r.chunks.length > 3, `${r.chunks.length} chunks`);
    assert.equal(r.chunks[0].object, 'chat.completion.chunk');
    assert.equal(r.chunks[0].choices[0].delta.role, 'assistant');
    const streamed = r.chunks.map((c) => c.choices[0].delta.content).join('');
    assert.equal(streamed, r.whole.choices[0].message.content);
    assert.ok(streamed.length > 0);
    assert.ok(r.chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
    assert.equal(r.chunks.at(-1).choices[0].finish_reason, r.whole.choices[0].finish_reason);
    assert.deepEqual(r.chunks.at(-1).usage, r.whole.usage);
  });

  test('abort stops within one token and rejects with ABORTED', async () => {
    const r = await page.evaluate(async () => {
      const controller = new AbortController();
      const stream = await window.engine.completions.create({
        prompt: 'Once upon a time', max_tokens: 200, temperature: 0, ignore_eos: true, stream: true, signal: controller.signal,
      });
      let received = 0;
      let code = null;
      try {
        for await (const c of stream) {
          if (c.choices[0].text) received++;
          if (received === 3) controller.abort();
        }
      } catch (e) {
        code = e.code;
      }
      // The engine is free again at once and still answers.
      const after = await window.engine.completions.create({ prompt: 'Hello', max_tokens: 2, temperature: 0 });
      return { received, code, after: after.usage.completion_tokens };
    });
    assert.equal(r.code, 'ABORTED');
    // A token may already be on its way when the abort is posted, never more.
    assert.ok(r.received <= 4, `${r.received} chunks arrived, abort came after 3`);
    assert.equal(r.after, 2);
  });

  test('a second load comes from the cache', async () => {
    const before = plain.hits.get(MODEL_URL);
    const r = await page.evaluate(async (url) => {
      const e = await window.tessera.createEngine({ model: url, threads: 1, contextSize: 256 });
      const info = e.info;
      await e.unload();
      let code = null;
      try { await e.tokenize('x'); } catch (err) { code = err.code; }
      return { info, code };
    }, MODEL_URL);
    assert.equal(r.info.fromCache, true);
    assert.equal(plain.hits.get(MODEL_URL), before, 'the model was fetched again');
    assert.equal(r.code, 'UNLOADED');
  });

  test('a bad URL rejects with MODEL_FETCH_FAILED, a corrupt file with INVALID_GGUF', async () => {
    const r = await page.evaluate(async () => {
      const code = (p) => p.then(() => 'resolved', (e) => e.code);
      return {
        missing: await code(window.tessera.createEngine({ model: '/models/no-such-model.gguf' })),
        unreachable: await code(window.tessera.createEngine({ model: 'http://127.0.0.1:9/x.gguf' })),
        corrupt: await code(window.tessera.createEngine({ model: '/corrupt.gguf' })),
        notGguf: await code(window.tessera.createEngine({ model: new Blob(['<html>hello</html>']) })),
        companion: await code(window.tessera.createEngine({ backend: 'companion', companionUrl: 'http://127.0.0.1:9' })),
        badOption: await code(window.engine.completions.create({ prompt: 'x', top_p: 7 })),
        tooLong: await code(window.engine.completions.create({ prompt: 'word '.repeat(600) })),
      };
    });
    assert.deepEqual(r, {
      missing: 'MODEL_FETCH_FAILED',
      unreachable: 'MODEL_FETCH_FAILED',
      corrupt: 'INVALID_GGUF',
      notGguf: 'INVALID_GGUF',
      companion: 'COMPANION_UNAVAILABLE',
      badOption: 'INVALID_ARGUMENT',
      tooLong: 'CONTEXT_FULL',
    });
    // A corrupt download is not kept in the cache.
    const cached = await page.evaluate(async () => !!(await (await caches.open('tessera-models-v1')).match(new URL('/corrupt.gguf', location.href).href)));
    assert.equal(cached, false);
  });
});

describe('cross-origin isolated page', () => {
  test('asking for more threads than cores uses one per core', async () => {
    const context = await browser.newContext();
    try {
      const page = await openPage(context, isolated.origin);
      const r = await page.evaluate(async (url) => {
        const engine = await window.tessera.createEngine({ model: url, threads: 64, contextSize: 256 });
        const c = await engine.completions.create({ prompt: 'Hi', max_tokens: 4, temperature: 0 });
        const info = engine.info;
        await engine.unload();
        return { info, cores: navigator.hardwareConcurrency, tokens: c.usage.completion_tokens };
      }, MODEL_URL);
      assert.ok(r.cores >= 2, `the test needs two cores, has ${r.cores}`);
      assert.equal(r.info.build, 'threads');
      assert.equal(r.info.threads, r.cores);
      assert.equal(r.tokens, 4);
    } finally {
      await context.close();
    }
  });

  test('Gemma 3 gives llama.cpp\'s greedy tokens (plain reference, threaded build)', async () => {
    // The first prompt parted from the reference at token 11 while the attention's softmax used
    // wasm's own expf (crates/backend-cpu/src/ops/attention.rs, `expf`).
    const context = await browser.newContext();
    try {
      const page = await openPage(context, isolated.origin);
      const fixtures = fixture('greedy_gemma3_norepack.jsonl');
      const r = await page.evaluate(async ({ url, prompts }) => {
        const engine = await window.tessera.createEngine({ model: url, threads: 2, contextSize: 256 });
        const out = [];
        for (const prompt of prompts) {
          const ids = await engine.tokenize(prompt);
          const c = await engine.completions.create({ prompt, max_tokens: 32, temperature: 0, ignore_eos: true, return_token_ids: true });
          out.push({ ids, gen: c.choices[0].token_ids });
        }
        const info = engine.info;
        await engine.unload();
        return { info, out };
      }, { url: `/models/${GEMMA3}`, prompts: fixtures.map((f) => f.prompt) });
      assert.equal(r.info.architecture, 'gemma3');
      assert.equal(r.info.build, 'threads');
      fixtures.forEach((fx, i) => {
        assert.deepEqual(r.out[i].ids, fx.prompt_ids, `prompt ${i} tokens`);
        assert.deepEqual(r.out[i].gen, fx.gen_ids.slice(0, 32), `prompt ${i}: ${JSON.stringify(fx.prompt)}`);
      });
    } finally {
      await context.close();
    }
  });

  test('uses the threaded build and gives the same greedy tokens', async () => {
    const context = await browser.newContext();
    try {
      const page = await openPage(context, isolated.origin);
      const fx = fixture('greedy_smollm2.jsonl')[0];
      const r = await page.evaluate(async ({ url, prompt }) => {
        const out = {};
        for (const simd of ['auto', 'simd128']) {
          const engine = await window.tessera.createEngine({ model: url, threads: 2, simd, contextSize: 256 });
          const c = await engine.completions.create({ prompt, max_tokens: 32, temperature: 0, ignore_eos: true, return_token_ids: true });
          out[simd] = { info: engine.info, ids: c.choices[0].token_ids };
          await engine.unload();
        }
        return { isolated: window.crossOriginIsolated, ...out };
      }, { url: MODEL_URL, prompt: fx.prompt });
      assert.equal(r.isolated, true);
      for (const [simd, want] of [['auto', 'simd128+relaxed'], ['simd128', 'simd128']]) {
        assert.equal(r[simd].info.build, 'threads');
        assert.equal(r[simd].info.threads, 2);
        assert.equal(r[simd].info.simd, want);
        assert.deepEqual(r[simd].ids, fx.gen_ids.slice(0, 32), `simd: ${simd}`);
      }
    } finally {
      await context.close();
    }
  });
});
