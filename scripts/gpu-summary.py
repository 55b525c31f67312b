#!/usr/bin/env python3
"""The GPU check's table: `tessera bench` and `llama-bench` side by side on each model, and
Tessera's decode bandwidth as a fraction of the GPU's HBM peak.

usage: gpu-summary.py OUT MODEL...   (OUT holds tessera-NAME.json and llama-NAME.json; writes
OUT/summary.md and prints it). HBM_PEAK_GBS sets the peak (default 4800: the H200's 4.8 TB/s).

Bytes per decoded token are the bench's model_size (every tensor once; a tied embedding is read
whole as the output head, an untied one only a row per token, so untied models read a little
less than this and their fraction is a slight overestimate)."""
import json
import os
import sys


def load(path):
    """{"pp": t/s, "tg": t/s, "size": bytes} from a bench JSON file (empty when missing)."""
    try:
        rows = json.load(open(path))
    except (OSError, ValueError):
        return {}
    out = {}
    for r in rows:
        out["pp" if r["n_gen"] == 0 else "tg"] = r["avg_ts"]
        out["size"] = r["model_size"]
    return out


def main():
    out, models = sys.argv[1], sys.argv[2:]
    peak = float(os.environ.get("HBM_PEAK_GBS", "4800")) * 1e9
    fmt = lambda d, k: f"{d[k]:.1f}" if k in d else "-"
    ratio = lambda a, b, k: f"{a[k] / b[k]:.2f}" if k in a and k in b else "-"
    lines = [
        "| model | size | tessera pp512 | llama.cpp pp512 | ratio | tessera tg128 | llama.cpp tg128 | ratio | tessera decode, % of HBM peak |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in models:
        name = os.path.basename(m)[: -len(".gguf")]
        t, l = load(f"{out}/tessera-{name}.json"), load(f"{out}/llama-{name}.json")
        size = t.get("size") or l.get("size") or os.path.getsize(m)
        bw = f"{t['tg'] * size / peak * 100:.1f} %" if "tg" in t else "-"
        lines.append(
            f"| {name} | {size / 2**20:.0f} MiB | {fmt(t, 'pp')} | {fmt(l, 'pp')} | {ratio(t, l, 'pp')} "
            f"| {fmt(t, 'tg')} | {fmt(l, 'tg')} | {ratio(t, l, 'tg')} | {bw} |"
        )
    text = "\n".join(lines) + "\n"
    open(f"{out}/summary.md", "w").write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
