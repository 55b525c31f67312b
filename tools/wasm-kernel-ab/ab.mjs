// Kernel A/B for the browser CPU path: two builds of this crate run in one headless Chromium
// page, run by run interleaved, so that a noisy machine slows both alike; prints the median
// of the per-pair time ratios (A / B: above 1 means B is faster) and each side's best rate.
//
//   cd tools/wasm-kernel-ab
//   RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" cargo build --release --target wasm32-unknown-unknown
//   (add `--features repacked` for the repacked 8-row kernels, which the engine runs for every
//   type with a repacked layout; without it the cases run ggml's file-layout kernels)
//   cp target/wasm32-unknown-unknown/release/wasm_kernel_ab.wasm /tmp/a.wasm   # then change the code, build again
//   node ab.mjs /tmp/a.wasm target/wasm32-unknown-unknown/release/wasm_kernel_ab.wasm [pairs]
//
// Cases: prompt-batch gemm (64 tokens, 16 weight rows per call, as the engine's prompt
// batches), decode gemv (1 token, 256 rows per call), and the f16 attention dot and V update.

import { readFileSync } from 'node:fs';
import { launch } from '../../tests/browser/browser.mjs';

const [a, b] = [process.argv[2], process.argv[3]].map((f) => readFileSync(f).toString('base64'));
const pairs = Number(process.argv[4] || 20);
// Optional: only the cases whose label contains this text (e.g. 'attention').
const only = process.argv[5] || '';
const browser = await launch();
const page = await browser.newPage();
page.on('console', (m) => console.log(m.text()));
page.on('pageerror', (e) => console.error('[page error]', e.message));
await page.evaluate(async ({ a, b, pairs, only }) => {
  const instantiate = async (b64) => (await WebAssembly.instantiate(
    Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)), {})).instance.exports;
  const [ea, eb] = [await instantiate(a), await instantiate(b)];
  // Builds from before the export report "?".
  const fused = (e) => (e.fused_dot ? e.fused_dot() : '?');
  console.log(`fused relaxed dot product: A ${fused(ea)}, B ${fused(eb)}`);
  const median = (v) => [...v].sort((p, q) => p - q)[v.length >> 1];
  // Interleaved timing of `run(e)` on both builds; returns [median A/B, best A ms, best B ms].
  const ab = (run) => {
    run(ea); run(eb); // warm-up: V8 tiers hot functions up to its optimising compiler
    const ratios = [], ta = [], tb = [];
    for (let i = 0; i < pairs; i++) {
      let t0 = performance.now(); run(ea); const x = performance.now() - t0;
      t0 = performance.now(); run(eb); const y = performance.now() - t0;
      ratios.push(x / y); ta.push(x); tb.push(y);
    }
    return [median(ratios), Math.min(...ta), Math.min(...tb)];
  };
  // [type id, name, rows, k]; type ids as `weight_type` in src/lib.rs.
  const prompt = [[0, 'Q5_0', 2048, 640], [1, 'Q4_K', 640, 2048], [2, 'Q6_K', 640, 2048], [3, 'Q8_0', 256, 640], [4, 'Q4_1', 1536, 576]];
  for (const [t, name, rows, k] of prompt) {
    if (!`gemm ${name}`.includes(only)) continue;
    for (const e of [ea, eb]) e.setup_matmul(t, rows, k, 64);
    const [r, x, y] = ab((e) => e.run_matmul(2, 16));
    const gmacs = (ms) => (2 * rows * k * 64 / ms / 1e6).toFixed(2);
    console.log(`gemm ${name} ${rows}x${k}, 64 tokens: A/B ${r.toFixed(2)}; best ${gmacs(x)} / ${gmacs(y)} GMAC/s`);
  }
  const decode = [[3, 'Q8_0', 65536, 640], [4, 'Q4_1', 65536, 576], [0, 'Q5_0', 65536, 640], [1, 'Q4_K', 32768, 1024], [2, 'Q6_K', 16384, 2048]];
  for (const [t, name, rows, k] of decode) {
    if (!`gemv ${name}`.includes(only)) continue;
    for (const e of [ea, eb]) e.setup_matmul(t, rows, k, 1);
    const [r, x, y] = ab((e) => e.run_matmul(2, 256));
    const ns = (ms) => (ms * 1e6 / (2 * rows)).toFixed(1);
    console.log(`gemv ${name} ${rows}x${k}: A/B ${r.toFixed(2)}; best ${ns(x)} / ${ns(y)} ns per row`);
  }
  for (const e of [ea, eb]) e.setup_attention();
  for (const [name, fn, passes] of [['dot (4 keys x 256)', 'run_attention_dot', 20], ['V update (4 rows x 256)', 'run_attention_mad', 20],
    ['V update, scalar loop (3 rows x 64)', 'run_attention_mad_tail', 100]]) {
    if (!`attention ${name}`.includes(only)) continue;
    const [r, x, y] = ab((e) => e[fn](passes));
    console.log(`attention ${name}: A/B ${r.toFixed(2)}; best ${x.toFixed(2)} / ${y.toFixed(2)} ms per ${passes} passes`);
  }
  if ('attention decode (SmolLM2 layer, 272 keys)'.includes(only)) {
    const [r, x, y] = ab((e) => e.run_attention_decode(50, 272));
    console.log(`attention decode (SmolLM2 layer, 272 keys): A/B ${r.toFixed(2)}; best ${x.toFixed(2)} / ${y.toFixed(2)} ms per 50 layers`);
  }
}, { a, b, pairs, only });
await browser.close();
