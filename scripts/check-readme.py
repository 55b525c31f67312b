#!/usr/bin/env python3
"""Checks that the README's commands still match the repository, the cheap way (nothing is
built, downloaded or run for real), so that the README cannot drift:
- each command's program exists (on PATH, or a script of the repository that is executable);
- `npm ci` has its lockfile; `npm run NAME` names a script of package.json, and the file that
  script runs exists;
- `cargo run -p PKG [--example X | --bin X]` names a workspace package and one of its targets; a
  model path among the arguments is one scripts/fetch-models.sh makes;
- every `tessera ...` line in the README and in docs/*.md parses: the built binary is run with the
  line's arguments and `--help` (clap stops at the first unknown subcommand or flag).

Usage: scripts/check-readme.py TESSERA_BINARY [--root DIR]   (scripts/test.sh runs it)
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

FENCE = re.compile(r"^```(sh|bash|console)\s*$")


def command_blocks(markdown):
    """The lines of the shell code blocks, without comments, joined across `\\` continuations."""
    lines, inside, pending = [], False, ""
    for line in markdown.splitlines():
        if line.startswith("```"):
            inside = bool(FENCE.match(line)) and not inside
            continue
        if not inside:
            continue
        line = pending + line
        pending = ""
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        words = shlex.split(line, comments=True)
        if words and words[0] == "$":
            words = words[1:]
        if words:
            lines.append(words)
    return lines


def commands(words):
    """One line's commands, split at `&&`, `||` and `;`."""
    out, cur = [], []
    for w in words:
        if w in ("&&", "||", ";"):
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    return [c for c in out + [cur] if c]


class Checker:
    def __init__(self, root, tessera):
        self.root = root
        self.tessera = tessera
        self.errors = []
        self.package_json = json.loads((root / "package.json").read_text())
        self._packages = None

    def fail(self, where, message):
        self.errors.append(f"{where}: {message}")

    def packages(self):
        """Workspace package name -> {target kind -> names}."""
        if self._packages is None:
            out = subprocess.run(
                ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                cwd=self.root, capture_output=True, text=True, check=True).stdout
            self._packages = {}
            for p in json.loads(out)["packages"]:
                targets = {}
                for t in p["targets"]:
                    for kind in t["kind"]:
                        targets.setdefault(kind, set()).add(t["name"])
                self._packages[p["name"]] = targets
        return self._packages

    def script(self, where, path):
        file = self.root / path
        if not file.is_file():
            self.fail(where, f"{path} does not exist")
        elif not os.access(file, os.X_OK):
            self.fail(where, f"{path} is not executable")

    def check(self, where, cmd):
        program = cmd[0]
        if "/" in program:
            self.script(where, program)
        elif program == "tessera":
            self.tessera_parses(where, cmd[1:])
        elif shutil.which(program) is None:
            self.fail(where, f"`{program}` is not installed here")
        if program == "npm":
            self.npm(where, cmd[1:])
        elif program == "cargo" and cmd[1:2] == ["run"]:
            self.cargo_run(where, cmd[2:])

    def npm(self, where, args):
        if args[:1] == ["ci"] and not (self.root / "package-lock.json").is_file():
            self.fail(where, "npm ci needs package-lock.json")
        if args[:1] == ["run"]:
            name = args[1] if len(args) > 1 else ""
            script = self.package_json.get("scripts", {}).get(name)
            if script is None:
                self.fail(where, f"package.json has no script `{name}`")
                return
            for word in shlex.split(script):
                if re.match(r"^[\w.-]+/[\w./-]+\.(sh|mjs|js|py)$", word) and not (self.root / word).is_file():
                    self.fail(where, f"npm script `{name}` runs {word}, which does not exist")

    def cargo_run(self, where, args):
        split = args.index("--") if "--" in args else len(args)
        before, after = args[:split], args[split + 1:]
        package = before[before.index("-p") + 1] if "-p" in before else None
        if package not in self.packages():
            self.fail(where, f"no workspace package `{package}`")
            return
        targets = self.packages()[package]
        for flag, kind in (("--example", "example"), ("--bin", "bin")):
            if flag in before:
                name = before[before.index(flag) + 1]
                if name not in targets.get(kind, set()):
                    self.fail(where, f"package `{package}` has no {kind} `{name}`")
        fetched = (self.root / "scripts" / "fetch-models.sh").read_text()
        for arg in after:
            if arg.startswith("models/") and arg.endswith(".gguf") and Path(arg).name not in fetched:
                self.fail(where, f"{arg} is not a model scripts/fetch-models.sh fetches")
        if package == "tessera":
            self.tessera_parses(where, after)

    def tessera_parses(self, where, args):
        # Optional parts written as `[--flag VALUE]` are documentation, not arguments.
        args = [a for a in args if not (a.startswith("[") or a.endswith("]"))]
        run = subprocess.run([self.tessera, *args, "--help"], capture_output=True, text=True)
        if run.returncode != 0:
            first = (run.stderr.strip().splitlines() or ["(no message)"])[0]
            self.fail(where, f"`tessera {shlex.join(args)}` does not parse: {first}")


def check_repository(root, tessera, readme=None):
    """(errors, number of commands checked); `readme` replaces README.md's text (tests)."""
    checker = Checker(root, tessera)
    readme = (root / "README.md").read_text() if readme is None else readme
    checked = 0
    for n, words in enumerate(command_blocks(readme), 1):
        for cmd in commands(words):
            checker.check(f"README.md command {n}", cmd)
            checked += 1
    for doc in sorted((root / "docs").glob("*.md")):
        for words in command_blocks(doc.read_text()):
            for cmd in commands(words):
                if cmd[0] == "tessera":
                    checker.tessera_parses(f"{doc.relative_to(root)}", cmd[1:])
                    checked += 1
    return checker.errors, checked


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tessera", help="the built tessera binary")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    errors, checked = check_repository(args.root, args.tessera)
    for e in errors:
        print(f"check-readme: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"check-readme: {checked} commands (the README's, docs' tessera lines) match the repository")


if __name__ == "__main__":
    main()
