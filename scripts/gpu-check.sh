#!/usr/bin/env bash
# The CUDA backend's checks on a machine with an NVIDIA GPU (the lent H200), in one run:
#   1. the op conformance suite on CUDA against the CPU backend;
#   2. both test models: greedy fixtures (32 tokens per prompt, picked on the GPU), forced
#      decoding agreement >= 99 %, GPU sampling against the CPU reference;
#   3. `tessera bench --backend cuda` next to llama.cpp's CUDA build (llama-bench, from the
#      llama-cpp-python 0.3.36 sdist, nvcc from the nvidia-cuda-nvcc-cu12 wheel) on the two
#      test models and a >= 1 GB synthetic model (tools/synth_gguf.py), with decode bandwidth as
#      a fraction of the GPU's HBM peak.
# Results go to $OUT (default: gpu-check-out/): logs, bench JSON and summary.md.
#
# Needs: the NVIDIA driver, cargo, python3 with pip and numpy. NVRTC, cuBLAS, nvcc and cmake
# come from PyPI wheels when pip can reach the registry; otherwise from a CUDA toolkit already
# installed (/usr/local/cuda). SKIP_LLAMA=1 skips llama.cpp's build and bench.
# On a lent machine without network or Rust, scripts/gpu-lease.sh runs the same checks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-$root/gpu-check-out}
mkdir -p "$OUT"
step() { local start=$SECONDS; echo "== $*" >&2; "$@"; echo "== $(( SECONDS - start )) s: $1" >&2; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"

# --- CUDA libraries (wheels where pip works; a toolkit's otherwise) ---
pip_ok() { python3 -m pip install --quiet --disable-pip-version-check "$@" 2>/dev/null; }
python3 -c 'import nvidia.cuda_nvrtc, nvidia.cublas' 2>/dev/null \
  || pip_ok 'nvidia-cuda-nvrtc-cu12==12.9.86' 'nvidia-cublas-cu12' \
  || echo "pip cannot install the CUDA wheels: using a toolkit's libraries" >&2
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
# shellcheck source=cuda-libs.sh
. "$root/scripts/cuda-libs.sh"
cuda_libs_link "$CARGO_TARGET_DIR/cuda-libs"
# The tests below fail instead of skipping when something is missing.
export TESSERA_REQUIRE_CUDA=1 TESSERA_REQUIRE_NVRTC=1
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
[ -f "$TESSERA_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" ] || scripts/fetch-models.sh all

# --- 1, 2: conformance and the models (one test at a time: one device) ---
status=0
step cargo build --release -p tessera -p tessera-backend-cuda --tests
cargo run --release -q -p tessera -- devices | tee "$OUT/devices.txt"
step cargo test --release -p tessera-backend-cuda --test conformance -- --test-threads=1 --nocapture \
  > "$OUT/conformance.txt" 2>&1 || status=1
step cargo test --release -p tessera-backend-cuda --test suite -- --test-threads=1 --nocapture \
  > "$OUT/models.txt" 2>&1 || status=1
# Again with prefill on the integer (ggml-quantized activation) kernels instead of cuBLAS f16:
# which of the two keeps the greedy fixtures exact.
TESSERA_CUDA_PREFILL=int step cargo test --release -p tessera-backend-cuda --test suite -- \
  --test-threads=1 --nocapture models:: > "$OUT/models-int-prefill.txt" 2>&1 || status=1
grep -E "nmse|agreement|test result|panicked" "$OUT/conformance.txt" "$OUT/models.txt" \
  "$OUT/models-int-prefill.txt" | tail -n 80 || true

# --- 3: bench against llama.cpp's CUDA build ---
synth=$TESSERA_MODELS/synth/llama-2048x14-f16.gguf
if [ ! -f "$synth" ]; then
  mkdir -p "$(dirname "$synth")"
  # n_embd 2048 (4 heads of 512), 14 blocks, f16: ~1.5 GB.
  step python3 tools/synth_gguf.py --arch llama --seed 1 --n-embd 2048 --n-layer 14 --out "$synth"
fi
models=("$TESSERA_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" "$TESSERA_MODELS/gemma-3-270m-q4_k_m.gguf" "$synth")
tessera=$CARGO_TARGET_DIR/release/tessera
for m in "${models[@]}"; do
  step "$tessera" bench -m "$m" --backend cuda -p 512 -n 128 -r 5 -o json \
    > "$OUT/tessera-$(basename "$m" .gguf).json" || status=1
done

if [ "${SKIP_LLAMA:-0}" != 1 ]; then
  lcp=${LCP_DIR:-$HOME/.cache/tessera/lcp-cuda}
  src=$lcp/llama_cpp_python-0.3.36/vendor/llama.cpp
  if [ ! -x "$src/build-cuda/bin/llama-bench" ]; then
    python3 -c 'import nvidia.cuda_nvcc' 2>/dev/null || pip_ok nvidia-cuda-nvcc-cu12 \
      || echo "no nvcc wheel: a toolkit's nvcc must be on PATH" >&2
    command -v cmake >/dev/null || pip_ok cmake
    python3 -c 'import scikit_build_core' 2>/dev/null || pip_ok scikit-build-core
    if [ ! -d "$src" ]; then
      python3 -m pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all: \
        --no-build-isolation -d "$lcp"
      tar xzf "$lcp/llama_cpp_python-0.3.36.tar.gz" -C "$lcp"
    fi
    nvcc_dir=$(python3 -c 'import nvidia.cuda_nvcc as m; print(m.__path__[0])' 2>/dev/null || echo /usr/local/cuda)
    export PATH="$nvcc_dir/bin:$PATH" CUDAToolkit_ROOT=$nvcc_dir
    step cmake -S "$src" -B "$src/build-cuda" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release
    step cmake --build "$src/build-cuda" -j"$(nproc)" --target llama-bench
  fi
  for m in "${models[@]}"; do
    step "$src/build-cuda/bin/llama-bench" -m "$m" -ngl 99 -p 512 -n 128 -r 5 -o json \
      > "$OUT/llama-$(basename "$m" .gguf).json" || status=1
  done
fi

python3 scripts/gpu-summary.py "$OUT" "${models[@]}"
exit $status
