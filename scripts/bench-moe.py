#!/usr/bin/env python3
"""Decode speed on a mixture-of-experts model, Tessera against llama.cpp, side by side.

Writes the synthetic qwen3moe model tools/synth_gguf.py makes with 32 experts (4 used), n_embd 512,
6 blocks, Q8_0 (~220 MB), then alternates `tessera bench` and `llama-bench` rounds (tg128, 2 threads)
and writes bench/results/<date>-moe-vs-llamacpp.json with the medians (scripts/bench-report.py shows
it in docs/BENCHMARKS.md).

    python3 scripts/bench-moe.py --tessera PATH --llama-bench PATH [--rounds 5]
"""
import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYNTH = ["--arch", "qwen3moe", "--seed", "1", "--type", "q8_0", "--n-embd", "512", "--n-layer", "6",
         "--n-expert", "32", "--n-expert-used", "4"]


def tg(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)[0]["avg_ts"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "qwen3moe-32x4.gguf"
        subprocess.run([sys.executable, str(ROOT / "tools/synth_gguf.py"), *SYNTH, "--out", str(model)],
                       check=True, cwd=ROOT)
        size_mb = model.stat().st_size / 1e6
        common = ["-m", str(model), "-p", "0", "-n", "128", "-t", str(a.threads), "-r", "3", "-o", "json"]
        ours, theirs = [], []
        for i in range(a.rounds):
            ours.append(tg([a.tessera, "bench", *common]))
            theirs.append(tg([a.llama_bench, *common]))
            print(f"round {i + 1}: tessera {ours[-1]:.1f} t/s, llama.cpp {theirs[-1]:.1f} t/s", file=sys.stderr)
    mo, mt = statistics.median(ours), statistics.median(theirs)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc)
    result = {
        "kind": "moe-vs-llamacpp",
        "title": "CPU: mixture-of-experts decode against llama.cpp (synthetic qwen3moe, 32 experts, 4 used)",
        "date": now.strftime("%Y-%m-%dT%H:%M"),
        "commit": commit or None,
        "machine": "2-core x86-64 VM (AVX2, AVX-512, VNNI); other builds may run",
        "commands": [
            "python3 tools/synth_gguf.py " + " ".join(SYNTH) + f" --out MODEL   ({size_mb:.0f} MB)",
            f"tessera bench {' '.join(common[2:])} -m MODEL   and   llama-bench (same flags), alternated, {a.rounds} rounds",
        ],
        "tables": [{
            "columns": ["model", "threads", "test", "llama.cpp t/s (median)", "Tessera t/s (median)", "Tessera / llama.cpp"],
            "rows": [[f"qwen3moe 32x4 Q8_0 ({size_mb:.0f} MB)", str(a.threads), "tg128",
                      f"{mt:.1f} ({a.rounds})", f"{mo:.1f} ({a.rounds})", f"{mo / mt:.2f}"]],
        }],
        "notes": [
            "Rounds: " + ", ".join(f"{o:.1f}/{t:.1f}" for o, t in zip(ours, theirs)) + " (Tessera/llama.cpp t/s).",
            "Each run is the mean of 3 repetitions; llama-bench built from the llama-cpp-python 0.3.36 sdist "
            "(GGML_NATIVE, default repacking).",
        ],
    }
    out = ROOT / "bench/results" / f"{now.strftime('%Y-%m-%d-%H%M')}-moe-vs-llamacpp.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{out.relative_to(ROOT)}: Tessera {mo:.1f} t/s, llama.cpp {mt:.1f} t/s ({mo / mt:.2f}x)", file=sys.stderr)


if __name__ == "__main__":
    main()
