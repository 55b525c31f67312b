// The smallest app: load a model, stream one chat answer into the page.
// ?model=URL picks the model (default: SmolLM2 next to the page), ?threads=N the threads.

import { createEngine, TesseraError, type EngineInfo, type Timings } from 'tessera-web';

const params = new URLSearchParams(location.search);
const status = document.querySelector<HTMLParagraphElement>('#status')!;
const out = document.querySelector<HTMLPreElement>('#out')!;

// What the browser tests read once the answer is complete.
declare global {
  interface Window { result?: { info: EngineInfo; text: string; timings?: Timings }; failure?: { code: string; message: string } }
}

async function main(): Promise<void> {
  const engine = await createEngine({
    model: params.get('model') ?? './SmolLM2-135M-Instruct.Q4_1.gguf',
    threads: Number(params.get('threads') ?? navigator.hardwareConcurrency),
    contextSize: 512,
    onProgress: ({ loaded, progress }) => {
      status.textContent = `loading: ${Math.round(100 * (progress ?? 0))} % (${loaded} bytes)`;
    },
  });
  status.textContent = `${engine.info.description}: ${engine.backend}, ${engine.info.build} build, ${engine.info.threads} threads`;
  const stream = await engine.chat.completions.create({
    messages: [{ role: 'user', content: 'What is the capital of France?' }],
    stream: true,
    max_tokens: 16,
    temperature: 0,
  });
  let text = '';
  let timings: Timings | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0].delta.content ?? '';
    out.textContent = text;
    timings = chunk.timings ?? timings;
  }
  window.result = { info: engine.info, text, timings };
  document.body.dataset.state = 'done';
}

main().catch((e: unknown) => {
  const code = e instanceof TesseraError ? e.code : 'UNKNOWN';
  const message = e instanceof Error ? e.message : String(e);
  status.textContent = `failed: ${code}: ${message}`;
  window.failure = { code, message };
  document.body.dataset.state = 'error';
});
