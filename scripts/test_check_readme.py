#!/usr/bin/env python3
"""Tests of scripts/check-readme.py: the README passes, and each kind of drift is caught.
`TESSERA_BIN=path/to/tessera python3 scripts/test_check_readme.py`."""
import importlib.util
import os
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("check_readme", HERE / "check-readme.py")
check_readme = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_readme)
TESSERA = os.environ["TESSERA_BIN"]


def errors(readme):
    return check_readme.check_repository(HERE.parent, TESSERA, readme)[0]


class CheckReadme(unittest.TestCase):
    def test_the_readme_matches(self):
        found, checked = check_readme.check_repository(HERE.parent, TESSERA)
        self.assertEqual(found, [])
        self.assertGreater(checked, 20)

    def test_drift_is_caught(self):
        cases = {
            "npm run no-such-script": "no script `no-such-script`",
            "scripts/no-such.sh all": "scripts/no-such.sh does not exist",
            "scripts/synth_gguf.py": "scripts/synth_gguf.py does not exist",
            "cargo run -p tessera-runtime --example nope": "has no example `nope`",
            "cargo run -p tessera-nope": "no workspace package `tessera-nope`",
            "cargo run -p tessera -- run --no-such-flag": "does not parse",
            "cargo run -p tessera -- frobnicate": "does not parse",
            "tessera bench --tokens 3": "does not parse",
            "cargo run -p tessera-runtime --example chat -- models/other.gguf": "not a model",
            "no-such-program --version": "is not installed",
        }
        for command, message in cases.items():
            with self.subTest(command=command):
                found = errors(f"```sh\n# a comment\n{command}\n```\n")
                self.assertEqual(len(found), 1, found)
                self.assertIn(message, found[0])

    def test_continuations_and_chains(self):
        readme = "```sh\nnpm ci && npm run \\\n  no-such\n```\n```js\nnpm run ignored\n```\n"
        found = errors(readme)
        self.assertEqual(len(found), 1, found)
        self.assertIn("`no-such`", found[0])

    def test_a_script_must_be_executable(self):
        self.assertIn("not executable", errors("```sh\nweb/demo/demo.js\n```\n")[0])


if __name__ == "__main__":
    unittest.main()
