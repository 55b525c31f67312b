#!/usr/bin/env python3
"""The GPU check's table: `tessera bench` and `llama-bench` side by side on each model, and
Tessera's decode bandwidth as a fraction of the GPU's HBM peak.

usage: gpu-summary.py [--record COMMIT] OUT MODEL...
OUT holds tessera-NAME.json and llama-NAME.json (the benches' `-o json`) and gpu.txt
(nvidia-smi's name, memory and driver); writes OUT/summary.md and prints it. --record also
writes the table as bench/results/<date>-cuda-llamacpp.json (kind cuda-vs-llamacpp, for
scripts/bench-report.py), COMMIT being the commit the Tessera binaries were built from.
HBM_PEAK_GBS sets the peak (default 4800: the H200's 4.8 TB/s).

Bytes per decoded token are the bench's model_size (every tensor once; a tied embedding is read
whole as the output head, an untied one only a row per token, so untied models read a little
less than this and their fraction is a slight overestimate)."""
import datetime
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load(path):
    """{"pp": t/s, "tg": t/s, "size": bytes} from a bench JSON file (empty when missing)."""
    try:
        text = open(path).read()
    except OSError:
        return {}
    try:
        rows = json.loads(text)
    except ValueError:
        # llama-bench's JSON is not always well formed (seen: a record closed by ",," instead
        # of "},"): take the fields from each record in order.
        rows = [{"n_gen": int(g), "avg_ts": float(t), "model_size": int(z)} for z, g, t in re.findall(
            r'"model_size": (\d+).*?"n_gen": (\d+).*?"avg_ts": ([0-9.e+-]+)', text, re.S)]
    out = {}
    for r in rows:
        out["pp" if r["n_gen"] == 0 else "tg"] = r["avg_ts"]
        out["size"] = r["model_size"]
    return out


def record(out, commit, columns, rows):
    """Writes the table as a bench/results file; returns its path."""
    gpu = Path(out, "gpu.txt").read_text().splitlines()[-1] if Path(out, "gpu.txt").exists() else "?"
    now = datetime.datetime.now(datetime.timezone.utc)
    result = {
        "kind": "cuda-vs-llamacpp",
        "title": "CUDA backend against llama.cpp's CUDA build (tessera bench / llama-bench, -p 512 -n 128 -r 5)",
        "date": now.strftime("%Y-%m-%dT%H:%M"),
        "commit": commit,
        "machine": f"GPU (nvidia-smi: name, memory, driver, max SM and memory clocks): {gpu}",
        "commands": [
            "scripts/gpu-lease.sh prepare  (here), then on the lent machine: start, add PART..., finish",
            "tessera bench -m MODEL --backend cuda -p 512 -n 128 -r 5 -o json",
            "llama-bench -m MODEL -ngl 99 -p 512 -n 128 -r 5 -o json  (llama-cpp-python 0.3.36 sdist, "
            "GGML_CUDA, CMAKE_CUDA_ARCHITECTURES=90, the machine's nvcc)",
            "python3 scripts/gpu-summary.py --record COMMIT OUT MODELS...",
        ],
        "tables": [{"columns": columns, "rows": rows}],
        "notes": [
            "Each figure is the bench's mean of 5 repetitions, one sitting, the two benches one "
            "after the other on an otherwise idle GPU.",
            "Decode bandwidth: model_size (every tensor once) x tg128 t/s over 4.8 TB/s.",
        ],
    }
    path = ROOT / "bench/results" / f"{now.strftime('%Y-%m-%d-%H%M')}-cuda-llamacpp.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path.relative_to(ROOT)


def main():
    args = sys.argv[1:]
    commit = None
    if args[:1] == ["--record"]:
        commit, args = args[1], args[2:]
    out, models = args[0], args[1:]
    peak = float(os.environ.get("HBM_PEAK_GBS", "4800")) * 1e9
    fmt = lambda d, k: f"{d[k]:.1f}" if k in d else "-"
    ratio = lambda a, b, k: f"{a[k] / b[k]:.2f}" if k in a and k in b else "-"
    columns = ["model", "size", "tessera pp512", "llama.cpp pp512", "ratio", "tessera tg128",
               "llama.cpp tg128", "ratio", "decode, % of HBM peak: tessera", "llama.cpp"]
    rows = []
    for m in models:
        name = os.path.basename(m)[: -len(".gguf")]
        t, l = load(f"{out}/tessera-{name}.json"), load(f"{out}/llama-{name}.json")
        size = t.get("size") or l.get("size") or os.path.getsize(m)
        bw = lambda d: f"{d['tg'] * size / peak * 100:.1f} %" if "tg" in d else "-"
        rows.append([name, f"{size / 2**20:.0f} MiB", fmt(t, "pp"), fmt(l, "pp"), ratio(t, l, "pp"),
                     fmt(t, "tg"), fmt(l, "tg"), ratio(t, l, "tg"), bw(t), bw(l)])
    text = "\n".join(["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
                     + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"
    open(f"{out}/summary.md", "w").write(text)
    print(text, end="")
    if commit:
        print(f"wrote {record(out, commit, columns, rows)}")


if __name__ == "__main__":
    main()
