#!/usr/bin/env bash
# The browser suite: builds both wasm builds into web/, then runs the npm package's end-to-end
# tests in headless Chromium (tests/browser/*.test.mjs) and the crate's wasm-bindgen tests.
# `npm run test:browser` runs this. Needs scripts/setup.sh's installs and `npm ci`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
export TESSERA_FIXTURES=${TESSERA_FIXTURES:-$root/../shared/fixtures}
scripts/build-wasm.sh all
node --test --test-concurrency=1 tests/browser/
scripts/test-wasm-crate.sh
