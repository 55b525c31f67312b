#!/usr/bin/env bash
# scripts/gpu-check.sh's checks on a lent GPU machine that has no network and no Rust, and
# receives at most ~60 MiB per call: everything is built here and sent in pieces.
#
#   here:    scripts/gpu-lease.sh prepare      binaries, llama.cpp's source and the two test
#                                              models cut into parts, in .gpu/ (git-ignored)
#   there:   scripts/gpu-lease.sh start        (carry .gpu/bin.tgz .gpu/lc.tgz .gpu/manifest
#            .gpu/whl) unpacks, links the CUDA libraries, and starts in the background:
#            llama.cpp's CUDA build (not with SKIP_LLAMA=1) and the conformance suite
#   there:   scripts/gpu-lease.sh add PART     (carry .gpu/PART), once per part; after the last
#            one the models are joined and checked, and a background chain runs the model
#            tests (both prefill paths), writes the >= 1 GB synthetic model, and benches
#            `tessera` and `llama-bench` on the three models
#   there:   scripts/gpu-lease.sh finish       waits for the chain (up to $WAIT_S seconds) and
#                                              packs logs and results into $OUT
#
# The machine keeps its work folder ($GPU_WORK, else $HOME/gpu) between calls only while it
# stays warm (30 s after a call), so the calls follow one another at once, and the machine is
# held until the last result is in (a fresh one may not be lent again). On the H200: start and
# the 7 parts ~60 s of device time, the conformance suite 11 s, each model-test run ~30 s,
# llama.cpp's CUDA build ~5 min (in the background, from the first call), the six benches ~1 min.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$root/.gpu
work=${GPU_WORK:-$HOME/gpu}
cmd=${1:?usage: gpu-lease.sh prepare|start|add PART|finish}
models=(SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf)
synth_name=llama-2048x14-f16.gguf

prepare() {
  : "${CARGO_TARGET_DIR:=$root/target}" "${TESSERA_MODELS:=$root/models}"
  mkdir -p "$stage/bin"
  rm -f "$stage"/part.* "$stage/bin"/*
  cargo build --release -p tessera
  # The test binaries' paths, from cargo's own report.
  cargo test --release -p tessera-backend-cuda --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])' \
    | while read -r name exe; do cp "$exe" "$stage/bin/$name"; done
  cp "$CARGO_TARGET_DIR/release/tessera" "$stage/bin/"
  strip "$stage/bin"/*
  tar czf "$stage/bin.tgz" -C "$stage" bin && rm -r "$stage/bin"
  # llama.cpp's source from the llama-cpp-python sdist, without the other backends and docs.
  local lcp=${LCP_DIR:-$HOME/.cache/tessera/lcp-cuda}
  if [ ! -d "$lcp/llama_cpp_python-0.3.36" ]; then
    python3 -m pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all: \
      --no-build-isolation -d "$lcp"
    tar xzf "$lcp/llama_cpp_python-0.3.36.tar.gz" -C "$lcp"
  fi
  local other=(cann et hexagon hip metal musa opencl openvino sycl virtgpu vulkan webgpu zdnn zendnn blas rpc)
  tar czf "$stage/lc.tgz" -C "$lcp/llama_cpp_python-0.3.36/vendor" \
    "${other[@]/#/--exclude=llama.cpp/ggml/src/ggml-}" \
    --exclude=llama.cpp/tools/server/public --exclude=llama.cpp/tools/ui \
    llama.cpp/{CMakeLists.txt,cmake,ggml,src,common,tools,vendor,include,licenses,LICENSE}
  # The models, end to end, in parts that fit one call beside the working tree.
  (cd "$TESSERA_MODELS" && sha256sum "${models[@]}" && stat -c '%s %n' "${models[@]}") \
    > "$stage/manifest"
  (cd "$TESSERA_MODELS" && cat "${models[@]}") | split -b "${PART_MIB:-54}M" - "$stage/part."
  ls "$stage"/part.* | wc -l | sed 's/^/parts /' >> "$stage/manifest"
  # Where the test binaries were built (they look for fixtures and kernel sources there).
  echo "built_in $root" >> "$stage/manifest"
  # gguf-py for tools/synth_gguf.py (the lent machine has numpy, not gguf).
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$stage/whl" gguf
  ls -la "$stage"
}

# The environment every later step runs in.
env_file() {
  cat > "$work/env.sh" <<EOF
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH TESSERA_NVRTC=$TESSERA_NVRTC TESSERA_CUBLAS=$TESSERA_CUBLAS
export TESSERA_REQUIRE_CUDA=1 TESSERA_REQUIRE_NVRTC=1 TESSERA_MODELS=$work/models
export PATH=/usr/local/cuda/bin:\$PATH PYTHONPATH=$work/site SKIP_LLAMA=${SKIP_LLAMA:-0}
EOF
}

start() {
  mkdir -p "$work/out" "$work/parts" "$work/models"
  tar xzf "$stage/bin.tgz" -C "$work"
  cp "$stage/manifest" "$work/"
  # The test binaries find fixtures and kernel sources under the path they were built in.
  local built
  built=$(awk '$1 == "built_in" {print $2}' "$work/manifest")
  [ -e "$built" ] || { mkdir -p "$(dirname "$built")" && ln -s "$root" "$built"; }
  # shellcheck source=cuda-libs.sh
  . "$root/scripts/cuda-libs.sh"
  cuda_libs_link "$work/lib" 2> "$work/out/libs.txt"
  cat "$work/out/libs.txt"
  env_file
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv \
    | tee "$work/out/gpu.txt" || true
  "$work/bin/tessera" devices 2>&1 | tee "$work/out/devices.txt" || true
  python3 -m pip install --quiet --no-index --no-deps --target "$work/site" "$stage"/whl/*.whl
  if [ "${SKIP_LLAMA:-0}" = 1 ]; then
    echo skipped > "$work/llama-build.rc"
  else
    mkdir -p "$work/lc" && tar xzf "$stage/lc.tgz" -C "$work/lc"
    setsid nohup bash -c "
    . $work/env.sh
    cd $work/lc/llama.cpp
    { cmake -S . -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DCMAKE_BUILD_TYPE=Release && cmake --build build -j\$(nproc) --target llama-bench; } \
      > $work/out/llama-build.txt 2>&1
    echo \$? > $work/llama-build.rc" > /dev/null 2>&1 < /dev/null &
  fi
  setsid nohup bash -c "
    . $work/env.sh
    cd $root
    timeout 300 $work/bin/conformance --test-threads=1 --nocapture > $work/out/conformance.txt 2>&1
    echo \$? > $work/conformance.rc" > /dev/null 2>&1 < /dev/null &
  sleep 5
  progress
}

add() {
  local part=${1:?part name}
  cp "$stage/$part" "$work/parts/"
  local want have
  want=$(awk '$1 == "parts" {print $2}' "$work/manifest")
  have=$(ls "$work/parts" | wc -l)
  echo "parts: $have of $want"
  if [ "$have" = "$want" ]; then
    join_models
    setsid nohup bash "$root/scripts/gpu-lease.sh" chain > "$work/out/chain.txt" 2>&1 < /dev/null &
  fi
  progress
}

join_models() {
  local size name
  cat "$work/parts"/part.* > "$work/all"
  local offset=0
  while read -r size name; do
    dd if="$work/all" of="$work/models/$name" bs=4M iflag=skip_bytes,count_bytes \
      skip="$offset" count="$size" status=none
    offset=$((offset + size))
  done < <(awk 'NF == 2 && $1 ~ /^[0-9]+$/' "$work/manifest")
  rm "$work/all"
  (cd "$work/models" && awk 'length($1) == 64' "$work/manifest" | sha256sum -c -)
}

# In the background, once the models are here: the model tests, then the benchmarks alone on
# the GPU.
chain() {
  . "$work/env.sh"
  cd "$root"
  local out=$work/out
  step() { local s=$SECONDS; echo "== $*"; "$@" || echo "== failed ($?): $1"; echo "== $((SECONDS - s)) s"; }
  # The synthetic model takes the CPU while the conformance suite finishes on the GPU.
  mkdir -p "$work/models/synth"
  step python3 tools/synth_gguf.py --arch llama --seed 1 --n-embd 2048 --n-layer 14 \
    --out "$work/models/synth/$synth_name"
  while [ ! -f "$work/conformance.rc" ]; do sleep 2; done
  step bash -c "timeout 300 $work/bin/suite --test-threads=1 --nocapture models:: > $out/models.txt 2>&1"
  step bash -c "TESSERA_CUDA_PREFILL=int timeout 300 $work/bin/suite --test-threads=1 --nocapture models:: \
    > $out/models-int-prefill.txt 2>&1"
  local m
  for m in "${models[@]}" "synth/$synth_name"; do
    step bash -c "timeout 180 $work/bin/tessera bench -m $work/models/$m --backend cuda -p 512 -n 128 -r 5 -o json \
      > $out/tessera-$(basename "$m" .gguf).json 2> $out/tessera-$(basename "$m" .gguf).err"
  done
  while [ ! -f "$work/llama-build.rc" ]; do sleep 2; done
  local bench=$work/lc/llama.cpp/build/bin/llama-bench
  if [ -x "$bench" ]; then
    for m in "${models[@]}" "synth/$synth_name"; do
      step bash -c "timeout 180 $bench -m $work/models/$m -ngl 99 -p 512 -n 128 -r 5 -o json \
        > $out/llama-$(basename "$m" .gguf).json 2> $out/llama-$(basename "$m" .gguf).err"
    done
  fi
  step python3 "$root/scripts/gpu-summary.py" "$out" "$work/models/${models[0]}" \
    "$work/models/${models[1]}" "$work/models/synth/$synth_name"
  touch "$work/chain.done"
}

progress() {
  local f
  for f in conformance llama-build; do
    [ -f "$work/$f.rc" ] && echo "$f: exit $(cat "$work/$f.rc")" || echo "$f: running"
  done
  grep -hE "^test .* (ok|FAILED)$|test result|panicked" "$work/out/conformance.txt" 2>/dev/null | tail -n 15 || true
  tail -n 3 "$work/out/llama-build.txt" 2>/dev/null || true
  tail -n 20 "$work/out/chain.txt" 2>/dev/null || true
}

finish() {
  local deadline=$((SECONDS + ${WAIT_S:-240}))
  while [ ! -f "$work/chain.done" ] && [ $SECONDS -lt $deadline ]; do sleep 3; done
  progress
  cat "$work/out/summary.md" 2>/dev/null || echo "no summary yet"
  grep -hE "agreement|test result|panicked|FAILED|nmse.*>|failures:" "$work/out"/models*.txt \
    "$work/out/conformance.txt" 2>/dev/null | tail -n 60 || true
  tar czf "${OUT:-$root}/gpu-check.tgz" -C "$work" out
  cp "$work/out/summary.md" "${OUT:-$root}/" 2>/dev/null || true
}

case $cmd in
  prepare) prepare ;;
  start) start ;;
  add) add "${2:?part}" ;;
  chain) chain ;;
  finish) finish ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
