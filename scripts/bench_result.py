"""One benchmark session written as bench/results/<date>-<name>.json, the format
scripts/bench-report.py renders into docs/BENCHMARKS.md. Standard library only."""
import datetime
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write(kind, title, name, commands, tables, notes):
    """Writes the session (this commit, now, the machine with its load at the end); returns the
    file's path relative to the repository."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    load = os.getloadavg()[0]
    now = datetime.datetime.now(datetime.timezone.utc)
    result = {
        "kind": kind,
        "title": title,
        "date": now.strftime("%Y-%m-%dT%H:%M"),
        "commit": commit or None,
        "machine": f"2-core x86-64 VM (AVX2, AVX-512, VNNI); load average {load:.1f} at the end",
        "commands": commands,
        "tables": tables,
        "notes": notes,
    }
    out = ROOT / "bench/results" / f"{now.strftime('%Y-%m-%d-%H%M')}-{name}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    return out.relative_to(ROOT)
