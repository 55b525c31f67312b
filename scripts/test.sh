#!/usr/bin/env bash
# The test suite: setup (idempotent), the Rust tests (fixtures included), the wasm build check,
# the wasm (SIMD128) quant tests in Node.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
cargo test --workspace --profile ci --locked
cargo check -p engine --target wasm32-unknown-unknown --locked
# The quant crate on wasm32 with SIMD128 (.cargo/config.toml), in Node: the simd128 vec-dot
# kernels bit for bit against the portable ggml-order ones.
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p quant --target wasm32-unknown-unknown --locked
