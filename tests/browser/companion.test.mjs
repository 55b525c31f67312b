// The npm package's 'companion' backend against a real `tessera serve` (ephemeral port): the
// same Engine API over the host (answers, streaming, abort), its refusals (wrong key, a page
// origin not allowed), and 'auto' trying the host first and falling back to the in-page engine.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { launch, openPage } from './browser.mjs';
import { modelsDir, repoRoot, startServer } from './server.mjs';

const SMOLLM2 = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const KEY = 'companion-test-key';
const BIN = process.env.TESSERA_BIN
  || join(process.env.CARGO_TARGET_DIR || join(repoRoot, 'target'), 'ci', 'tessera');

let browser;
let pages; // the allowed origin
let other; // an origin the server does not allow
let host;
let companionUrl;

// Starts `tessera serve` and resolves to its URL (the "listening on" line).
function startHost(allowedOrigin) {
  host = spawn(BIN, ['serve', '-m', join(modelsDir, SMOLLM2), '--port', '0', '-c', '4096', '-np', '2', '-t', '2',
    '--api-key', KEY, '--allowed-origin', allowedOrigin], { stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    host.on('exit', (code) => reject(new Error(`tessera serve exited (${code})`)));
    createInterface({ input: host.stderr }).on('line', (line) => {
      const m = line.match(/^listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
  });
}

async function direct(path, body) {
  const res = await fetch(companionUrl + path, {
    method: 'POST', headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return res.json();
}

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} missing: build the tessera binary (cargo build --profile ci -p tessera) or set TESSERA_BIN`);
  [pages, other] = await Promise.all([startServer({ isolated: false }), startServer({ isolated: false })]);
  companionUrl = await startHost(pages.origin);
  browser = await launch();
});

after(async () => {
  host?.kill();
  await browser?.close();
  await pages?.close();
  await other?.close();
});

describe('the companion backend', () => {
  let context;
  let page;
  before(async () => {
    context = await browser.newContext();
    page = await openPage(context, pages.origin);
  });
  after(() => context.close());

  test('answers as the host does, streamed or not', async () => {
    const body = { messages: [{ role: 'user', content: 'Name a color.' }], max_tokens: 12, temperature: 0 };
    const want = (await direct('/v1/chat/completions', body)).choices[0].message.content;
    const r = await page.evaluate(async ({ url, key, body }) => {
      const engine = await window.tessera.createEngine({ backend: 'companion', companionUrl: url, apiKey: key });
      const whole = await engine.chat.completions.create(body);
      let streamed = '';
      let last;
      for await (const chunk of await engine.chat.completions.create({ ...body, stream: true })) {
        streamed += chunk.choices[0]?.delta?.content ?? '';
        last = chunk;
      }
      const ids = await engine.tokenize('Hello world');
      const text = await engine.detokenize(ids);
      return { backend: engine.backend, reason: engine.backendReason, whole, streamed, finish: last.choices[0].finish_reason, text, lastTimings: last.timings };
    }, { url: companionUrl, key: KEY, body });
    assert.equal(r.backend, 'companion');
    assert.match(r.reason, /tessera serve/);
    assert.equal(r.whole.choices[0].message.content, want);
    assert.equal(r.streamed, want);
    assert.ok(['stop', 'length'].includes(r.finish));
    assert.match(r.text, /Hello world/);
    // The in-page engine's timing names, as well as llama-server's.
    assert.ok(r.whole.timings.generation_tokens_per_second > 0);
    assert.equal(r.whole.timings.generation_tokens_per_second, r.whole.timings.predicted_per_second);
    assert.ok(r.lastTimings.prompt_tokens_evaluated > 0);
  });

  test('an abort or a break stops the stream and frees the slot', async () => {
    const r = await page.evaluate(async ({ url, key }) => {
      const engine = await window.tessera.createEngine({ backend: 'companion', companionUrl: url, apiKey: key });
      // Tens of seconds each if they ran on: a slot left busy would hold the last request.
      const long = { prompt: 'Once upon a time', max_tokens: 2000, ignore_eos: true, stream: true };
      const codes = [];
      for (let i = 0; i < 2; i++) {
        const controller = new AbortController();
        try {
          for await (const _ of await engine.completions.create(long, { signal: controller.signal })) controller.abort();
          codes.push('ended');
        } catch (e) {
          codes.push(e.code);
        }
      }
      // Leaving the loop early cancels the response too.
      for await (const _ of await engine.completions.create(long)) break;
      const t = performance.now();
      const after = await engine.completions.create({ prompt: 'Hi', max_tokens: 4 });
      return { codes, ms: performance.now() - t, text: after.choices[0].text };
    }, { url: companionUrl, key: KEY });
    assert.deepEqual(r.codes, ['ABORTED', 'ABORTED']);
    assert.ok(r.ms < 10_000, `the next request waited ${r.ms} ms`);
  });

  test("'remote' takes any OpenAI-compatible base URL (here the host's /v1)", async () => {
    const r = await page.evaluate(async ({ url, key }) => {
      const engine = await window.tessera.createEngine({ backend: 'remote', baseUrl: `${url}/v1`, apiKey: key });
      const c = await engine.completions.create({ prompt: 'The capital of France is', max_tokens: 6, temperature: 0 });
      const bad = await window.tessera.createEngine({ backend: 'remote', baseUrl: 'not a url' }).then(() => 'resolved', (e) => e.code);
      return { backend: engine.backend, model: engine.info.model, text: c.choices[0].text, bad };
    }, { url: companionUrl, key: KEY });
    const want = (await direct('/v1/completions', { prompt: 'The capital of France is', max_tokens: 6, temperature: 0 })).choices[0].text;
    assert.equal(r.backend, 'remote');
    assert.ok(r.model, 'the first model of /v1/models');
    assert.equal(r.text, want);
    assert.equal(r.bad, 'INVALID_ARGUMENT');
  });

  test('a wrong key and an unknown page are refused', async () => {
    const wrongKey = await page.evaluate(async (url) => {
      const engine = await window.tessera.createEngine({ backend: 'companion', companionUrl: url, apiKey: 'nope' }).catch((e) => e);
      if (engine.code) return engine.code;
      return engine.chat.completions.create({ messages: [{ role: 'user', content: 'x' }] }).then(() => 'resolved', (e) => e.code);
    }, companionUrl);
    assert.equal(wrongKey, 'COMPANION_REFUSED');
    const otherPage = await openPage(context, other.origin);
    const code = await otherPage.evaluate(
      ({ url, key }) => window.tessera.createEngine({ backend: 'companion', companionUrl: url, apiKey: key }).then(() => 'resolved', (e) => e.code),
      { url: companionUrl, key: KEY },
    );
    // The server's 403 carries no CORS header, so the page sees a failed fetch or the refusal.
    assert.ok(['COMPANION_REFUSED', 'COMPANION_UNAVAILABLE'].includes(code), code);
    await otherPage.close();
  });

  test("'auto' uses the host when it answers, else the page's engine, saying why", async () => {
    const r = await page.evaluate(async ({ url, key, model }) => {
      const viaHost = await window.tessera.createEngine({ backend: 'auto', companionUrl: url, apiKey: key, model });
      const local = await window.tessera.createEngine({ backend: 'auto', companionUrl: 'http://127.0.0.1:9', model, threads: 1 });
      const answer = await local.completions.create({ prompt: 'Hi', max_tokens: 2 });
      await local.unload();
      return { host: viaHost.backend, local: local.backend, reason: local.backendReason, ok: answer.choices.length };
    }, { url: companionUrl, key: KEY, model: `/models/${SMOLLM2}` });
    assert.equal(r.host, 'companion');
    assert.ok(['wasm', 'webgpu'].includes(r.local));
    assert.match(r.reason, /companion host not used/);
    assert.equal(r.ok, 1);
  });
});
