// The smallest app: load a model, stream one chat answer into the page.
// ?model=URL picks the model (default: SmolLM2 next to the page), ?threads=N the threads.

import { createEngine, TesseraError } from 'tessera-web';

const params = new URLSearchParams(location.search);
const status = document.querySelector('#status');
const out = document.querySelector('#out');

async function main() {
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
  let timings;
  for await (const chunk of stream) {
    text += chunk.choices[0].delta.content;
    out.textContent = text;
    timings = chunk.timings ?? timings;
  }
  // What the browser tests read.
  window.result = { info: engine.info, text, timings };
  document.body.dataset.state = 'done';
}

main().catch((e) => {
  const code = e instanceof TesseraError ? e.code : 'UNKNOWN';
  status.textContent = `failed: ${code}: ${e?.message ?? e}`;
  window.failure = { code, message: String(e?.message ?? e) };
  document.body.dataset.state = 'error';
});
