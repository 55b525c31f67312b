// The JS API's request handling and model caches in headless Chromium: content parts,
// unsupported fields, logit_bias, repeat_last_n, create(body, { signal }), the SIMD128 check;
// listing, checking and deleting cached models (Cache API and OPFS), revalidation by ETag
// (and offline use), and a split GGUF loaded from its first shard's URL with one progress.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { launch, openPage } from './browser.mjs';
import { modelsDir, repoRoot, startServer } from './server.mjs';

const SMOLLM2 = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const MODEL_URL = `/models/${SMOLLM2}`;

let browser;
let server;
let splitDir;
// The revalidation route: SmolLM2's bytes with ETag `"v<version>"`; `offline` drops requests.
const etagRoute = { version: 1, offline: false, gets: 0, heads: 0 };

before(async () => {
  splitDir = mkdtempSync(join(tmpdir(), 'tessera-split-'));
  execFileSync('python3', [join(repoRoot, 'tests/browser/split-gguf.py'), join(modelsDir, SMOLLM2), splitDir, '3'], { stdio: 'ignore' });
  const model = readFileSync(join(modelsDir, SMOLLM2));
  const routes = {
    '/etag/model.gguf': (req, res) => {
      if (etagRoute.offline) return req.socket.destroy();
      etagRoute[req.method === 'HEAD' ? 'heads' : 'gets']++;
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': model.length, ETag: `"v${etagRoute.version}"` });
      res.end(req.method === 'HEAD' ? undefined : model);
    },
  };
  server = await startServer({
    isolated: false,
    routes,
    roots: [['/web/', join(repoRoot, 'web')], ['/pages/', join(repoRoot, 'tests/browser/pages')], ['/models/', modelsDir], ['/split/', splitDir]],
  });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await server?.close();
  rmSync(splitDir, { recursive: true, force: true });
});

describe('requests', () => {
  let context;
  let page;
  before(async () => {
    context = await browser.newContext();
    page = await openPage(context, server.origin);
    await page.evaluate(async (url) => {
      window.engine = await window.tessera.createEngine({ model: url, threads: 1, contextSize: 512, cache: false });
    }, MODEL_URL);
  });
  after(() => context.close());

  const code = (fn, arg) => page.evaluate(async ({ fn, arg }) => {
    try {
      await new Function('arg', `return (${fn})(arg)`)(arg);
      return 'resolved';
    } catch (e) {
      return { name: e.name, code: e.code, message: e.message };
    }
  }, { fn: fn.toString(), arg });

  test('content given as text parts is the same as the joined string; other parts are refused', async () => {
    const r = await page.evaluate(async () => {
      const ask = (content) => window.engine.chat.completions.create({ messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0 });
      const parts = await ask([{ type: 'text', text: 'What is the capital' }, { type: 'text', text: 'of France?' }]);
      const joined = await ask('What is the capital\nof France?');
      return { parts: parts.choices[0].message.content, joined: joined.choices[0].message.content };
    });
    assert.equal(r.parts, r.joined);
    const image = await code(() => window.engine.chat.completions.create({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x.png' } }] }],
    }));
    assert.equal(image.name, 'TesseraError');
    assert.equal(image.code, 'INVALID_ARGUMENT');
    assert.match(image.message, /image_url/);
  });

  test('unsupported and malformed fields reject with INVALID_ARGUMENT naming the field', async () => {
    for (const [field, value] of [['tool_choice', 'sometimes'], ['response_format', { type: 'xml' }], ['n', 2], ['logprobs', true]]) {
      const r = await code(({ field, value }) => window.engine.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], [field]: value }), { field, value });
      assert.equal(r.code, 'INVALID_ARGUMENT', field);
      assert.match(r.message, new RegExp(`'${field}[.']`));
    }
    const schema = await code(() => window.engine.chat.completions.create({
      messages: [{ role: 'user', content: 'x' }], json_schema: { type: 'object', dependentRequired: {} },
    }));
    assert.equal(schema.code, 'INVALID_ARGUMENT');
    assert.match(schema.message, /dependentRequired/);
  });

  test('structured output and tool calls, whole and streamed', async () => {
    const r = await page.evaluate(async () => {
      const schema = {
        type: 'object', additionalProperties: false, required: ['name', 'age'],
        properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
      };
      const create = (req) => window.engine.chat.completions.create({ temperature: 0, max_tokens: 64, ...req });
      const json = await create({
        messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema } },
      });
      const tools = [{ type: 'function', function: { name: 'get_weather', parameters: {
        type: 'object', properties: { city: { type: 'string', maxLength: 30 } }, required: ['city'], additionalProperties: false,
      } } }];
      const ask = { messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: 'required' };
      const whole = await create(ask);
      const calls = [];
      let finish;
      for await (const chunk of await create({ ...ask, stream: true })) {
        const choice = chunk.choices[0];
        finish = choice.finish_reason ?? finish;
        for (const c of choice.delta.tool_calls ?? []) {
          if (c.index === calls.length) calls.push({ id: c.id, name: c.function.name, arguments: '' });
          calls[c.index].arguments += c.function.arguments;
        }
      }
      return { json: json.choices[0], whole: whole.choices[0], calls, finish };
    });
    const person = JSON.parse(r.json.message.content);
    assert.ok(typeof person.name === 'string' && Number.isInteger(person.age), r.json.message.content);
    assert.equal(r.whole.finish_reason, 'tool_calls');
    assert.equal(r.whole.message.content, null);
    const [call] = r.whole.message.tool_calls;
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');
    assert.equal(r.finish, 'tool_calls');
    assert.deepEqual(r.calls.map((c) => [c.name, c.arguments]), [[call.function.name, call.function.arguments]]);
  });

  test('logit_bias steers greedy decoding; a token the model lacks is refused', async () => {
    const r = await page.evaluate(async () => {
      const [paris] = await window.engine.tokenize(' Paris', { addSpecial: false });
      const c = await window.engine.completions.create({
        prompt: 'Hello', max_tokens: 4, temperature: 0, ignore_eos: true, return_token_ids: true, logit_bias: { [paris]: 100 },
      });
      return { paris, ids: c.choices[0].token_ids };
    });
    assert.deepEqual(r.ids, [r.paris, r.paris, r.paris, r.paris]);
    const bad = await code(() => window.engine.completions.create({ prompt: 'x', logit_bias: { 9999999: 1 } }));
    assert.equal(bad.code, 'INVALID_ARGUMENT');
    assert.match(bad.message, /'logit_bias': "9999999" is not a token id below/);
  });

  test('repeat_last_n reaches the sampler (0 turns the penalty off; -2 is refused)', async () => {
    const r = await page.evaluate(async () => {
      const req = { prompt: 'a b c a b c a b c a b c a b', max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true };
      const ids = async (extra) => (await window.engine.completions.create({ ...req, ...extra })).choices[0].token_ids;
      return {
        plain: await ids({}),
        penalized: await ids({ repeat_penalty: 1.8 }),
        windowOff: await ids({ repeat_penalty: 1.8, repeat_last_n: 0 }),
      };
    });
    assert.notDeepEqual(r.penalized, r.plain, 'the penalty changed nothing: the test proves nothing');
    assert.deepEqual(r.windowOff, r.plain);
    const bad = await code(() => window.engine.completions.create({ prompt: 'x', repeat_last_n: -2 }));
    assert.equal(bad.code, 'INVALID_ARGUMENT');
  });

  test('create(body, { signal }) aborts like a signal in the body', async () => {
    const r = await page.evaluate(async () => {
      const controller = new AbortController();
      const stream = await window.engine.completions.create(
        { prompt: 'Once upon a time', max_tokens: 200, ignore_eos: true, stream: true },
        { signal: controller.signal },
      );
      let chunks = 0;
      try {
        for await (const c of stream) if (c.choices[0].text && ++chunks === 2) controller.abort();
        return { code: 'finished', chunks };
      } catch (e) {
        return { code: e.code, chunks };
      }
    });
    assert.equal(r.code, 'ABORTED');
    assert.ok(r.chunks <= 3, `${r.chunks} chunks`);
    const before = await code(() => {
      const c = new AbortController();
      c.abort();
      return window.engine.chat.completions.create({ messages: [{ role: 'user', content: 'x' }] }, { signal: c.signal });
    });
    assert.equal(before.code, 'ABORTED');
  });

  test('workerUrl starts the worker from the given URL', async () => {
    const r = await page.evaluate(async (url) => {
      const e = await window.tessera.createEngine({ model: url, threads: 1, contextSize: 256, cache: false, workerUrl: new URL('/web/src/worker.js', location.href) });
      const architecture = e.info.architecture;
      await e.unload();
      const failed = await window.tessera.createEngine({ model: url, cache: false, workerUrl: '/no/such/worker.js' }).then(() => 'resolved', (err) => err.code);
      return { architecture, failed };
    }, MODEL_URL);
    assert.deepEqual(r, { architecture: 'llama', failed: 'WORKER_FAILED' });
  });

  test('a browser without SIMD128 gets UNSUPPORTED_BACKEND with the reason', async () => {
    const r = await code(async () => {
      const validate = WebAssembly.validate;
      WebAssembly.validate = () => false;
      try {
        return await window.tessera.createEngine({ model: '/models/x.gguf' });
      } finally {
        WebAssembly.validate = validate;
      }
    });
    assert.equal(r.code, 'UNSUPPORTED_BACKEND');
    assert.match(r.message, /SIMD128/);
  });
});

describe('model caches', () => {
  let context;
  let page;
  before(async () => {
    context = await browser.newContext();
    page = await openPage(context, server.origin);
  });
  after(() => context.close());

  const load = (url, options = {}) => page.evaluate(async ({ url, options }) => {
    const events = [];
    const e = await window.tessera.createEngine({ model: url, threads: 1, contextSize: 256, onProgress: (p) => events.push(p), ...options });
    const c = await e.completions.create({ prompt: 'The capital of France is', max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true });
    const info = e.info;
    await e.unload();
    return { info, events, ids: c.choices[0].token_ids };
  }, { url, options });

  test('a cached URL is revalidated by its ETag, downloaded again when it changed, and used offline', async () => {
    const url = '/etag/model.gguf';
    assert.equal((await load(url)).info.fromCache, false);
    assert.equal(etagRoute.gets, 1);
    const second = await load(url);
    assert.equal(second.info.fromCache, true);
    assert.equal(etagRoute.heads, 1, 'no revalidation request');
    assert.equal(etagRoute.gets, 1, 'downloaded although unchanged');
    etagRoute.version = 2;
    assert.equal((await load(url)).info.fromCache, false, 'a changed file came from the cache');
    assert.equal(etagRoute.gets, 2);
    etagRoute.offline = true;
    try {
      assert.equal((await load(url)).info.fromCache, true, 'offline, the cached copy must load');
    } finally {
      etagRoute.offline = false;
    }
    const noRevalidate = await load(url, { revalidate: false });
    assert.equal(noRevalidate.info.fromCache, true);
    assert.equal(etagRoute.heads, 2, 'revalidate: false still asked the server');
  });

  test('listCachedModels, hasCachedModel and deleteCachedModel (Cache API)', async () => {
    const r = await page.evaluate(async () => {
      const t = window.tessera;
      const list = await t.listCachedModels();
      const has = await t.hasCachedModel('/etag/model.gguf');
      const deleted = await t.deleteCachedModel('/etag/model.gguf');
      return { list, has, deleted, hasAfter: await t.hasCachedModel('/etag/model.gguf'), deletedAgain: await t.deleteCachedModel('/etag/model.gguf') };
    });
    const entry = r.list.find((m) => m.url === `${server.origin}/etag/model.gguf`);
    assert.ok(entry, JSON.stringify(r.list));
    assert.deepEqual(entry, { url: entry.url, bytes: statSync(join(modelsDir, SMOLLM2)).size, etag: '"v2"', lastModified: undefined, store: 'cache-api' });
    assert.deepEqual([r.has, r.deleted, r.hasAfter, r.deletedAgain], [true, true, false, false]);
    const bad = await page.evaluate(() => window.tessera.hasCachedModel(42).then(() => 'resolved', (e) => e.code));
    assert.equal(bad, 'INVALID_ARGUMENT');
  });

  test("cache: 'opfs' keeps the model in the origin private file system", async () => {
    const first = await load(MODEL_URL, { cache: 'opfs' });
    assert.equal(first.info.fromCache, false);
    const second = await load(MODEL_URL, { cache: 'opfs' });
    assert.equal(second.info.fromCache, true);
    assert.deepEqual(second.ids, first.ids);
    const r = await page.evaluate(async (url) => {
      const t = window.tessera;
      const list = (await t.listCachedModels()).filter((m) => m.store === 'opfs');
      return { list, has: await t.hasCachedModel(url), deleted: await t.deleteCachedModel(url), hasAfter: await t.hasCachedModel(url) };
    }, MODEL_URL);
    assert.deepEqual(r.list.map((m) => [m.url, m.bytes]), [[`${server.origin}${MODEL_URL}`, statSync(join(modelsDir, SMOLLM2)).size]]);
    assert.deepEqual([r.has, r.deleted, r.hasAfter], [true, true, false]);
    const bad = await page.evaluate(() => window.tessera.createEngine({ model: '/x.gguf', cache: 'disk' }).then(() => 'resolved', (e) => e.code));
    assert.equal(bad, 'INVALID_ARGUMENT');
  });

  test("a split GGUF loads from its first shard's URL, with one progress across the shards", async () => {
    const shards = readdirSync(splitDir).sort();
    assert.equal(shards.length, 3);
    const total = shards.reduce((n, f) => n + statSync(join(splitDir, f)).size, 0);
    const whole = await load(MODEL_URL, { cache: false });
    const split = await load(`/split/${shards[0]}`);
    const downloads = split.events.filter((e) => e.phase === 'download');
    assert.ok(downloads.every((e) => e.total === total), 'a progress event without the total of all shards');
    for (let i = 1; i < split.events.length; i++) assert.ok(split.events[i].loaded >= split.events[i - 1].loaded);
    assert.deepEqual(split.events.at(-1), { loaded: total, total, progress: 1, phase: 'ready' });
    assert.deepEqual(split.ids, whole.ids);
    const r = await page.evaluate(async (first) => {
      const t = window.tessera;
      return { has: await t.hasCachedModel(first), count: (await t.listCachedModels()).filter((m) => m.url.includes('/split/')).length, deleted: await t.deleteCachedModel(first), hasAfter: await t.hasCachedModel(first) };
    }, `/split/${shards[0]}`);
    assert.deepEqual(r, { has: true, count: 3, deleted: true, hasAfter: false });
  });
});
