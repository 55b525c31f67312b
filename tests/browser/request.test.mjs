// The page-side checks of a request (web/src/request.js), the capability check
// (web/src/capabilities.js) and split-GGUF names (web/src/split-gguf.js), in Node: no browser
// needed. e2e.test.mjs checks the same paths through a loaded engine.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { contentText, generationPayload, logitBiasPairs, requestSignal } from '../../web/src/request.js';
import { missingWasmFeatures } from '../../web/src/capabilities.js';
import { shardUrls } from '../../web/src/split-gguf.js';

const rejects = (f, pattern) => assert.throws(f, (e) => e.name === 'TesseraError' && e.code === 'INVALID_ARGUMENT' && pattern.test(e.message));

describe('request bodies', () => {
  test('content parts: text parts joined with newlines, other parts refused', () => {
    assert.equal(contentText([{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }], 'm'), 'a\nb');
    assert.equal(contentText('plain', 'm'), 'plain');
    assert.equal(contentText(null, 'm'), '');
    const p = generationPayload('chat', { messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }] });
    assert.deepEqual(p.messages, [{ role: 'user', content: 'Hi' }]);
    rejects(() => generationPayload('chat', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
      /messages\[0\]\.content\[0\]: parts of type 'image_url' are not supported/);
    rejects(() => contentText({ text: 'x' }, 'messages[2]'), /messages\[2\]\.content must be a string or an array/);
    rejects(() => generationPayload('chat', { messages: [{ role: 'assistant', content: null, tool_calls: [] }] }), /tool_calls/);
  });

  test('unsupported fields are refused by name; neutral values of n and logprobs pass', () => {
    for (const field of ['tools', 'tool_choice', 'response_format', 'top_logprobs', 'functions', 'grammar']) {
      rejects(() => generationPayload('chat', { messages: [], [field]: {} }), new RegExp(`'${field}'`));
    }
    rejects(() => generationPayload('text', { prompt: 'x', n: 2 }), /'n' is not supported/);
    rejects(() => generationPayload('text', { prompt: 'x', logprobs: true }), /'logprobs' is not supported/);
    const ok = generationPayload('text', { prompt: 'x', n: 1, logprobs: false, model: 'gpt-x', tools: undefined, user: 'u' });
    assert.equal(ok.prompt, 'x');
  });

  test('logit_bias becomes [id, bias] pairs; repeat_last_n passes through', () => {
    assert.deepEqual(logitBiasPairs({ 15: 5, '7': -Infinity }), [[7, -Infinity], [15, 5]]);
    const p = generationPayload('text', { prompt: 'x', logit_bias: { 3: -100 }, repeat_last_n: 0, seed: 1 });
    assert.deepEqual(p.options, { logit_bias: [[3, -100]], repeat_last_n: 0, seed: 1 });
    rejects(() => logitBiasPairs({ abc: 1 }), /'abc' is not a token id/);
    rejects(() => logitBiasPairs({ 1.5: 1 }), /'1.5' is not a token id/);
    rejects(() => logitBiasPairs({ 1: 'x' }), /bias of token 1/);
    rejects(() => logitBiasPairs([1]), /must be an object/);
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
