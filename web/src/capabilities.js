// What the browser must offer before an engine can start, checked on the page so that a
// browser without it gets UNSUPPORTED_BACKEND with the reason instead of a worker that fails
// on a wasm compile error.

// The smallest module that uses SIMD128 (a function returning v128.const 0): it validates only
// where the browser has fixed-width SIMD (Chrome 91, Firefox 89, Safari 16.4 and later).
const SIMD128_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
  0x03, 0x02, 0x01, 0x00, // one function of type 0
  0x0a, 0x16, 0x01, 0x14, 0x00, // code: one body of 20 bytes, no locals
  0xfd, 0x0c, ...new Array(16).fill(0), // v128.const 0
  0x0b, // end
]);

/** Why the engine cannot run here (a sentence), or null when it can. */
export function missingWasmFeatures(scope = globalThis) {
  const wasm = scope.WebAssembly;
  if (!wasm || typeof wasm.validate !== 'function') return 'this browser has no WebAssembly (is it disabled?)';
  let simd = false;
  try {
    simd = wasm.validate(SIMD128_PROBE);
  } catch {
    simd = false;
  }
  if (!simd) {
    return "this browser's WebAssembly lacks SIMD128, which every Tessera build needs " +
      '(Chrome 91, Firefox 89, Safari 16.4 or later have it)';
  }
  if (typeof scope.Worker !== 'function') return 'this browser has no Web Workers, where the engine runs';
  return null;
}
