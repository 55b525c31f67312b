#!/usr/bin/env python3
"""What constrained decoding costs, natively: per test model, the structured-output suite's
schemas run through tools/engine-dev's grammar-bench (compile time per schema; per token, the
mask and commit time beside the model's decode time), written as a bench/results file of kind
structured-output. Usage: scripts/bench-grammar.py [-t THREADS] [-n TOKENS]
(run on a quiet machine; it builds grammar-bench with the ci profile)."""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_result  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "crates/runtime/tests/data/structured_suite.json"
MODELS = [("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2 135M Q4_1"), ("gemma-3-270m-q4_k_m.gguf", "Gemma 3 270M Q4_K_M")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-n", type=int, default=64)
    args = ap.parse_args()
    models = Path(os.environ.get("TESSERA_MODELS", ROOT / "models"))
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache/tessera/target"))
    subprocess.run(["cargo", "build", "--profile", "ci", "-p", "tessera-engine-dev", "--bin", "grammar-bench"],
                   check=True, cwd=ROOT)
    binary = target / "ci/grammar-bench"
    rows, commands = [], []
    for file, name in MODELS:
        cmd = [str(binary), str(models / file), str(SUITE), "-n", str(args.n), "-t", str(args.t)]
        commands.append(f"grammar-bench {file} structured_suite.json -n {args.n} -t {args.t}")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        s = [json.loads(l) for l in out.splitlines() if l.startswith("{")][-1]
        rows.append([name, str(s["schemas"]), f"{s['grammar_env_s']:.2f} s",
                     f"{s['compile_ms_median']:.2f} ms", f"{s['compile_ms_max']:.1f} ms",
                     f"{s['mask_commit_us_median']:.0f} µs", f"{s['decode_us_median'] / 1e3:.2f} ms",
                     f"{100 * s['share_median']:.1f} %", f"{100 * s['share_max']:.1f} %"])
    table = {"columns": ["model", "schemas", "vocabulary setup (once per model)", "compile, median",
                         "compile, worst", "mask + commit per token, median", "decode per token, median",
                         "mask share of decode, median", "mask share, worst schema"],
             "rows": rows}
    notes = [
        "Greedy, each schema's prompt in the model's chat template, up to "
        f"{args.n} tokens; -t {args.t} threads; native CPU (the ci profile). Compile is what a "
        "schema adds before the first token; the vocabulary setup is built once per loaded "
        "model (tessera serve builds it beside the first requests after loading).",
        "Mask + commit: llguidance's allowed-token mask for the next token, the masked pick and "
        "taking the token, per generated token; share: that over the model's decode time per "
        "token (the issue's bound: 5 %).",
    ]
    path = bench_result.write("structured-output", "Structured output: grammar compile and mask costs per token",
                              "structured-output", commands, [table], notes)
    print(path)


if __name__ == "__main__":
    main()
