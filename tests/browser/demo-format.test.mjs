// The demo's wording of progress, timings and errors (web/demo/format.js), in Node.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { explainError, formatProgress, formatTimings } from '../../web/demo/format.js';
import { ErrorCodes, TesseraError } from '../../web/src/errors.js';

test('every error code has words for people; unknown errors still say something', () => {
  for (const code of Object.values(ErrorCodes)) {
    const text = explainError(new TesseraError(code, 'detail'));
    assert.doesNotMatch(text, /^Something went wrong: /, code);
  }
  assert.match(explainError(new TesseraError('MODEL_FETCH_FAILED', 'HTTP 404')), /could not be downloaded.*HTTP 404/);
  assert.match(explainError(new Error('boom')), /Something went wrong: boom/);
});

test('progress and timings', () => {
  assert.equal(formatProgress({ loaded: 12_300_000, total: 98_400_000, progress: 0.125 }), '12.3 MB of 98.4 MB (12 %)');
  assert.equal(formatProgress({ loaded: 5_000_000 }), '5.0 MB received');
  const t = { generation_tokens_per_second: 21.46, prompt_tokens_evaluated: 30, prompt_ms: 120, prompt_tokens_per_second: 250, generation_ms: 1500 };
  assert.equal(formatTimings(t, { completion_tokens: 32 }), '21.5 tokens/s · prompt: 30 tokens in 120 ms (250 tokens/s) · answer: 32 tokens in 1.50 s');
  assert.match(formatTimings({ ...t, draft_n: 40, draft_n_accepted: 30 }, {}), /speculative: 30 of 40 drafted tokens accepted \(75 %\)/);
});
