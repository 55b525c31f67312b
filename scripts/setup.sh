#!/usr/bin/env bash
# Installs what the test suite needs. Idempotent: each step is skipped when already done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# wasm32 target: the core crates must keep building for the browser.
rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown

# wasm-bindgen-test-runner (wasm-bindgen-cli): runs the wasm SIMD128 kernel tests in Node. The
# version must equal the wasm-bindgen in Cargo.lock. Not --locked: the registry lacks a crate
# version its lockfile names. It compiles from source, the slowest step of a first setup, so it
# runs beside the steps below (downloads, mostly) and is waited for at the end.
bindgen_install=
if ! wasm-bindgen --version 2>/dev/null | grep -qx 'wasm-bindgen 0.2.130'; then
  cargo install --quiet wasm-bindgen-cli --version 0.2.130 &
  bindgen_install=$!
fi

# cargo-fuzz (scripts/fuzz.sh, a short run of every fuzz target in the test suite): compiles
# from source too, beside the rest.
fuzz_install=
if ! cargo fuzz --version 2>/dev/null | grep -qx 'cargo-fuzz 0.13.2'; then
  cargo install --quiet --locked cargo-fuzz --version 0.13.2 &
  fuzz_install=$!
fi

# Python reference for the quantization formats (gguf.quants) and the fixture builders.
python3 -c 'import gguf, numpy' 2>/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check 'gguf==0.19.0' numpy

# JSON-schema validation of the structured-output suite's answers
# (scripts/validate-json-outputs.py: a validator other than the grammar engine judges them).
python3 -c 'import jsonschema' 2>/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check 'jsonschema==4.26.0'

# NVRTC (CUDA's run-time compiler, no driver needed) from its PyPI wheel: the CUDA backend's
# test compiles every kernel of shaders/cuda to PTX with it (scripts/test.sh points
# TESSERA_NVRTC at the wheel's libnvrtc.so.12).
python3 -c 'import nvidia.cuda_nvrtc' 2>/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check 'nvidia-cuda-nvrtc-cu12==12.9.86'

# Software Vulkan for the WebGPU backend's tests: Mesa's lavapipe, and Chromium's SwiftShader
# ICD (/usr/lib/chromium/vk_swiftshader_icd.json, the browser's WebGPU adapter natively).
# Headless Chromium and chromedriver also run the browser suite; never `playwright install`.
# The Khronos validation layer checks the Vulkan backend's calls in its tests.
missing=()
for pkg in mesa-vulkan-drivers libvulkan1 vulkan-validationlayers chromium chromium-driver; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

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
# playwright-core, from the committed package-lock.json.
want=$(node -p "require('$root/package-lock.json').packages['node_modules/playwright-core'].version")
have=$(node -p "try { require('$root/node_modules/playwright-core/package.json').version } catch { '' }")
[ "$want" = "$have" ] || (cd "$root" && npm ci --no-audit --no-fund)

# A failed install fails the setup (wait returns its status).
[ -z "$bindgen_install" ] || wait "$bindgen_install"
[ -z "$fuzz_install" ] || wait "$fuzz_install"
