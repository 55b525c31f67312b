#!/usr/bin/env bash
# The test suite: setup (idempotent), the Rust tests (fixtures included), the wasm (SIMD128, and
# relaxed SIMD) quant and CPU-backend tests in Node, then the browser suite (wasm builds + headless Chromium).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Each step's wall time, so a slow CI run says where its minutes went.
step() { local start=$SECONDS; "$@"; echo "[test.sh] $(( SECONDS - start )) s: $*" >&2; }
step "$root/scripts/setup.sh"
# docs/BENCHMARKS.md is what scripts/bench-report.py renders from bench/results/ (and the script works).
step python3 "$root/scripts/test_bench_report.py"
# Compiled artifacts live outside the clone when nothing else is asked for, so a fresh clone on
# a machine that has built Tessera before reuses them (cargo rebuilds what changed).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/target}
mkdir -p "$CARGO_TARGET_DIR"
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
# WebGPU backend on software Vulkan (lavapipe by default): the model tests run in full (256
# forced positions and every greedy fixture prompt of both models).
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# NVRTC from the wheel setup.sh installs: tessera-backend-cuda's test compiles every CUDA
# kernel with it (no GPU or driver needed). Where it must run (CI), a missing NVRTC fails the
# test instead of skipping it.
if [ -z "${TESSERA_NVRTC:-}" ]; then
  TESSERA_NVRTC=$(python3 -c 'import nvidia.cuda_nvrtc as m; print(m.__path__[0] + "/lib/libnvrtc.so.12")' 2>/dev/null || true)
  export TESSERA_NVRTC
fi
# The Vulkan backend's tests run under the Khronos validation layer: its errors fail them.
export TESSERA_VULKAN_VALIDATION=1
# tessera-wasm's webgpu feature: its GPU loader (the browser's, streaming weights into GPU
# buffers) is tested natively too.
step cargo test --workspace --profile ci --locked --features tessera-wasm/webgpu
# The README's commands still match the repository (scripts, npm scripts, packages, examples,
# the documented tessera flags, checked with the binary the tests just built).
export TESSERA_BIN=${TESSERA_BIN:-$CARGO_TARGET_DIR/ci/tessera}
step python3 "$root/scripts/test_check_readme.py"
step "$root/scripts/check-readme.py" "$TESSERA_BIN"
# Every fuzz target for 20,000 inputs (the request model, hostile chat templates, tokenizing
# arbitrary bytes, the GGUF reader) from the seeds alone, not a long run's corpus: seconds on a
# warm machine; scripts/fuzz.sh runs them longer.
fuzz_corpus=$(mktemp -d)
FUZZ_CORPUS=$fuzz_corpus step "$root/scripts/fuzz.sh" 20000
rm -rf "$fuzz_corpus"
# The kernels again on SwiftShader (the browser's adapter: no shader-f16, 1 GiB bindings).
# The same packages and features as above, so the test binaries are reused, not rebuilt
# (`-p tessera-backend-wgpu` alone resolves other features and recompiles).
export VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json
step cargo test --workspace --profile ci --locked --features tessera-wasm/webgpu --test conformance
step cargo test --workspace --profile ci --locked --features tessera-wasm/webgpu --test suite \
  -- device_errors::
unset VK_ICD_FILENAMES
# The CPU backend must build for wasm32: its wasm tests below and the browser build
# (scripts/build-wasm.sh) compile it for that target.
# The wasm test builds without debug info: it is not needed to run them in Node, and it slows
# the build of the quant crate's test binaries markedly.
export CARGO_PROFILE_TEST_DEBUG=0 CARGO_PROFILE_DEV_DEBUG=0
# The quant crate on wasm32 with SIMD128 (.cargo/config.toml), in Node: the simd128 vec-dot
# kernels bit for bit against the portable ggml-order ones.
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  step cargo test -p tessera-quant --target wasm32-unknown-unknown --locked
# The CPU backend's wasm-bindgen tests: the simd128 kernels (SwiGLU, attention) against scalar,
# and the attention and f16-arithmetic tests (half converts in software there).
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  step cargo test -p tessera-backend-cpu --target wasm32-unknown-unknown --locked --lib
# Both again in the relaxed-SIMD build (fused relaxed_madd, relaxed_dot); Node 20 needs a flag
# for relaxed SIMD, and its baseline compiler (Liftoff) gets relaxed_dot wrong (Chromium's does
# not), so its optimising compiler only. Own target dir: other RUSTFLAGS would rebuild the default one's artifacts.
for pkg in "tessera-quant" "tessera-backend-cpu --lib"; do
  # shellcheck disable=SC2086
  RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" NODE_ARGS=--experimental-wasm-relaxed-simd,--no-liftoff \
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    step cargo test --target wasm32-unknown-unknown --locked \
      --target-dir "${CARGO_TARGET_DIR:-$root/target}/wasm-relaxed-test" -p $pkg
done
step "$root/scripts/test-browser.sh"
