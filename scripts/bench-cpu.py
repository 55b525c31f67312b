#!/usr/bin/env python3
"""Tessera against llama.cpp on the CPU, side by side: both test models, pp512 and tg128, 2 and 1 threads.

Alternates `tessera bench` and `llama-bench` (defaults: llama.cpp repacks what it repacks on this
CPU), one model and thread count at a time, for several rounds; then runs `tessera bench --roofline`
once per thread count for the decode roofline. Writes bench/results/<date>-cpu-llamacpp.json with
every round, the medians of the per-round ratios and the roofline lines (scripts/bench-report.py
shows it in docs/BENCHMARKS.md).

    python3 scripts/bench-cpu.py --tessera PATH --llama-bench PATH [--rounds 3] [--threads 2,1]
"""
import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

import bench_result

ROOT = Path(__file__).resolve().parent.parent
MODELS = [("SmolLM2-135M Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf"),
          ("Gemma 3 270M Q4_K_M", "gemma-3-270m-q4_k_m.gguf")]


def fmt(xs):
    return ", ".join(f"{x:.1f}" for x in xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="2,1")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    models_dir = Path(os.environ.get("TESSERA_MODELS", ROOT / "models"))
    rows, roofline, notes = [], [], []
    for t in [int(x) for x in a.threads.split(",")]:
        for label, file in MODELS:
            common = ["-m", str(models_dir / file), "-p", "512", "-n", "128", "-t", str(t),
                      "-r", str(a.reps), "-o", "json"]
            ours, theirs = [], []
            for i in range(a.rounds):
                ours.append(bench_result.pp_tg([a.tessera, "bench", *common]))
                theirs.append(bench_result.pp_tg([a.llama_bench, *common]))
                print(f"{label} t={t} round {i + 1}: tessera pp {ours[-1][0]:.1f} tg {ours[-1][1]:.1f}; "
                      f"llama.cpp pp {theirs[-1][0]:.1f} tg {theirs[-1][1]:.1f}", file=sys.stderr)
            cells = [label, str(t)]
            for k in (0, 1):
                o, l = [x[k] for x in ours], [x[k] for x in theirs]
                ratios = [x / y for x, y in zip(o, l)]
                cells += [fmt(l), fmt(o), f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})"]
            rows.append(cells)
        # The decode roofline with this thread count, from one more tessera run per model.
        for label, file in MODELS:
            p = subprocess.run([a.tessera, "bench", "-m", str(models_dir / file), "-p", "0", "-n", "128",
                                "-t", str(t), "-r", str(a.reps), "--roofline"],
                               check=True, capture_output=True, text=True)
            line = next(l for l in p.stderr.splitlines() if l.startswith("roofline"))
            roofline.append([label, str(t), line.split(": ", 1)[1]])
    out = bench_result.write(
        "cpu-vs-llamacpp",
        "Tessera against llama.cpp on the CPU (repacked 8-row weights)",
        "cpu-llamacpp",
        commands=[
            f"tessera bench -m MODEL -p 512 -n 128 -t T -r {a.reps} -o json",
            f"llama-bench -m MODEL -p 512 -n 128 -t T -r {a.reps} -o json   (alternated, {a.rounds} rounds)",
            f"tessera bench -m MODEL -p 0 -n 128 -t T -r {a.reps} --roofline",
            "python3 scripts/bench-cpu.py --tessera PATH --llama-bench PATH",
        ],
        tables=[
            {"columns": ["model", "threads", "llama.cpp pp512", "tessera pp512", "ratio: median (rounds)",
                         "llama.cpp tg128", "tessera tg128", "ratio: median (rounds)"],
             "rows": rows},
            {"columns": ["model", "threads", "decode roofline (tessera)"], "rows": roofline},
        ],
        notes=notes + [
            "llama-bench built from the llama-cpp-python 0.3.36 sdist (GGML_NATIVE, default repacking: "
            "Q4_0/Q4_K/IQ4_NL/MXFP4 8x8 on this CPU; tinyBLAS for batched Q8_0/Q5_0).",
            "Bytes per token = the model's tensor bytes (every weight is read once per decode step; "
            "both models tie their output to the embedding table).",
        ],
    )
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
