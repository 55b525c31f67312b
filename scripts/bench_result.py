"""One benchmark session written as bench/results/<date>-<name>.json, the format
scripts/bench-report.py renders into docs/BENCHMARKS.md. Standard library only."""
import datetime
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpuinfo():
    """The first CPU's /proc/cpuinfo fields (empty where there is none)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in lines)}


def cpu_features(info):
    """The SIMD features the kernels choose between (the figures differ a lot between an
    AVX2-only VM and one with AVX-512 VNNI), e.g. "AVX2, AVX-512, AVX-512 VNNI"."""
    flags = info.get("flags", "").split()
    wanted = [("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX-512 VNNI"),
              ("avx_vnni", "AVX-VNNI")]
    return ", ".join(name for flag, name in wanted if flag in flags) or "no AVX2"


def pp_tg(cmd):
    """Runs `tessera bench` or `llama-bench` (`cmd`, with `-o json`): the prompt and the
    generation test's mean t/s."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] > 0)
    return pp, tg


def write(kind, title, name, commands, tables, notes):
    """Writes the session (this commit, now, the machine with its load at the end); returns the
    file's path relative to the repository."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    load = os.getloadavg()[0]
    info = cpuinfo()
    features = cpu_features(info)
    now = datetime.datetime.now(datetime.timezone.utc)
    result = {
        "kind": kind,
        "title": title,
        "date": now.strftime("%Y-%m-%dT%H:%M"),
        "commit": commit or None,
        "machine": f"{os.cpu_count()}-core x86-64 VM, {info.get('model name', '')} ({features}); "
                   f"load average {load:.1f} at the end",
        "cpu": features,
        "commands": commands,
        "tables": tables,
        "notes": notes,
    }
    out = ROOT / "bench/results" / f"{now.strftime('%Y-%m-%d-%H%M')}-{name}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    return out.relative_to(ROOT)
