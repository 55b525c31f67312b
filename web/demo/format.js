// Words and numbers for people: error messages by code, sizes, speeds. No DOM here, so Node
// tests it (tests/browser/demo-format.test.mjs).

const MB = 1e6;

export function formatBytes(n) {
  if (n === undefined || n === null) return '?';
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  return `${(n / MB).toFixed(1)} MB`;
}

/** "12.3 MB of 98.4 MB (13 %)", or without a total "12.3 MB". */
export function formatProgress({ loaded, total, progress }) {
  if (!total) return `${formatBytes(loaded)} received`;
  return `${formatBytes(loaded)} of ${formatBytes(total)} (${Math.floor(100 * (progress ?? loaded / total))} %)`;
}

function ms(n) {
  return n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${Math.round(n)} ms`;
}

/** One line under an answer: speed, prompt and generation timings, speculative statistics. */
export function formatTimings(t, usage) {
  if (!t) return '';
  const parts = [
    `${t.generation_tokens_per_second.toFixed(1)} tokens/s`,
    `prompt: ${t.prompt_tokens_evaluated} tokens in ${ms(t.prompt_ms)} (${t.prompt_tokens_per_second.toFixed(0)} tokens/s)`,
    `answer: ${usage?.completion_tokens ?? '?'} tokens in ${ms(t.generation_ms)}`,
  ];
  if (t.draft_n !== undefined) {
    const rate = t.draft_n ? Math.round((100 * t.draft_n_accepted) / t.draft_n) : 0;
    parts.push(`speculative: ${t.draft_n_accepted} of ${t.draft_n} drafted tokens accepted (${rate} %)`);
  }
  return parts.join(' · ');
}

// What each error code means for the person in front of the page, and what they can do.
const EXPLANATIONS = {
  MODEL_FETCH_FAILED: 'The model could not be downloaded. Check the address and your connection (the server must allow this page to fetch it).',
  INVALID_GGUF: 'That file is not a GGUF model, or it is damaged or incomplete.',
  INVALID_MODEL: 'That GGUF file is missing parts the model needs (tensors, tokenizer or settings).',
  UNSUPPORTED_TYPE: 'That model uses a quantization type this engine cannot compute with yet.',
  UNSUPPORTED_ARCHITECTURE: "That model's architecture is not supported yet.",
  UNSUPPORTED_BACKEND: 'This browser cannot run the chosen backend.',
  CONTEXT_FULL: 'The conversation no longer fits in the model\'s context. Start a new chat.',
  INVALID_ARGUMENT: 'A setting has a value the engine does not accept.',
  CHAT_TEMPLATE_ERROR: 'This model has no chat template (or it rejected the conversation): it is not a chat model.',
  OUT_OF_MEMORY: 'The model does not fit in the memory this browser gives a page. Try a smaller model.',
  ABORTED: 'Stopped.',
  UNLOADED: 'The model was unloaded. Load it again.',
  WORKER_FAILED: 'The engine stopped working. Load the model again.',
  BACKEND_ERROR: 'The GPU failed while running the model. Try the WebAssembly backend.',
  COMPANION_UNAVAILABLE: 'The companion host (tessera serve) did not answer. Is it running on this machine?',
  COMPANION_REFUSED: 'The companion host refused this page: start it with --allowed-origin for this page, and give its API key.',
  INVALID_STATE: 'Something went wrong inside the engine. Load the model again.',
};

/** A sentence a person understands, with the engine's own message as the detail. */
export function explainError(e) {
  const known = e && EXPLANATIONS[e.code];
  if (!known) return `Something went wrong: ${e?.message ?? e}`;
  return e.message && e.code !== 'ABORTED' ? `${known} (${e.message})` : known;
}
