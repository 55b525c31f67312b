// Errors of the package: every rejection is a TesseraError (an Error) with a stable `code`.
// The codes are API (see docs/js-api.md); messages are for people and may change.

export const ErrorCodes = Object.freeze({
  MODEL_FETCH_FAILED: 'MODEL_FETCH_FAILED',
  INVALID_GGUF: 'INVALID_GGUF',
  INVALID_MODEL: 'INVALID_MODEL',
  UNSUPPORTED_TYPE: 'UNSUPPORTED_TYPE',
  UNSUPPORTED_ARCHITECTURE: 'UNSUPPORTED_ARCHITECTURE',
  UNSUPPORTED_BACKEND: 'UNSUPPORTED_BACKEND',
  CONTEXT_FULL: 'CONTEXT_FULL',
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  CHAT_TEMPLATE_ERROR: 'CHAT_TEMPLATE_ERROR',
  OUT_OF_MEMORY: 'OUT_OF_MEMORY',
  INVALID_STATE: 'INVALID_STATE',
  BACKEND_ERROR: 'BACKEND_ERROR',
  ABORTED: 'ABORTED',
  UNLOADED: 'UNLOADED',
  WORKER_FAILED: 'WORKER_FAILED',
  COMPANION_UNAVAILABLE: 'COMPANION_UNAVAILABLE',
  COMPANION_REFUSED: 'COMPANION_REFUSED',
});

export class TesseraError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'TesseraError';
    this.code = code;
  }
}

// Errors cross the worker boundary as plain objects; this turns anything into one.
export function serializeError(e) {
  if (e && typeof e === 'object' && typeof e.code === 'string' && e.code in ErrorCodes) {
    return { code: e.code, message: String(e.message) };
  }
  if (e && e.name === 'AbortError') return { code: ErrorCodes.ABORTED, message: 'aborted' };
  // A wasm trap or an unexpected JS error: the worker's state can no longer be trusted.
  return { code: ErrorCodes.WORKER_FAILED, message: String((e && e.message) || e) };
}

export function deserializeError(o) {
  return new TesseraError(o.code, o.message);
}

export function abortError() {
  return new TesseraError(ErrorCodes.ABORTED, 'aborted');
}
