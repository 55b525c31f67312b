#!/usr/bin/env python3
"""`tessera serve` against `llama-server` under the same load, side by side.

Starts each server on the same model (--parallel 4, the same context and threads), runs
`tessera load-test` (N concurrent streaming clients for M seconds) against it, alternating the
servers for --rounds rounds, and writes bench/results/<date>-serve-vs-llama-server.json
(scripts/bench-report.py shows it in docs/BENCHMARKS.md). With --soak SECONDS it then runs one
long load on `tessera serve` alone and records errors and the server's memory before and after.

    python3 scripts/bench-serve.py --tessera PATH --llama-server PATH [--model FILE] [--clients 8]
"""
import argparse
import datetime
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start(cmd, pattern):
    """Starts a server, waits until /health answers 200; returns (process, url)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = None
    for line in p.stderr:
        m = re.search(pattern, line)
        if m:
            url = m.group(1)
            break
    if url is None:
        raise SystemExit(f"{cmd[0]} did not start")
    # Keep reading its log: a full pipe would block the server.
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    for _ in range(600):
        try:
            if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                return p, url
        except Exception:
            time.sleep(0.2)
    raise SystemExit(f"{cmd[0]}: not healthy")


def load(tessera, url, pid, clients, seconds, max_tokens):
    out = subprocess.run([tessera, "load-test", "--url", url, "--clients", str(clients), "--duration", str(seconds),
                          "--max-tokens", str(max_tokens), "--server-pid", str(pid), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--soak", type=int, default=0, help="seconds of a long load on tessera serve alone")
    a = ap.parse_args()
    common = ["-m", a.model, "-c", "4096", "-t", str(a.threads)]
    servers = {
        "tessera serve": [a.tessera, "serve", *common, "--port", "0", "--parallel", "4"],
        "llama-server": [a.llama_server, *common, "--port", "18089", "--parallel", "4", "--no-webui"],
    }
    patterns = {"tessera serve": r"listening on (http://\S+)", "llama-server": r"listening on (http://\S+)"}
    runs = {name: [] for name in servers}
    for i in range(a.rounds):
        for name, cmd in servers.items():
            p, url = start(cmd, patterns[name])
            try:
                r = load(a.tessera, url, p.pid, a.clients, a.seconds, a.max_tokens)
            finally:
                p.terminate()
                p.wait()
            runs[name].append(r)
            print(f"round {i + 1} {name}: {r['tokens_per_second']:.1f} t/s, ttft p50 {r['ttft_ms_p50']:.0f} ms, "
                  f"errors {r['errors']}", file=sys.stderr)
    med = lambda name, key: statistics.median(r[key] for r in runs[name])
    rows = [] if not a.rounds else [[name, str(a.clients), f"{med(name, 'tokens_per_second'):.1f}", f"{med(name, 'ttft_ms_p50'):.0f}",
             f"{med(name, 'ttft_ms_p95'):.0f}", f"{med(name, 'per_token_ms_p50'):.1f}", f"{med(name, 'per_token_ms_p95'):.1f}",
             str(sum(r['errors'] for r in runs[name])),
             f"{med(name, 'server_rss_mib_before'):.0f} → {med(name, 'server_rss_mib_after'):.0f}"] for name in servers]
    tables = [{"title": f"{a.clients} streaming clients, {a.seconds} s, --parallel 4 (medians of {a.rounds} rounds)",
               "columns": ["server", "clients", "tokens/s", "TTFT p50 ms", "TTFT p95 ms", "per token p50 ms",
                           "per token p95 ms", "errors", "RSS MiB before → after"], "rows": rows}] if rows else []
    notes = ["Rounds (t/s): " + "; ".join(f"{n}: " + ", ".join(f"{r['tokens_per_second']:.1f}" for r in rs) for n, rs in runs.items())] if rows else []
    if a.soak:
        # A warm-up load first: the slots' KV caches and buffers become resident as they fill,
        # so memory growth is measured from there.
        p, url = start(servers["tessera serve"], patterns["tessera serve"])
        try:
            w = load(a.tessera, url, p.pid, a.clients, 60, a.max_tokens)
            r = load(a.tessera, url, p.pid, a.clients, a.soak, a.max_tokens)
        finally:
            p.terminate()
            p.wait()
        tables.append({"title": f"tessera serve alone, {a.clients} streaming clients for {a.soak} s after a 60 s warm-up",
                       "columns": ["requests", "errors", "tokens/s", "RSS MiB at start", "after the warm-up",
                                   "after the soak"],
                       "rows": [[str(r["requests"]), str(r["errors"] + w["errors"]), f"{r['tokens_per_second']:.1f}",
                                 f"{w['server_rss_mib_before']:.0f}", f"{r['server_rss_mib_before']:.0f}",
                                 f"{r['server_rss_mib_after']:.0f}"]]})
        print(f"soak: {r['requests']} requests, {r['errors']} errors, RSS {w['server_rss_mib_before']:.0f} → "
              f"{r['server_rss_mib_before']:.0f} → {r['server_rss_mib_after']:.0f} MiB", file=sys.stderr)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc)
    kind = "serve-vs-llama-server" if rows else "serve-soak"
    result = {
        "kind": kind,
        "title": "Server: tessera serve against llama-server under the same streaming load" if rows
                 else "Server: tessera serve under a long streaming load",
        "date": now.strftime("%Y-%m-%dT%H:%M"),
        "commit": commit or None,
        "machine": "2-core x86-64 VM (AVX2, AVX-512, VNNI); clients and server share the cores; other builds may run",
        "commands": [
            f"tessera serve -m MODEL -c 4096 -t {a.threads} --parallel 4   /   llama-server -m MODEL -c 4096 -t {a.threads} --parallel 4",
            f"tessera load-test --url URL --clients {a.clients} --duration {a.seconds} --max-tokens {a.max_tokens} --server-pid PID --json",
            f"python3 scripts/bench-serve.py --clients {a.clients} --seconds {a.seconds} --rounds {a.rounds} --soak {a.soak}",
        ],
        "tables": tables,
        "notes": notes + [f"Model: {Path(a.model).name}; chat requests at temperature 0.7, {a.max_tokens} tokens each."],
    }
    out = ROOT / "bench/results" / f"{now.strftime('%Y-%m-%d-%H%M')}-{kind}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(out.relative_to(ROOT), file=sys.stderr)


if __name__ == "__main__":
    main()
