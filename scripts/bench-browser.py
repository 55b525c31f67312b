#!/usr/bin/env python3
"""The browser build (npm package, wasm CPU, headless Chromium) against native, side by side.

Alternates `tessera bench` and `node tests/browser/bench.mjs` (the relaxed-SIMD builds where
exact; threads > 1 is the threaded build), one model and thread count at a time, for several
rounds. Writes bench/results/<date>-browser-native.json with every round and the medians of the
per-round ratios native ÷ browser (scripts/bench-report.py shows it in docs/BENCHMARKS.md).
With --llama-bench, each round also runs llama.cpp's native build on the same model and flags,
and a second table sets the browser against it.
Needs the wasm builds in web/ (scripts/build-wasm.sh all) and Chromium (scripts/setup.sh).

    python3 scripts/bench-browser.py --tessera PATH [--llama-bench PATH] [--rounds 3] [--threads 1,2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import bench_result

ROOT = Path(__file__).resolve().parent.parent
MODELS = [("Gemma 3 270M Q4_K_M", "gemma3", "gemma-3-270m-q4_k_m.gguf"),
          ("SmolLM2-135M Q4_1", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")]
P, N, REPS = 256, 32, 2


def native(bench, path, threads):
    """pp and tg t/s of `bench` (`[tessera, "bench"]` or `[llama-bench]`: the same flags and JSON)."""
    return bench_result.pp_tg([*bench, "-m", str(path), "-p", str(P), "-n", str(N),
                               "-r", str(REPS), "-t", str(threads), "-o", "json"])


def browser(key, threads):
    out = subprocess.run(["node", "tests/browser/bench.mjs", "--models", key, "--threads", str(threads),
                          "-p", str(P), "-n", str(N), "-r", str(REPS)],
                         check=True, capture_output=True, text=True, cwd=ROOT).stdout
    line = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
    return line["pp_tps"], line["tg_tps"], f"{line['build']}, {line['simd']}"


def fmt(xs):
    return ", ".join(f"{x:.1f}" for x in xs)


def ratio_cells(web, nat):
    """Each side's figures and the per-pair ratios nat ÷ web with their median, for pp and tg."""
    cells = []
    for k in (0, 1):
        w, n = [x[k] for x in web], [x[k] for x in nat]
        ratios = [y / x for x, y in zip(w, n)]
        median = statistics.median(ratios)
        cells += [fmt(w), fmt(n), f"{', '.join(f'{r:.2f}' for r in ratios)} (**{median:.2f}×**)"]
    return cells


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--llama-bench", help="also run llama.cpp's native build each round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    models_dir = Path(os.environ.get("TESSERA_MODELS", ROOT / "models"))
    rows, llama_rows, builds = [], [], set()
    for label, key, file in MODELS:
        for t in [int(x) for x in a.threads.split(",")]:
            web, nat, llama = [], [], []
            for i in range(a.rounds):
                pp, tg, build = browser(key, t)
                builds.add(build)
                web.append((pp, tg))
                nat.append(native([a.tessera, "bench"], models_dir / file, t))
                line = (f"{label} t={t} round {i + 1}: browser pp {pp:.1f} tg {tg:.1f}; "
                        f"native pp {nat[-1][0]:.1f} tg {nat[-1][1]:.1f}")
                if a.llama_bench:
                    llama.append(native([a.llama_bench], models_dir / file, t))
                    line += f"; llama.cpp pp {llama[-1][0]:.1f} tg {llama[-1][1]:.1f}"
                print(line, file=sys.stderr)
            rows.append([f"{label}, {t}", *ratio_cells(web, nat)])
            if a.llama_bench:
                llama_rows.append([f"{label}, {t}", *ratio_cells(web, llama)])
    tables = [
        {"columns": ["model, threads", f"browser pp{P}", f"native pp{P}", "pp ratio (median)",
                     f"browser tg{N}", f"native tg{N}", "tg ratio (median)"],
         "rows": rows},
    ]
    commands = [
        f"tessera bench -m MODEL -p {P} -n {N} -r {REPS} -t T -o json",
        f"node tests/browser/bench.mjs --models M --threads T -p {P} -n {N} -r {REPS}",
        "python3 scripts/bench-browser.py --tessera PATH",
    ]
    notes = []
    if a.llama_bench:
        tables.append(
            {"title": "The same browser runs against llama.cpp's native build (llama-bench)",
             "columns": ["model, threads", f"browser pp{P}", f"llama.cpp pp{P}", "pp ratio (median)",
                         f"browser tg{N}", f"llama.cpp tg{N}", "tg ratio (median)"],
             "rows": llama_rows})
        commands[-1] += " --llama-bench PATH"
        commands.insert(2, f"llama-bench -m MODEL -p {P} -n {N} -r {REPS} -t T -o json")
        notes.append("llama-bench built from the llama-cpp-python 0.3.36 sdist (GGML_NATIVE, default "
                     "repacking), run in the same rounds right after Tessera's native run; ratio = "
                     "llama.cpp ÷ browser.")
    out = bench_result.write(
        "browser-vs-native",
        "Browser (npm package, wasm CPU) against native, side by side",
        "browser-native",
        commands=commands,
        tables=tables,
        notes=[
            f"{a.rounds} alternated pairs per model and thread count; ratio = native ÷ browser per "
            "pair, then the median (bold).",
            f"Browser builds: {'; '.join(sorted(builds))} (headless Chromium). Both sides repack "
            "the same weights into 8-row groups (SIMD128 kernels in the browser), except SmolLM2's "
            "Q4_1 layers: repacked natively (with ggml's arithmetic), ggml's file layout in the "
            "browser.",
            *notes,
        ],
    )
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
