#!/usr/bin/env bash
# The test suite: setup (idempotent), the Rust tests (fixtures included), the wasm build check,
# then the browser suite (wasm builds + headless Chromium).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
cargo test --workspace --profile ci --locked
cargo check -p engine --target wasm32-unknown-unknown --locked
"$root/scripts/test-browser.sh"
