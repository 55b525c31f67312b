// The page-side checks of a request (web/src/request.js: names and the types the worker
// needs; the engine checks values, as `tessera serve` does: api.test.mjs), the capability
// check (web/src/capabilities.js) and split-GGUF names (web/src/split-gguf.js), in Node: no
// browser needed. e2e.test.mjs checks the same paths through a loaded engine.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { generationPayload, requestSignal } from '../../web/src/request.js';
import { missingWasmFeatures } from '../../web/src/capabilities.js';
import { shardUrls } from '../../web/src/split-gguf.js';

const rejects = (f, pattern) => assert.throws(f, (e) => e.name === 'TesseraError' && e.code === 'INVALID_ARGUMENT' && pattern.test(e.message));

describe('request bodies', () => {
  test('messages and the generation fields reach the engine as given', () => {
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }];
    const p = generationPayload('chat', { messages, n: 1, logprobs: false, tools: [], model: 'gpt-x', user: 'u', parse_special_in_content: true });
    assert.deepEqual(p.messages, messages);
    assert.deepEqual(p.options, { n: 1, logprobs: false, tools: [], parse_special_in_content: true, seed: p.options.seed });
    assert.ok(Number.isInteger(p.options.seed));
    const q = generationPayload('text', { prompt: 'x', logit_bias: { 3: -100 }, repeat_last_n: 0, seed: 1, top_k: 7 });
    assert.deepEqual(q.options, { logit_bias: { 3: -100 }, repeat_last_n: 0, seed: 1, top_k: 7 });
    assert.equal(q.prompt, 'x');
  });

  test('seed -1 draws a seed as no seed does', () => {
    const seeds = new Set(Array.from({ length: 8 }, () => generationPayload('text', { prompt: 'x', seed: -1 }).options.seed));
    for (const s of seeds) assert.ok(Number.isInteger(s) && s >= 0);
    assert.ok(seeds.size > 1);
  });

  test('proxied messages and options reach the worker as plain, cloneable data', () => {
    const messages = new Proxy([new Proxy({ role: 'user', content: 'Hi', onClick() {} }, {})], {});
    const p = generationPayload('chat', { messages, logit_bias: new Proxy({ 5: -Infinity }, {}), stop: ['\n'] });
    assert.deepEqual(p.messages, [{ role: 'user', content: 'Hi', onClick: undefined }]);
    assert.deepEqual(p.options.logit_bias, { 5: -Infinity });
    structuredClone(p);
    const deep = [];
    let at = deep;
    for (let i = 0; i < 70; i++) at = at[0] = [];
    rejects(() => generationPayload('chat', { messages: deep }), /nests deeper than 64 levels/);
  });

  test('stream and return_token_ids must be booleans', () => {
    for (const flag of ['stream', 'return_token_ids']) {
      rejects(() => generationPayload('text', { prompt: 'x', [flag]: 'yes' }), new RegExp(`'${flag}' must be true or false`));
    }
    assert.equal(generationPayload('text', { prompt: 'x', stream: true }).stream, true);
  });

  test('unknown fields and a prompt that is not a string are refused on the page', () => {
    for (const field of ['mirostat', 'logit_bias_pairs']) {
      rejects(() => generationPayload('chat', { messages: [], [field]: {} }), new RegExp(`'${field}' is not supported`));
    }
    rejects(() => generationPayload('text', { prompt: 1 }), /prompt must be a string/);
    rejects(() => generationPayload('text', null), /needs a request object/);
  });

  test('signal from the body, from create(body, { signal }), or both', () => {
    const a = new AbortController();
    const b = new AbortController();
    assert.equal(requestSignal({ signal: a.signal }, undefined), a.signal);
    assert.equal(requestSignal({}, { signal: b.signal }), b.signal);
    const both = requestSignal({ signal: a.signal }, { signal: b.signal });
    assert.equal(both.aborted, false);
    b.abort();
    assert.equal(both.aborted, true);
    rejects(() => requestSignal({}, 'x'), /options must be an object/);
    rejects(() => requestSignal({ signal: {} }), /AbortSignal/);
  });
});

describe('capabilities', () => {
  test('SIMD128 probe validates here; a browser without SIMD128, WebAssembly or Worker is told why', () => {
    assert.equal(missingWasmFeatures({ WebAssembly, Worker: function Worker() {} }), null);
    assert.match(missingWasmFeatures({ WebAssembly: { validate: () => false }, Worker() {} }), /lacks SIMD128/);
    assert.match(missingWasmFeatures({ Worker() {} }), /no WebAssembly/);
    assert.match(missingWasmFeatures({ WebAssembly }), /no Web Workers/);
  });
});

describe('split GGUF names', () => {
  test("the first shard's URL stands for all shards; other names are themselves", () => {
    assert.deepEqual(shardUrls('https://h/m/x-00001-of-00003.gguf?download=true'), [
      'https://h/m/x-00001-of-00003.gguf?download=true',
      'https://h/m/x-00002-of-00003.gguf?download=true',
      'https://h/m/x-00003-of-00003.gguf?download=true',
    ]);
    assert.deepEqual(shardUrls('https://h/x-00002-of-00003.gguf'), ['https://h/x-00002-of-00003.gguf']);
    assert.deepEqual(shardUrls('https://h/x.gguf'), ['https://h/x.gguf']);
    assert.deepEqual(shardUrls('https://h/x-00001-of-00001.gguf'), ['https://h/x-00001-of-00001.gguf']);
  });
});
