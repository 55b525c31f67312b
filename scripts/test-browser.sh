#!/usr/bin/env bash
# The browser suite: builds both wasm builds into web/, then runs the npm package's end-to-end
# tests in headless Chromium (tests/browser/*.test.mjs) and the crate's wasm-bindgen tests.
# `npm run test:browser` runs this. Needs scripts/setup.sh's installs and `npm ci`; fetches the
# test models itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
export TESSERA_FIXTURES=${TESSERA_FIXTURES:-$root/tests/fixtures}
step() { local start=$SECONDS; "$@"; echo "[test-browser.sh] $(( SECONDS - start )) s: $*" >&2; }
# The test models, fetched with progress when missing (sha256-checked when present).
step scripts/fetch-models.sh all >/dev/null
[ -x "${TESSERA_CHROMIUM:-/usr/bin/chromium}" ] \
  || { echo "test-browser.sh: Chromium is missing: run scripts/setup.sh" >&2; exit 1; }
step scripts/build-wasm.sh all
# The companion tests run `tessera serve`: the binary the workspace tests built (same profile).
export TESSERA_BIN=${TESSERA_BIN:-${CARGO_TARGET_DIR:-$root/target}/ci/tessera}
[ -x "$TESSERA_BIN" ] || step cargo build --profile ci --locked -p tessera
step node --test --test-concurrency=1 tests/browser/
step scripts/test-wasm-crate.sh
