// Turns an OpenAI-shaped request body into what the worker runs, checking it on the page so
// that a mistake rejects at once, with the field's name, instead of being silently ignored.

import { ErrorCodes, TesseraError } from './errors.js';

function invalid(message) {
  return new TesseraError(ErrorCodes.INVALID_ARGUMENT, message);
}

// The options a generation request may carry to the engine (OpenAI's and llama.cpp's names).
const GENERATION_KEYS = [
  'max_tokens', 'temperature', 'top_p', 'top_k', 'min_p', 'seed', 'stop',
  'repeat_penalty', 'repeat_last_n', 'presence_penalty', 'frequency_penalty', 'ignore_eos',
  'speculative',
];

// Fields read here, or harmless to accept: `model` (openai-node always sends one; the engine
// runs the model it loaded), `user`, `store`, `metadata` (bookkeeping), `stream_options`
// (usage is always on the last chunk).
const REQUEST_KEYS = new Set([
  ...GENERATION_KEYS, 'messages', 'prompt', 'stream', 'signal', 'return_token_ids', 'logit_bias',
  'model', 'user', 'store', 'metadata', 'stream_options', 'n', 'logprobs',
]);

// Fields whose neutral value is accepted: any other value asks for something the engine does
// not do (several choices, log-probabilities).
const NEUTRAL = { n: 1, logprobs: false };

/** Throws INVALID_ARGUMENT naming the first field the engine does not support. */
export function checkFields(req) {
  for (const [key, value] of Object.entries(req)) {
    if (value === undefined) continue;
    if (!REQUEST_KEYS.has(key)) throw invalid(`the field '${key}' is not supported`);
    if (key in NEUTRAL && value !== null && value !== NEUTRAL[key]) {
      throw invalid(`the field '${key}' is not supported (only ${key}: ${NEUTRAL[key]})`);
    }
  }
}

/**
 * A message's content as text: a string, or an array of parts whose text parts are joined
 * with newlines (as llama.cpp's server does for templates that take plain text). Any other
 * part (an image, audio, a file) is refused: the engine reads text only.
 */
export function contentText(content, where) {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalid(`${where}.content must be a string or an array of parts`);
  return content.map((part, i) => {
    const at = `${where}.content[${i}]`;
    if (!part || typeof part !== 'object') throw invalid(`${at} must be an object like { type: 'text', text }`);
    if (part.type !== 'text') throw invalid(`${at}: parts of type '${part.type}' are not supported (text only)`);
    if (typeof part.text !== 'string') throw invalid(`${at}.text must be a string`);
    return part.text;
  }).join('\n');
}

// Message fields that would need tool calling, which the engine does not do.
const TOOL_FIELDS = ['tool_calls', 'function_call', 'tool_call_id'];

export function normalizeMessages(messages) {
  if (!Array.isArray(messages)) throw invalid('messages must be an array');
  return messages.map((m, i) => {
    const where = `messages[${i}]`;
    if (!m || typeof m !== 'object') throw invalid(`${where} must be an object { role, content }`);
    if (typeof m.role !== 'string') throw invalid(`${where}.role must be a string`);
    for (const f of TOOL_FIELDS) if (m[f] !== undefined) throw invalid(`${where}.${f} is not supported (no tool calling)`);
    return { role: m.role, content: contentText(m.content, where) };
  });
}

/**
 * OpenAI's `logit_bias` (`{ "token id": bias }`) as `[id, bias]` pairs, the form the engine
 * takes. Ids must be non-negative integers, biases numbers (-Infinity bans a token); ids the
 * model lacks are refused by the engine, which knows its vocabulary.
 */
export function logitBiasPairs(bias) {
  if (bias === undefined || bias === null) return undefined;
  if (typeof bias !== 'object' || Array.isArray(bias)) throw invalid('logit_bias must be an object { "token id": bias }');
  return Object.entries(bias).map(([key, value]) => {
    const id = Number(key);
    if (!Number.isInteger(id) || id < 0 || String(id) !== key.trim()) throw invalid(`logit_bias: '${key}' is not a token id`);
    if (typeof value !== 'number' || Number.isNaN(value) || value === Infinity) {
      throw invalid(`logit_bias: the bias of token ${id} must be a number or -Infinity`);
    }
    return [id, value];
  });
}

function generationOptions(req) {
  const out = {};
  for (const k of GENERATION_KEYS) if (req[k] !== undefined && req[k] !== null) out[k] = req[k];
  const bias = logitBiasPairs(req.logit_bias);
  if (bias?.length) out.logit_bias = bias;
  // Without a seed every request samples differently, as with OpenAI's API.
  if (out.seed === undefined) out.seed = Math.floor(Math.random() * 2 ** 32);
  return out;
}

/** The worker's `generate` payload for a chat (`kind: 'chat'`) or text request. Throws INVALID_ARGUMENT. */
export function generationPayload(kind, req) {
  if (!req || typeof req !== 'object') throw invalid('create() needs a request object');
  checkFields(req);
  const payload = { options: generationOptions(req), stream: !!req.stream, returnTokenIds: !!req.return_token_ids };
  if (kind === 'chat') {
    payload.messages = normalizeMessages(req.messages);
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
