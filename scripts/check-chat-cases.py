#!/usr/bin/env python3
"""Validates the chat parser and render case files ported from llama.cpp's test-chat.cpp.

Checks that both files load, that every template exists under $TESSERA_MODELS/templates, that
every tool a case names is defined, that tool-call arguments are JSON, that the keys a case
needs are present and its options hold known values; prints the number of cases per family.

Usage: TESSERA_MODELS=<models dir> check-chat-cases.py [data dir]
(the data dir defaults to crates/runtime/tests/data next to this script's repository root)
"""

import collections
import json
import os
import sys

REASONING_FORMATS = {"none", "auto", "deepseek", "deepseek-legacy"}
TOOL_CHOICES = {"auto", "required", "none"}
CONTINUATIONS = {"none", "auto", "content", "reasoning"}
ROLES = {"system", "developer", "user", "assistant", "tool"}
OUTPUT_KEYS = {"line", "template", "family", "input", "tools", "messages", "reasoning_format", "enable_thinking",
               "parallel_tool_calls", "tool_choice", "add_generation_prompt", "continue_final_message",
               "options", "is_partial", "expect", "expect_error", "expect_reconstruction"}
RENDER_KEYS = {"line", "template", "template_source", "family", "messages", "tools", "add_generation_prompt",
               "enable_thinking", "chat_template_kwargs", "continue_final_message", "expect"}
RENDER_EXPECT_KEYS = {"exact", "contains", "not_contains", "ends_with", "not_ends_with", "generation_prompt"}


class Checker:
    def __init__(self, templates_dir):
        self.templates_dir = templates_dir
        self.errors = []

    def fail(self, where, what):
        self.errors.append(f"{where}: {what}")

    def utf8(self, where, value):
        """Every string must be valid UTF-8 (a lone surrogate means a literal was ported wrong)."""
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                self.fail(where, f"string is not valid UTF-8: {value!r}")
        elif isinstance(value, list):
            for v in value:
                self.utf8(where, v)
        elif isinstance(value, dict):
            for k, v in value.items():
                self.utf8(where, k)
                self.utf8(where, v)

    def template(self, where, name):
        if not isinstance(name, str) or not name.endswith(".jinja"):
            self.fail(where, f"template {name!r} is not a .jinja file name")
        elif not os.path.isfile(os.path.join(self.templates_dir, name)):
            self.fail(where, f"template {name} not found under $TESSERA_MODELS/templates")

    def json_text(self, where, text, allow_cut=False):
        try:
            json.loads(text)
        except (TypeError, ValueError) as e:
            if not allow_cut:
                self.fail(where, f"arguments are not JSON ({e}): {text!r}")

    def options(self, where, case):
        checks = [("reasoning_format", REASONING_FORMATS), ("tool_choice", TOOL_CHOICES),
                  ("continue_final_message", CONTINUATIONS)]
        for key, allowed in checks:
            if key in case and case[key] not in allowed:
                self.fail(where, f"{key} {case[key]!r} is not one of {sorted(allowed)}")
        for key in ("enable_thinking", "parallel_tool_calls", "add_generation_prompt", "is_partial",
                    "expect_error", "expect_reconstruction"):
            if key in case and not isinstance(case[key], bool):
                self.fail(where, f"{key} must be a boolean")

    def tool_names(self, where, names, tools):
        if not isinstance(names, list) or not names:
            self.fail(where, "tools must be a non-empty list of names (leave it out when there are none)")
            return set()
        for name in names:
            if name not in tools:
                self.fail(where, f"tool {name!r} is not defined in the tools object")
        return {tools[n]["function"]["name"] for n in names if n in tools}

    def messages(self, where, messages):
        if not isinstance(messages, list) or not messages:
            self.fail(where, "messages must be a non-empty list")
            return
        for i, m in enumerate(messages):
            at = f"{where} message {i}"
            if m.get("role") not in ROLES:
                self.fail(at, f"role {m.get('role')!r}")
            if not isinstance(m.get("content"), (str, list)):
                self.fail(at, "content must be a string or a list of parts")
            for call in m.get("tool_calls", []):
                fn = call.get("function", {})
                if call.get("type") != "function" or not isinstance(fn.get("name"), str):
                    self.fail(at, f"tool call {call!r} is not OpenAI-shaped")
                self.json_text(at, fn.get("arguments"))

    def tools_object(self, tools):
        for key, tool in tools.items():
            fn = tool.get("function", {})
            if tool.get("type") != "function" or not isinstance(fn.get("name"), str):
                self.fail(f"tool {key}", "not an OpenAI tool object")
                continue
            if key != fn["name"] and not key.startswith(fn["name"] + "@"):
                self.fail(f"tool {key}", f"key does not name function {fn['name']!r}")
            if not isinstance(fn.get("description"), str) or not isinstance(fn.get("parameters"), dict):
                self.fail(f"tool {key}", "description must be a string and parameters an object")

    def output_case(self, where, case, tools, needs_reason=False):
        for key in ("line", "template", "family", "input", "expect"):
            if key not in case:
                self.fail(where, f"missing {key}")
        for key in case:
            if key not in OUTPUT_KEYS:
                self.fail(where, f"unknown key {key}")
        if "template" in case:
            self.template(where, case["template"])
        if not isinstance(case.get("input"), str):
            self.fail(where, "input must be a string")
        self.options(where, case)
        offered = self.tool_names(where, case["tools"], tools) if "tools" in case else set()
        if "messages" in case:
            self.messages(where, case["messages"])
        expect = case.get("expect", {})
        for key in ("content", "reasoning_content", "tool_calls"):
            if key not in expect:
                self.fail(where, f"expect lacks {key}")
        for call in expect.get("tool_calls", []):
            if set(call) - {"name", "arguments", "id"} or "name" not in call or "arguments" not in call:
                self.fail(where, f"expected tool call {call!r} must have name, arguments and optionally id")
                continue
            if call["name"] not in offered:
                self.fail(where, f"expected tool call {call['name']!r} is not among the case's tools")
            self.json_text(where, call["arguments"], allow_cut=case.get("is_partial", False))
        self.utf8(where, case)

    def render_case(self, where, case, tools):
        for key in ("line", "family", "messages", "expect"):
            if key not in case:
                self.fail(where, f"missing {key}")
        for key in case:
            if key not in RENDER_KEYS:
                self.fail(where, f"unknown key {key}")
        if ("template" in case) == ("template_source" in case):
            self.fail(where, "give exactly one of template and template_source")
        if "template" in case:
            self.template(where, case["template"])
        self.options(where, case)
        if "tools" in case:
            self.tool_names(where, case["tools"], tools)
        self.messages(where, case.get("messages"))
        expect = case.get("expect", {})
        if not expect or set(expect) - RENDER_EXPECT_KEYS:
            self.fail(where, f"expect must use only {sorted(RENDER_EXPECT_KEYS)}")
        for key in ("contains", "not_contains"):
            if key in expect and not (isinstance(expect[key], list) and
                                      all(isinstance(s, str) for s in expect[key])):
                self.fail(where, f"expect.{key} must be a list of strings")
        self.utf8(where, case)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    models = os.environ.get("TESSERA_MODELS")
    if not models:
        sys.exit("set TESSERA_MODELS to the models directory (its templates/ holds the .jinja files)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "crates", "runtime", "tests", "data")
    checker = Checker(os.path.join(models, "templates"))

    output = load(os.path.join(data, "chat_output_cases.json"))
    render = load(os.path.join(data, "chat_render_cases.json"))
    for doc, name in ((output, "chat_output_cases.json"), (render, "chat_render_cases.json")):
        for key in ("source", "defaults", "cases"):
            if key not in doc:
                checker.fail(name, f"missing top-level {key}")
    tools = output.get("tools", {})
    checker.tools_object(tools)

    for i, case in enumerate(output.get("cases", [])):
        checker.output_case(f"output case {i} (line {case.get('line')})", case, tools)
    for i, skip in enumerate(output.get("skipped", [])):
        where = f"skipped {i} (line {skip.get('line')})"
        for key in ("line", "template", "family", "reason"):
            if key not in skip:
                checker.fail(where, f"missing {key}")
        if "template" in skip:
            checker.template(where, skip["template"])
        if "case" in skip:
            checker.output_case(where, skip["case"], tools)
    for i, case in enumerate(render.get("cases", [])):
        checker.render_case(f"render case {i} (line {case.get('line')})", case, tools)

    counts = collections.defaultdict(lambda: [0, 0, 0])
    for case in output.get("cases", []):
        counts[case.get("family")][0] += 1
    for skip in output.get("skipped", []):
        counts[skip.get("family", "?")][1] += 1
    for case in render.get("cases", []):
        counts[case.get("family")][2] += 1
    print(f"{'family':<14}{'output':>8}{'skipped':>9}{'render':>8}")
    for family in sorted(counts, key=str):
        o, s, r = counts[family]
        print(f"{family:<14}{o:>8}{s:>9}{r:>8}")
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    print(f"{'total':<14}{totals[0]:>8}{totals[1]:>9}{totals[2]:>8}")

    for error in checker.errors:
        print(f"error: {error}", file=sys.stderr)
    if checker.errors:
        sys.exit(f"{len(checker.errors)} errors")
    print("ok")


if __name__ == "__main__":
    main()
