// Turns an OpenAI-shaped request body into what the worker runs. The engine checks the
// request's fields (ranges, messages, content parts, logit_bias, the fields it does not
// implement yet) in Rust with the same code as `tessera serve`, so both refuse the same
// requests with the same messages; this page side only checks what must be settled before the
// worker: which names the package knows, and the types the worker's calls take.

import { ErrorCodes, TesseraError } from './errors.js';

function invalid(message) {
  return new TesseraError(ErrorCodes.INVALID_ARGUMENT, message);
}

// The fields the engine's request model reads (tessera_runtime::request: OpenAI's and
// llama.cpp's names), passed to it as they are.
const GENERATION_KEYS = [
  'max_tokens', 'max_completion_tokens', 'n_predict', 'temperature', 'top_p', 'top_k', 'min_p',
  'seed', 'stop', 'repeat_penalty', 'repeat_last_n', 'presence_penalty', 'frequency_penalty',
  'logit_bias', 'ignore_eos', 'speculative', 'parse_special_in_content',
  // Structured output, tool calling, thinking.
  'response_format', 'grammar', 'json_schema', 'tools', 'tool_choice', 'parallel_tool_calls',
  'reasoning_format', 'chat_template_kwargs', 'enable_thinking', 'reasoning_effort',
  // Not implemented yet: refused by the engine unless they ask for nothing (`n: 1`, ...).
  'n', 'functions', 'logprobs', 'top_logprobs', 'n_probs',
];

// Fields read here, or harmless to accept: `model` (openai-node always sends one; the engine
// runs the model it loaded), `user`, `store`, `metadata` (bookkeeping), `stream_options`
// (usage is always on the last chunk).
const REQUEST_KEYS = new Set([
  ...GENERATION_KEYS, 'messages', 'prompt', 'stream', 'signal', 'return_token_ids',
  'model', 'user', 'store', 'metadata', 'stream_options',
]);

/** Throws INVALID_ARGUMENT naming the first field the package does not know. */
export function checkFields(req) {
  for (const [key, value] of Object.entries(req)) {
    if (value === undefined) continue;
    if (!REQUEST_KEYS.has(key)) throw invalid(`the field '${key}' is not supported`);
  }
}

// The deepest nesting of request data copied for the worker (messages, tools, JSON schemas).
const MAX_DEPTH = 64;

// A plain copy of request data for postMessage, which cannot clone framework proxies (Vue,
// MobX), class instances or functions. Functions and symbols become undefined (the engine then
// names the field that has no value); -Infinity in logit_bias survives (a JSON round trip
// would turn it into null).
function plainData(value, depth = 0) {
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) throw invalid(`the request nests deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(value)) return Array.from(value, (v) => plainData(v, depth + 1));
  const out = {};
  for (const [k, v] of Object.entries(value)) out[k] = plainData(v, depth + 1);
  return out;
}

function generationOptions(req) {
  const out = {};
  for (const k of GENERATION_KEYS) if (req[k] !== undefined && req[k] !== null) out[k] = plainData(req[k]);
  // Without a seed, or with -1, every request samples differently, as with OpenAI's API.
  if (out.seed === undefined || out.seed === -1) out.seed = Math.floor(Math.random() * 2 ** 32);
  return out;
}

function isFlag(value) {
  return value === undefined || value === null || typeof value === 'boolean';
}

/** The worker's `generate` payload for a chat (`kind: 'chat'`) or text request. Throws INVALID_ARGUMENT. */
export function generationPayload(kind, req) {
  if (!req || typeof req !== 'object') throw invalid('create() needs a request object');
  checkFields(req);
  for (const flag of ['stream', 'return_token_ids']) {
    if (!isFlag(req[flag])) throw invalid(`'${flag}' must be true or false`);
  }
  const payload = { options: generationOptions(req), stream: !!req.stream, returnTokenIds: !!req.return_token_ids };
  if (kind === 'chat') {
    // Checked by the engine (roles, content parts, tool calls); it only has to reach it.
    payload.messages = plainData(req.messages) ?? null;
  } else {
    if (typeof req.prompt !== 'string') throw invalid('prompt must be a string');
    payload.prompt = req.prompt;
  }
  return payload;
}

/**
 * One signal from the body's `signal` and the second argument's (openai-node passes
 * `create(body, { signal })`): aborting either aborts the request.
 */
export function requestSignal(req, options) {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw invalid('create(body, options): options must be an object like { signal }');
  }
  const signals = [req?.signal, options?.signal].filter(Boolean);
  for (const s of signals) if (typeof s.aborted !== 'boolean') throw invalid('signal must be an AbortSignal');
  if (signals.length < 2) return signals[0];
  if (typeof AbortSignal.any === 'function') return AbortSignal.any(signals);
  const controller = new AbortController();
  for (const s of signals) {
    if (s.aborted) controller.abort();
    else s.addEventListener('abort', () => controller.abort(), { once: true });
  }
  return controller.signal;
}
