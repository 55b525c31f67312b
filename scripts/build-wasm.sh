#!/usr/bin/env bash
# Builds the browser package's wasm builds into web/:
#   web/pkg-st          single-threaded, SIMD128 (stable toolchain), with the WebGPU backend
#   web/pkg-mt          threaded: atomics + shared memory + wasm-bindgen-rayon (nightly, build-std)
#   web/pkg-st-relaxed  web/pkg-st with relaxed SIMD (fused multiply-add, relaxed_dot)
#   web/pkg-mt-relaxed  web/pkg-mt with relaxed SIMD
# The worker runs a -relaxed build where the browser validates relaxed SIMD and its
# relaxed_madd is fused (bit-exact kernels), else the plain one.
# Usage: scripts/build-wasm.sh [st|mt|all]   (default: all; st and mt build both variants)
# Needs: the wasm32 target, nightly-2026-05-20 with rust-src (mt), wasm-bindgen-cli 0.2.130 on
# PATH; scripts/setup.sh installs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
which=${1:-all}
target_dir=${CARGO_TARGET_DIR:-$root/target}
nightly=nightly-2026-05-20
# No debug info (the release profile's line tables serve native profiling): wasm-bindgen strips
# it from the package anyway. (It does not cost measurable time: a cold single-threaded build
# took 1m41 with it, 1m51 without.)
export CARGO_PROFILE_RELEASE_DEBUG=0

# The tools scripts/setup.sh installs: without one, stop at once and say so.
missing=
wasm-bindgen --version 2>/dev/null | grep -qx 'wasm-bindgen 0.2.130' || missing="wasm-bindgen-cli 0.2.130"
rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
  || missing="the wasm32-unknown-unknown target"
[ "$which" = st ] || rustup run "$nightly" rustc --version >/dev/null 2>&1 || missing="$nightly"
[ -z "$missing" ] || { echo "build-wasm.sh: $missing is missing: run scripts/setup.sh" >&2; exit 1; }

bindgen() { # wasm file -> out dir
  rm -rf "$2"
  wasm-bindgen --target web --out-dir "$2" --out-name tessera_wasm "$1"
}

build_st() { # [features suffix]
  # RUSTFLAGS replaces the config's rustflags, so every flag the build needs is named here.
  # The relaxed build has its own target dir (different flags would rebuild each other's deps).
  local features=${1:-+simd128} suffix=${2:-} dir="$target_dir"
  [ -n "$suffix" ] && dir="$target_dir/wasm$suffix"
  RUSTFLAGS="-C target-feature=$features" \
    cargo build --locked --release -p tessera-wasm --features webgpu --target wasm32-unknown-unknown \
      --target-dir "$dir"
  bindgen "$dir/wasm32-unknown-unknown/release/tessera_wasm.wasm" "web/pkg-st$suffix"
}

build_mt() { # [features suffix]
  # Its own target dir: std is rebuilt with atomics, and sharing the dir with the
  # single-threaded build would throw away each other's cached artifacts.
  local features=${1:-+simd128} suffix=${2:-}
  local mt_dir="$target_dir/wasm-threads$suffix"
  RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,$features \
-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
-C link-arg=--export=__tls_align -C link-arg=--export=__tls_base" \
    cargo "+$nightly" build --locked --release -p tessera-wasm --features threads \
      --target wasm32-unknown-unknown --target-dir "$mt_dir" -Z build-std=panic_abort,std
  bindgen "$mt_dir/wasm32-unknown-unknown/release/tessera_wasm.wasm" "web/pkg-mt$suffix"
}

relaxed=+simd128,+relaxed-simd
case "$which" in
  st) build_st; build_st $relaxed -relaxed ;;
  mt) build_mt; build_mt $relaxed -relaxed ;;
  all) build_st; build_st $relaxed -relaxed; build_mt; build_mt $relaxed -relaxed ;;
  *) echo "usage: $0 [st|mt|all]" >&2; exit 2 ;;
esac
