#!/usr/bin/env python3
"""Tests of scripts/bench-report.py and of the GPU check's result table (gpu-summary.py):
`python3 scripts/test_bench_report.py`."""
import contextlib
import importlib.util
import io
import json
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("bench_report", HERE / "bench-report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)
spec = importlib.util.spec_from_file_location("gpu_summary", HERE / "gpu-summary.py")
gpu_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_summary)


def result(kind, date, value):
    return {"kind": kind, "title": f"{kind} at {date}", "date": date, "commit": None,
            "machine": "test", "commands": ["bench"],
            "tables": [{"columns": ["what", "t/s"], "rows": [["pp", value]]}]}


class BenchReport(unittest.TestCase):
    def test_latest_of_each_kind_and_check(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "r").mkdir()
            for name, r in [("a", result("cpu-vs-llamacpp", "2026-01-01", "1.0")),
                            ("b", result("cpu-vs-llamacpp", "2026-02-01", "2.0")),
                            ("c", result("test-suite-warm", "2026-01-15", "3.0"))]:
                (d / "r" / f"{name}.json").write_text(json.dumps(r))
            doc = d / "doc.md"
            doc.write_text("# intro\n")
            args = ["--results", str(d / "r"), "--doc", str(doc)]
            # --check's "stale" message is expected here.
            quiet = contextlib.redirect_stderr(io.StringIO())
            quiet.__enter__()
            self.addCleanup(quiet.__exit__, None, None, None)
            self.assertEqual(report.main(args + ["--check"]), 1)
            self.assertEqual(report.main(args), 0)
            text = doc.read_text()
            self.assertTrue(text.startswith("# intro\n"))
            self.assertIn("| pp | 2.0 |", text)      # the latest cpu-vs-llamacpp file
            self.assertNotIn("| pp | 1.0 |", text)    # only indexed
            self.assertIn("(../bench/results/a.json)", text)   # indexed under its kind
            self.assertNotIn("```sh", text)           # the commands stay in the files
            self.assertIn("(../bench/results/c.json)", text)   # an index-only kind: indexed,
            self.assertNotIn("| pp | 3.0 |", text)             # not shown
            self.assertEqual(report.main(args + ["--check"]), 0)
            (d / "r" / "b.json").write_text(json.dumps(result("cpu-vs-llamacpp", "2026-02-01", "9.9")))
            self.assertEqual(report.main(args + ["--check"]), 1)

    def test_latest_of_each_cpu(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "r").mkdir()
            for name, date, cpu, value in [("a", "2026-01-01", "AVX2, AVX-512", "1.0"),
                                           ("b", "2026-02-01", "AVX2", "2.0"),
                                           ("c", "2026-03-01", "AVX2", "3.0"),
                                           ("d", "2026-02-15", None, "4.0")]:
                r = result("cpu-vs-llamacpp", date, value)
                if cpu:
                    r["cpu"] = cpu
                (d / "r" / f"{name}.json").write_text(json.dumps(r))
            doc = d / "doc.md"
            doc.write_text("")
            self.assertEqual(report.main(["--results", str(d / "r"), "--doc", str(doc)]), 0)
            text = doc.read_text()
            # Each cpu's latest, the newest first; the older AVX2 file and the file without a
            # cpu, older than one with, only indexed.
            self.assertLess(text.index("| pp | 3.0 |"), text.index("| pp | 1.0 |"))
            self.assertIn("(AVX2, AVX-512)", text)
            self.assertNotIn("| pp | 2.0 |", text)
            self.assertNotIn("| pp | 4.0 |", text)

    def test_repository_document_is_current(self):
        self.assertEqual(report.main(["--check"]), 0)


# llama-bench's -o json as it came from the H200 once: the first record closed by ",,".
MALFORMED_LLAMA_BENCH = """[
  {
    "model_size": 96576768,
    "n_prompt": 512,
    "n_gen": 0,
    "avg_ts": 36065.572635,
    "samples_ts": [ 19113.5, 40271.5 ]
  ,,
  {
    "model_size": 96576768,
    "n_prompt": 0,
    "n_gen": 128,
    "avg_ts": 782.735654,
    "samples_ts": [ 780.1, 785.3 ]
  }
]
"""


class GpuSummary(unittest.TestCase):
    def test_reads_malformed_llama_bench_json_and_renders_a_known_kind(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "llama-m.json"
            path.write_text(MALFORMED_LLAMA_BENCH)
            self.assertEqual(gpu_summary.load(path),
                             {"pp": 36065.572635, "tg": 782.735654, "size": 96576768})
            path.write_text(MALFORMED_LLAMA_BENCH.replace(",,", "},"))
            self.assertEqual(gpu_summary.load(path)["tg"], 782.735654)
            self.assertEqual(gpu_summary.load(Path(d) / "missing.json"), {})
        known = {kind for kind, _ in report.KINDS}
        self.assertIn("cuda-vs-llamacpp", known)


if __name__ == "__main__":
    unittest.main()
