#!/usr/bin/env bash
# Builds the browser package's two wasm builds into web/:
#   web/pkg-st  single-threaded, SIMD128 (stable toolchain), with the WebGPU backend
#   web/pkg-mt  threaded: atomics + shared memory + wasm-bindgen-rayon (nightly, build-std)
# Usage: scripts/build-wasm.sh [st|mt|all]   (default: all)
# Needs: the wasm32 target, nightly-2026-05-20 with rust-src (mt), wasm-bindgen-cli 0.2.130 on
# PATH; scripts/setup.sh installs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
which=${1:-all}
target_dir=${CARGO_TARGET_DIR:-$root/target}
nightly=nightly-2026-05-20

bindgen() { # wasm file -> out dir
  rm -rf "$2"
  wasm-bindgen --target web --out-dir "$2" --out-name tessera_wasm "$1"
}

build_st() {
  # RUSTFLAGS replaces the config's rustflags, so every flag the build needs is named here.
  RUSTFLAGS="-C target-feature=+simd128" \
    cargo build --locked --release -p tessera-wasm --features webgpu --target wasm32-unknown-unknown
  bindgen "$target_dir/wasm32-unknown-unknown/release/tessera_wasm.wasm" web/pkg-st
}

build_mt() {
  # Its own target dir: std is rebuilt with atomics, and sharing the dir with the
  # single-threaded build would throw away each other's cached artifacts.
  local mt_dir="$target_dir/wasm-threads"
  RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+simd128 \
-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
-C link-arg=--export=__tls_align -C link-arg=--export=__tls_base" \
    cargo "+$nightly" build --locked --release -p tessera-wasm --features threads \
      --target wasm32-unknown-unknown --target-dir "$mt_dir" -Z build-std=panic_abort,std
  bindgen "$mt_dir/wasm32-unknown-unknown/release/tessera_wasm.wasm" web/pkg-mt
}

case "$which" in
  st) build_st ;;
  mt) build_mt ;;
  all) build_st; build_mt ;;
  *) echo "usage: $0 [st|mt|all]" >&2; exit 2 ;;
esac
