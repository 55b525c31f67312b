// Browser benchmark: prompt processing (pp) and generation (tg) tokens/s of the npm package in
// headless Chromium, per model and thread count. The page is cross-origin isolated, so
// threads > 1 runs the threaded build and threads = 1 the single-threaded one.
//
//   node tests/browser/bench.mjs [--models smollm2,gemma3] [--threads 1,2] [--simd auto|simd128] [-p 256] [-n 128] [-r 3]
//
// --simd simd128 runs the plain SIMD128 builds (default: the relaxed-SIMD ones where exact).
//
// pp: a fresh prompt of -p tokens (its first token differs per repetition, so no KV reuse),
// one generated token; tg: -n tokens after a 1-token prompt, never stopping at end-of-generation.
// Prints one JSON line per (model, threads) with the medians over -r repetitions after a warm-up.

import { launch, openPage } from './browser.mjs';
import { startServer } from './server.mjs';

const MODELS = {
  smollm2: 'SmolLM2-135M-Instruct.Q4_1.gguf',
  gemma3: 'gemma-3-270m-q4_k_m.gguf',
};

function args() {
  const a = { models: 'smollm2,gemma3', threads: '1,2', simd: 'auto', p: 256, n: 128, r: 3 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^-+/, '');
    if (!(key in a)) throw new Error(`unknown option ${argv[i]}`);
    a[key] = typeof a[key] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  return a;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function benchOne(page, model, threads, { simd, p, n, r }) {
  return page.evaluate(async ({ url, threads, simd, p, n, r }) => {
    const engine = await window.tessera.createEngine({ model: url, threads, simd, contextSize: p + n + 16 });
    // Filler text long enough for p tokens; each repetition starts with a different word.
    const filler = 'The quick brown fox jumps over the lazy dog while the river runs to the sea. '.repeat(Math.ceil(p / 8));
    const fillerIds = (await engine.tokenize(filler, { addSpecial: false })).slice(0, p - 1);
    const runs = [];
    for (let i = 0; i <= r; i++) {
      const prompt = `Run${i} ` + (await engine.detokenize(fillerIds));
      const pp = await engine.completions.create({ prompt, max_tokens: 1, temperature: 0 });
      const tg = await engine.completions.create({ prompt: `${i}`, max_tokens: n, temperature: 0, ignore_eos: true });
      if (i > 0) runs.push({ // run 0 is the warm-up
        pp_tokens: pp.timings.prompt_tokens_evaluated, pp: pp.timings.prompt_tokens_per_second,
        tg_tokens: tg.usage.completion_tokens, tg: tg.timings.generation_tokens_per_second,
      });
    }
    const info = engine.info;
    await engine.unload();
    return { info, runs };
  }, { url: `/models/${model}`, threads, simd, p, n, r });
}

const opts = args();
const server = await startServer({ isolated: true });
const browser = await launch();
try {
  const context = await browser.newContext();
  const page = await openPage(context, server.origin);
  for (const key of opts.models.split(',')) {
    for (const threads of opts.threads.split(',').map(Number)) {
      const { info, runs } = await benchOne(page, MODELS[key], threads, opts);
      console.log(JSON.stringify({
        model: key, build: info.build, simd: info.simd, threads: info.threads,
        pp_tokens: runs[0].pp_tokens, pp_tps: +median(runs.map((x) => x.pp)).toFixed(2),
        tg_tokens: runs[0].tg_tokens, tg_tps: +median(runs.map((x) => x.tg)).toFixed(2),
        runs: runs.length,
      }));
    }
  }
} finally {
  await browser.close();
  await server.close();
}
