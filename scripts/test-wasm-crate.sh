#!/usr/bin/env bash
# crates/wasm's wasm-bindgen tests (tests/web.rs) and the WebGPU conformance suite in headless
# Chromium through chromedriver.
# The test model is served by tests/browser/server.mjs; its URL is baked into the test build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
log=$(mktemp)
node tests/browser/server.mjs --cors > "$log" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 50); do [ -s "$log" ] && break; sleep 0.1; done
origin=$(head -1 "$log")
export TESSERA_WASM_TEST_MODEL_URL="$origin/models/SmolLM2-135M-Instruct.Q4_1.gguf"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export WASM_BINDGEN_TEST_TIMEOUT=${WASM_BINDGEN_TEST_TIMEOUT:-120}
export CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
# The same flags and profile as scripts/build-wasm.sh's single-threaded build: its artifacts are reused.
export CARGO_PROFILE_RELEASE_DEBUG=0
RUSTFLAGS="-C target-feature=+simd128" \
  cargo test --locked --release -p tessera-wasm --features webgpu --target wasm32-unknown-unknown --test web
# The conformance suite (crates/conformance) on the WebGPU backend (its tests/conformance.rs), on the
# browser's WebGPU (SwiftShader here), with its asynchronous read-back.
RUSTFLAGS="-C target-feature=+simd128" \
  cargo test --locked --release -p tessera-backend-wgpu --target wasm32-unknown-unknown --test conformance
