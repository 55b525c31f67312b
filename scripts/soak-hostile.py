#!/usr/bin/env python3
"""A hostile soak of `tessera serve`: normal streaming clients alone, then beside every hostile
probe of `tessera load-test --hostile` (floods, slow and idle sockets, clients that hang up,
giant bodies), then alone again, on one server. Writes bench/results/<date>-serve-hostile-soak.json:
the normal clients' errors and p95 latencies in each phase, the hostile phase's against the
clean ones, the server's memory growth after the warm-up, and what each probe got.

    python3 scripts/soak-hostile.py --tessera PATH [--model FILE] [--seconds 600] [--clean 180]
"""
import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from importlib import import_module  # noqa: E402

serve = import_module("bench-serve")
ROOT = Path(__file__).resolve().parent.parent


def load(tessera, url, pid, args, seconds, hostile):
    cmd = [tessera, "load-test", "--url", url, "--clients", str(args.clients), "--duration", str(seconds),
           "--max-tokens", str(args.max_tokens), "--server-pid", str(pid), "--warmup", str(args.warmup), "--json"]
    if hostile:
        cmd.append("--hostile")
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--seconds", type=int, default=600, help="the hostile phase")
    ap.add_argument("--clean", type=int, default=180, help="each clean phase")
    ap.add_argument("--warmup", type=int, default=120)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    server_cmd = [args.tessera, "serve", "-m", args.model, "--port", "0", "-t", "1", "--parallel", "2"]
    proc, url = serve.start(server_cmd, r"listening on (http://\S+)")
    try:
        phases = [("clean, before", load(args.tessera, url, proc.pid, args, args.clean, False)),
                  ("hostile", load(args.tessera, url, proc.pid, args, args.seconds, True)),
                  ("clean, after", load(args.tessera, url, proc.pid, args, args.clean, False))]
    finally:
        proc.kill()
    clean = [r for name, r in phases if name.startswith("clean")]
    hostile = phases[1][1]

    def ratios(key):
        return " and ".join(f"{hostile[key] / r[key]:.2f}x" for r in clean)

    rows = [[name, round(r["seconds"]), r["requests"], r["errors"], round(r["tokens_per_second"], 1),
             round(r["ttft_ms_p95"], 1), round(r["per_token_ms_p95"], 2)] for name, r in phases]
    growth = (hostile["server_rss_mib_after"] / hostile["server_rss_mib_warm"] - 1) * 100
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip() or None
    now = datetime.datetime.now()
    result = {
        "kind": "serve-hostile-soak",
        "title": "tessera serve: normal streaming clients alone and beside hostile probes",
        "date": now.strftime("%Y-%m-%dT%H:%M"),
        "commit": commit,
        "machine": "2-core x86-64 VM (client, probes and server on the same cores)",
        # Names, not this machine's paths (the repo's structure test refuses those).
        "commands": [" ".join(["tessera", *server_cmd[1:3], Path(args.model).name, *server_cmd[4:]]),
                     f"tessera load-test --clients {args.clients} --max-tokens {args.max_tokens} "
                     f"--duration {args.clean} | --duration {args.seconds} --hostile --warmup {args.warmup} "
                     f"| --duration {args.clean}"],
        "tables": [{"columns": ["phase", "s", "requests", "errors", "t/s", "TTFT p95 ms", "per token p95 ms"],
                    "rows": rows}],
        "notes": [
            f"hostile p95 against the clean phases before and after: time to first token "
            f"{ratios('ttft_ms_p95')}, between tokens {ratios('per_token_ms_p95')}",
            f"server memory: {hostile['server_rss_mib_warm']:.1f} MiB after {args.warmup} s of the hostile "
            f"phase, {hostile['server_rss_mib_after']:.1f} MiB at its end ({growth:+.1f} %)",
            "probes: " + json.dumps(hostile["hostile"], sort_keys=True),
        ],
    }
    out = ROOT / "bench/results" / f"{now.strftime('%Y-%m-%d-%H%M')}-serve-hostile-soak.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
