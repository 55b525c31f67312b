#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for RUNS executions each (default 20000), one after
# another, and prints each target's executions, time and corpus size. A crash (panic, timeout,
# memory over the limit) stops the script with the input saved under fuzz/artifacts/.
# Usage: scripts/fuzz.sh [RUNS] [TARGET...]   (targets: parse_header request chat_template tokenize)
# Needs cargo-fuzz and the nightly toolchain (scripts/setup.sh's), and the test models
# ($TESSERA_MODELS, default models/: the tokenizers, llama.cpp's real templates as seeds).
# Corpora grow in fuzz/corpus/ (FUZZ_CORPUS names another folder, e.g. an empty one for a short
# run that should not replay a long run's corpus first).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20000}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse_header request chat_template tokenize)
nightly=nightly-2026-05-20
# The targets' code is safe Rust: AddressSanitizer finds little there and triples the time of
# a run; FUZZ_SANITIZER=address turns it on.
sanitizer=${FUZZ_SANITIZER:-none}
export TESSERA_MODELS=${TESSERA_MODELS:-$root/models}
cd "$root/fuzz"
corpus=${FUZZ_CORPUS:-corpus}

# Per target: the longest input (real templates reach 17 KiB; a GGUF header seed 1 KiB).
max_len() {
  case "$1" in
    chat_template | parse_header) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

# The real templates as chat_template seeds: flags byte, source, then NUL-separated messages.
template_seeds() {
  local dir=$corpus/chat_template f
  mkdir -p "$dir"
  for f in "$TESSERA_MODELS"/templates/*.jinja; do
    [ -f "$f" ] || continue
    { printf '\003'; cat "$f"; printf '\000Be brief.\000Hi <|im_end|> there\000Hello.\000  What? '; } \
      > "$dir/seed-$(basename "$f" .jinja)"
  done
}

# Built first, so that the times below are the runs' own.
cargo +"$nightly" fuzz build -O -s "$sanitizer" >&2
for t in "${targets[@]}"; do
  mkdir -p "$corpus/$t"
  [ "$t" != chat_template ] || template_seeds
  dict=()
  [ -f "dicts/$t.dict" ] && dict=(-dict="dicts/$t.dict")
  log=$(mktemp)
  start=$SECONDS
  # One process, one job: the machine's other work keeps its cores. -timeout is per input (s).
  if ! cargo +"$nightly" fuzz run -O -s "$sanitizer" "$t" "$corpus/$t" "seeds/$t" -- \
      -runs="$runs" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "${dict[@]}" > "$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz.sh: $t crashed (input under fuzz/artifacts/$t/)" >&2
    exit 1
  fi
  done_line=$(grep -E '^Done [0-9]+ runs' "$log" | tail -1)
  files=$(find "$corpus/$t" -type f | wc -l)
  bytes=$(du -sb "$corpus/$t" | cut -f1)
  echo "$t: ${done_line:-no final line} (wall $((SECONDS - start)) s); corpus $files files, $bytes bytes"
  grep '^stat::' "$log" | sed 's/^/  /'
  rm -f "$log"
done
