// Type declarations of the Tessera browser package (see docs/js-api.md).

export type ErrorCode =
  | 'MODEL_FETCH_FAILED' | 'INVALID_GGUF' | 'INVALID_MODEL' | 'UNSUPPORTED_TYPE'
  | 'UNSUPPORTED_ARCHITECTURE' | 'UNSUPPORTED_BACKEND' | 'CONTEXT_FULL' | 'INVALID_ARGUMENT'
  | 'CHAT_TEMPLATE_ERROR' | 'OUT_OF_MEMORY' | 'INVALID_STATE' | 'ABORTED' | 'UNLOADED'
  | 'WORKER_FAILED' | 'BACKEND_ERROR' | 'COMPANION_UNAVAILABLE' | 'COMPANION_REFUSED';

export declare const ErrorCodes: Readonly<{ [K in ErrorCode]: K }>;

/** Every rejection of the package is one of these. */
export declare class TesseraError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown });
}

/** A model: a URL, the URLs of a split GGUF's shards in order, or its bytes. */
export type ModelSource = string | URL | Array<string | URL> | File | Blob | ArrayBuffer | ArrayBufferView;

/**
 * 'wasm': the CPU build. 'webgpu': the GPU through WebGPU (any adapter, software ones included;
 * rejects UNSUPPORTED_BACKEND without one). 'auto' (default): WebGPU when the browser has a
 * hardware adapter with the limits the kernels need, else wasm (`Engine.backendReason` says why).
 * 'companion': `tessera serve` on this machine at `companionUrl` (see docs/serve.md); with 'auto'
 * and a `companionUrl`, the host is tried first. 'remote': any OpenAI-compatible server at
 * `baseUrl`.
 */
export type Backend = 'auto' | 'wasm' | 'webgpu' | 'companion' | 'remote';

export interface LoadProgress {
  /** Bytes of the model read so far (monotonic). */
  loaded: number;
  /** Bytes in all, when known (the server sent Content-Length, or the source is local). */
  total?: number;
  /** loaded / total in [0, 1] when total is known; the last event has 1. */
  progress?: number;
  /**
   * 'backend' when the backend is chosen (first event) or a WebGPU load falls back to wasm,
   * 'download' while bytes arrive (from the network or the cache), 'ready' once loaded.
   */
  phase: 'backend' | 'download' | 'ready';
  /** On 'backend' events: the backend that will run the model. */
  backend?: 'wasm' | 'webgpu';
  /** On 'backend' events: why. */
  reason?: string;
}

export interface CreateEngineOptions {
  /** The model to run in the page (required but with 'companion' and 'remote'; with 'remote',
   * the server's model name). */
  model?: ModelSource;
  backend?: Backend;
  /** `tessera serve`'s URL (default http://127.0.0.1:8080 with 'companion'). */
  companionUrl?: string;
  /** The companion's model (default: its first). */
  companionModel?: string;
  /** 'remote': the server's OpenAI base URL (e.g. https://host/v1). */
  baseUrl?: string;
  /** Bearer key for 'companion' or 'remote'. */
  apiKey?: string;
  /** Threads for the kernels; more than 1 needs a cross-origin isolated page (COOP/COEP). Default: navigator.hardwareConcurrency (at most 8). */
  threads?: number;
  /** 'auto' (default): the relaxed-SIMD build where the browser supports relaxed SIMD and its
   * relaxed_madd is fused (same results, faster), else the SIMD128 build; 'simd128': always the
   * SIMD128 build. */
  simd?: 'auto' | 'simd128';
  /** KV-cache positions; 0 → the model's training context. Default 4096. */
  contextSize?: number;
  /** Largest prompt micro-batch. Default 512. */
  batchSize?: number;
  /**
   * Keep downloaded models between visits: `true` / 'cache-api' (default) in the Cache API,
   * 'opfs' in the origin private file system (for models larger than the Cache API may hold),
   * `false`: never. Where the browser offers no such storage the model loads without it.
   */
  cache?: boolean | 'cache-api' | 'opfs';
  /**
   * Ask the server whether a cached model changed (a HEAD request: ETag, else Last-Modified)
   * and download it again if so. Offline, or when the server cannot say, the cached copy is
   * used. Default true.
   */
  revalidate?: boolean;
  /**
   * The engine's worker script (web/src/worker.js), for setups that serve the package's files
   * themselves instead of letting a bundler locate it. Default: beside index.js.
   */
  workerUrl?: string | URL;
  onProgress?: (p: LoadProgress) => void;
  signal?: AbortSignal;
}

/** The engine checks every field's range (the table in docs/js-api.md, the server's too). */
export interface SamplingOptions {
  /** Default 256; -1 → until the context is full. */
  max_tokens?: number;
  /** 0 → greedy (0 to 100). Default 0.8 (llama.cpp's). */
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repeat_penalty?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  /** Window of the penalties in tokens: 0 → off, -1 → the whole context. Default 64. */
  repeat_last_n?: number;
  /** OpenAI's `{ "token id": bias }` (bias -100 to 100): added to the logits before sampling; -Infinity bans a token. */
  logit_bias?: Record<number | string, number>;
  /** Default: random per request. */
  seed?: number;
  stop?: string | string[];
  /** Never stop at an end-of-generation token. */
  ignore_eos?: boolean;
  /** Chat: the text of control tokens in the messages (such as `<|im_end|>`) becomes those
   * tokens, as in llama.cpp. Default false: only the chat template's own markers are control
   * tokens, and a message's text can never end its turn. */
  parse_special_in_content?: boolean;
  /** Draftless speculative decoding (the wasm backend): the same text, in fewer model passes
   * when the output repeats what came before (rewriting, quoting, code edits). */
  speculative?: SpeculativeOptions;
  /** Add the generated token ids as `choices[0].token_ids` (on the last chunk when streaming). */
  return_token_ids?: boolean;
  /** Structured output: any JSON object, or JSON following a schema (the draft 2020-12 subset
   * the grammar engine implements; other keywords reject naming them). */
  response_format?: { type: 'text' } | { type: 'json_object'; schema?: object }
    | { type: 'json_schema'; json_schema: { name?: string; schema: object; strict?: boolean } };
  /** llama-server's names: a JSON schema, or a grammar (Lark, or llama.cpp's GBNF). */
  json_schema?: object;
  grammar?: string;
  signal?: AbortSignal;
}

/** A function the model may call (OpenAI's shape). */
export interface Tool {
  type: 'function';
  function: { name: string; description?: string; parameters?: object; strict?: boolean };
}

export interface ToolCall { id: string; type: 'function'; function: { name: string; arguments: string } }

/** A streamed piece of a tool call: id, type and name in its first piece, then argument text. */
export interface ToolCallDelta {
  index: number; id?: string; type?: 'function'; function: { name?: string; arguments: string };
}

/** llama.cpp's `--spec-type` and options; absent fields take its defaults. */
export interface SpeculativeOptions {
  type: 'none' | 'ngram-simple' | 'ngram-map-k' | 'ngram-map-k4v' | 'ngram-cache';
  /** Key n-gram length, the sampled token included. Default 12 (3 suits short loops). */
  ngram_size_n?: number;
  /** Tokens proposed per draft (ngram-map-*). Default 48. */
  ngram_size_m?: number;
  /** Look up only every R tokens. Default 1. */
  ngram_check_rate?: number;
  /** Times a key must have been seen before it drafts (ngram-map-*). Default 1. */
  ngram_min_hits?: number;
  /** Most draft tokens verified per step. Default 16. */
  draft_max?: number;
  /** Shorter drafts are not verified. Default 0. */
  draft_min?: number;
}

/** A text part of a message's content (other part types reject with INVALID_ARGUMENT). */
export interface TextContentPart { type: 'text'; text: string }

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  /** A string, or text parts (joined with newlines). */
  content: string | TextContentPart[] | null;
  /** An assistant turn's calls (as the answer gave them). */
  tool_calls?: ToolCall[];
  /** A `tool` turn: the call it answers. */
  tool_call_id?: string;
  /** An assistant turn's thinking (templates that keep it print it). */
  reasoning_content?: string;
}

/** The answer: `content` null when it only calls tools; a thinking model's thinking apart. */
export interface AssistantMessage {
  role: 'assistant'; content: string | null; reasoning_content?: string; tool_calls?: ToolCall[];
}

/** The second argument of `create`, as in openai-node. */
export interface RequestOptions { signal?: AbortSignal }

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface Usage { prompt_tokens: number; completion_tokens: number; total_tokens: number }

export interface Timings {
  prompt_tokens_evaluated: number;
  prompt_ms: number;
  generation_ms: number;
  prompt_tokens_per_second: number;
  generation_tokens_per_second: number;
  /** Speculative requests: draft tokens verified, and accepted. */
  draft_n?: number;
  draft_n_accepted?: number;
  /** Speculative requests: llama.cpp's statistics lines. */
  draft_stats?: string[];
}

export interface ChatCompletion {
  id: string; object: 'chat.completion'; created: number; model: string;
  choices: [{ index: 0; message: AssistantMessage; finish_reason: FinishReason; token_ids?: number[] }];
  usage: Usage; timings: Timings;
}

export interface ChatCompletionChunk {
  id: string; object: 'chat.completion.chunk'; created: number; model: string;
  choices: [{
    index: 0;
    delta: { role?: 'assistant'; content?: string; reasoning_content?: string; tool_calls?: ToolCallDelta[] };
    finish_reason: FinishReason | null; token_ids?: number[];
  }];
  /** On the last chunk only. */
  usage?: Usage; timings?: Timings;
}

export interface Completion {
  id: string; object: 'text_completion'; created: number; model: string;
  choices: [{ index: 0; text: string; finish_reason: FinishReason | null; token_ids?: number[] }];
  usage?: Usage; timings?: Timings;
}

export interface ChatCompletionRequest extends SamplingOptions {
  messages: ChatMessage[];
  stream?: boolean;
  /** Functions the model may call; calls come back in `message.tool_calls`. */
  tools?: Tool[];
  tool_choice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };
  /** Several calls in one answer. Default false. */
  parallel_tool_calls?: boolean;
  /** Where a thinking model's thinking goes: `reasoning_content` ('auto', 'deepseek'), or `content` ('none'). */
  reasoning_format?: 'auto' | 'deepseek' | 'deepseek-legacy' | 'none';
  /** The thinking switch of templates that have one (Qwen3, SmolLM3). */
  enable_thinking?: boolean;
  /** For templates that read it (gpt-oss). */
  reasoning_effort?: 'low' | 'medium' | 'high';
  /** Extra variables for the model's chat template. */
  chat_template_kwargs?: Record<string, unknown>;
}
export interface CompletionRequest extends SamplingOptions { prompt: string; stream?: boolean }

export interface EngineInfo {
  architecture: string; description: string; n_vocab: number; n_ctx: number; n_ctx_train: number;
  has_chat_template: boolean;
  /** Which wasm build runs: 'threads' (cross-origin isolated pages) or 'single'. */
  build: 'threads' | 'single';
  /**
   * Why the single-threaded build runs although threads were asked for on a cross-origin
   * isolated page (its thread pool could not start: e.g. webpack rewrites the URL its helper
   * workers need); undefined otherwise.
   */
  buildReason?: string;
  threads: number;
  /** The backend that runs the model. */
  backend: 'wasm' | 'webgpu' | 'companion' | 'remote';
  /** Why that backend (see `Engine.backendReason`). */
  backendReason: string;
  /** The WebGPU adapter when `backend` is 'webgpu' (name, f16, binding limit). */
  adapter?: string | null;
  /** The kernels' instruction set: 'simd128+relaxed' (relaxed-SIMD build) or 'simd128'. */
  simd: 'simd128' | 'simd128+relaxed';
  /** Bytes of wasm heap when the model had loaded (on 'webgpu' the headers, not the model). */
  heap_bytes: number;
  /** The model came from the Cache API, not the network. */
  fromCache: boolean;
}

export interface Engine {
  readonly info: EngineInfo;
  /** 'wasm' or 'webgpu': the backend that runs the model. */
  readonly backend: 'wasm' | 'webgpu' | 'companion' | 'remote';
  /** Why: what 'auto' found (no WebGPU, a software or too limited adapter) or a fallback's cause. */
  readonly backendReason: string;
  chat: {
    completions: {
      create(req: ChatCompletionRequest & { stream: true }, options?: RequestOptions): Promise<AsyncIterableIterator<ChatCompletionChunk>>;
      create(req: ChatCompletionRequest & { stream?: false }, options?: RequestOptions): Promise<ChatCompletion>;
      create(req: ChatCompletionRequest & { stream?: boolean }, options?: RequestOptions): Promise<ChatCompletion | AsyncIterableIterator<ChatCompletionChunk>>;
    };
  };
  completions: {
    create(req: CompletionRequest & { stream: true }, options?: RequestOptions): Promise<AsyncIterableIterator<Completion>>;
    create(req: CompletionRequest & { stream?: false }, options?: RequestOptions): Promise<Completion>;
    create(req: CompletionRequest & { stream?: boolean }, options?: RequestOptions): Promise<Completion | AsyncIterableIterator<Completion>>;
  };
  tokenize(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): Promise<number[]>;
  detokenize(ids: number[] | Uint32Array, options?: { special?: boolean }): Promise<string>;
  /**
   * Forced decoding: feeds `ids` as one sequence (the KV cache is replaced) and resolves to the
   * model's top-1 next token after each position (element i follows ids[0..=i]).
   */
  predictTokens(ids: number[] | Uint32Array, options?: { signal?: AbortSignal }): Promise<number[]>;
  /** Terminates the worker and frees the model; later calls reject with UNLOADED. */
  unload(): Promise<void>;
}

export declare function createEngine(options: CreateEngineOptions): Promise<Engine>;

/** A model file kept between visits (a split model's shards are listed one by one). */
export interface CachedModel {
  url: string;
  /** Its size, when known. */
  bytes?: number;
  /** The server's validators when it was downloaded (used to revalidate it). */
  etag?: string;
  lastModified?: string;
  store: 'cache-api' | 'opfs';
}

/** Every cached model file, in the Cache API and in OPFS. */
export declare function listCachedModels(): Promise<CachedModel[]>;
/** Whether the model at `url` (every shard, for a split model's first shard) is cached. */
export declare function hasCachedModel(url: string | URL): Promise<boolean>;
/** Removes the model at `url` (every shard) from every cache; true when something was removed. */
export declare function deleteCachedModel(url: string | URL): Promise<boolean>;
