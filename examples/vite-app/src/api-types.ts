// Not bundled: `tsc --noEmit` checks that the package's index.d.ts describes the API as apps
// use it (the stream overloads, create(body, { signal }), content parts, tools, cache management).
// Each @ts-expect-error line must stay an error, or tsc fails.

import {
  createEngine, deleteCachedModel, hasCachedModel, listCachedModels,
  type ChatCompletion, type ChatCompletionChunk, type Completion, type ErrorCode, TesseraError,
} from 'tessera-web';

export async function typeChecks(flag: boolean): Promise<void> {
  const engine = await createEngine({ model: 'm-00001-of-00002.gguf', cache: 'opfs', revalidate: false, workerUrl: '/worker.js' });
  const controller = new AbortController();
  const whole: ChatCompletion = await engine.chat.completions.create({
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
    logit_bias: { 15: -100 },
    repeat_last_n: 64,
  }, { signal: controller.signal });
  const stream: AsyncIterableIterator<ChatCompletionChunk> = await engine.chat.completions.create({ messages: [], stream: true });
  // A boolean known only at run time gives either.
  const either: ChatCompletion | AsyncIterableIterator<ChatCompletionChunk> = await engine.chat.completions.create({ messages: [], stream: flag });
  const text: Completion = await engine.completions.create({ prompt: 'x' }, { signal: controller.signal });
  // @ts-expect-error a stream is not a completion
  const wrong: ChatCompletion = await engine.chat.completions.create({ messages: [], stream: true });
  // Tools, a tool turn in the history, and the calls in the answer.
  const called: ChatCompletion = await engine.chat.completions.create({
    messages: [{ role: 'tool', tool_call_id: 'call_1', content: '{}' }],
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
    tool_choice: { type: 'function', function: { name: 'f' } },
  });
  const calls: string[] | undefined = called.choices[0].message.tool_calls?.map((c) => c.function.arguments);
  // @ts-expect-error tool_choice is auto, none, required or a named function
  await engine.chat.completions.create({ messages: [], tool_choice: 'sometimes' });
  const cached: { url: string; bytes?: number; store: 'cache-api' | 'opfs' }[] = await listCachedModels();
  const has: boolean = await hasCachedModel('m.gguf');
  const deleted: boolean = await deleteCachedModel(new URL('https://x/m.gguf'));
  const code: ErrorCode = new TesseraError('UNSUPPORTED_BACKEND', 'x').code;
  void [whole, stream, either, text, wrong, called, calls, cached, has, deleted, code];
}
