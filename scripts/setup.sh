#!/usr/bin/env bash
# Installs what the test suite needs. Idempotent: each step is skipped when already done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# wasm32 target: crates/engine must keep building for the browser.
rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown

# Python reference for the quantization formats (gguf.quants) and the fixture builders.
python3 -c 'import gguf, numpy' 2>/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check 'gguf==0.19.0' numpy

# Test models (sha256-verified; nothing happens when present).
"$root/scripts/fetch-models.sh" all >/dev/null

# --- Browser package (scripts/build-wasm.sh, scripts/test-browser.sh) ---
# Nightly with rust-src for the threaded wasm build (atomics need build-std).
nightly=nightly-2026-05-20
if ! rustup run "$nightly" rustc --version >/dev/null 2>&1 \
  || ! rustup +"$nightly" target list --installed | grep -qx wasm32-unknown-unknown \
  || ! rustup +"$nightly" component list --installed | grep -q '^rust-src'; then
  rustup toolchain install "$nightly" --profile minimal --target wasm32-unknown-unknown --component rust-src
fi
# wasm-bindgen CLI: must match the crate's pinned wasm-bindgen exactly.
[ "$(wasm-bindgen --version 2>/dev/null)" = "wasm-bindgen 0.2.130" ] \
  || cargo install wasm-bindgen-cli --version 0.2.130   # not --locked (see TOOLCHAIN.md)
# Headless Chromium (and chromedriver for wasm-bindgen-test) from Debian; never `playwright install`.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  apt-get update && apt-get install -y chromium chromium-driver
fi
# playwright-core, from the committed package-lock.json.
want=$(node -p "require('$root/package-lock.json').packages['node_modules/playwright-core'].version")
have=$(node -p "try { require('$root/node_modules/playwright-core/package.json').version } catch { '' }")
[ "$want" = "$have" ] || (cd "$root" && npm ci --no-audit --no-fund)
