#!/usr/bin/env python3
"""Ports llama.cpp's tests/test-chat.cpp parser cases into chat_output_cases.json.

The C++ file states its cases as builder chains:

    tst.test("<model output>").tools({ special_function_tool }).reasoning_format(...)
       .expect(message_assist_call).run();

This script tokenizes the C++ (string literals resolved to their exact bytes), evaluates
those chains and the fixtures they name (tools, messages, helper calls such as
simple_assist_msg(...)), and writes the cases as data. It understands only the small
subset of C++ that the chains use; a statement it does not understand inside a ported
family is reported on stderr so that nothing is dropped silently.

Usage: port-chat-cases.py <llama.cpp>/tests/test-chat.cpp <out.json>
(the prompt-rendering cases in chat_render_cases.json are written by hand.)
"""

import json
import re
import sys

# Template files whose cases are ported, with the family name the checker reports.
FAMILIES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "qwen2.5",
    "Qwen-Qwen3-0.6B.jinja": "qwen3",
    "Qwen3-Coder.jinja": "qwen3-coder",
    "Qwen3.5-4B.jinja": "qwen3.5",
    "Qwen-QwQ-32B.jinja": "qwq",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
    "openai-gpt-oss-120b.jinja": "gpt-oss",
    "google-gemma-2-2b-it.jinja": "gemma",
    "google-gemma-4-31B-it.jinja": "gemma",
    "google-gemma-4-31B-it-interleaved.jinja": "gemma",
    "HuggingFaceTB-SmolLM3-3B.jinja": "smollm3",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-r1",
    "llama-cpp-deepseek-r1.jinja": "deepseek-r1",
}

ENUMS = {
    "COMMON_REASONING_FORMAT_NONE": "none",
    "COMMON_REASONING_FORMAT_AUTO": "auto",
    "COMMON_REASONING_FORMAT_DEEPSEEK": "deepseek",
    "COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY": "deepseek-legacy",
    "COMMON_CHAT_TOOL_CHOICE_AUTO": "auto",
    "COMMON_CHAT_TOOL_CHOICE_REQUIRED": "required",
    "COMMON_CHAT_TOOL_CHOICE_NONE": "none",
    "COMMON_CHAT_CONTINUATION_NONE": "none",
    "COMMON_CHAT_CONTINUATION_AUTO": "auto",
    "COMMON_CHAT_CONTINUATION_REASONING": "reasoning",
    "COMMON_CHAT_CONTINUATION_CONTENT": "content",
}

# ---------------------------------------------------------------- tokenizer


class Tok:
    __slots__ = ("kind", "val", "line", "raw")

    def __init__(self, kind, val, line, raw=None):
        self.kind, self.val, self.line, self.raw = kind, val, line, raw

    def __repr__(self):
        return f"{self.kind}:{self.val!r}@{self.line}"


SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"',
                  "'": "'", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def unescape(body, line):
    """Resolves C++ escapes; \\x and octal escapes are bytes, so a UTF-8 sequence may be spelled with them."""
    out, i = bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
            out.append(int(m.group(0), 16))
            i += 2 + len(m.group(0))
        elif e == "u":
            out += chr(int(body[i + 2:i + 6], 16)).encode("utf-8")
            i += 6
        elif e == "U":
            out += chr(int(body[i + 2:i + 10], 16)).encode("utf-8")
            i += 10
        elif e in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(int(m.group(0), 8))
            i += 1 + len(m.group(0))
        elif e in SIMPLE_ESCAPES:
            out += SIMPLE_ESCAPES[e].encode("utf-8")
            i += 2
        else:
            raise ValueError(f"line {line}: unknown escape \\{e}")
    return out.decode("utf-8", errors="surrogateescape")


def tokenize(src):
    toks, i, line, n = [], 0, 1, len(src)
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            i = src.index("\n", i)
        elif src.startswith("/*", i):
            j = src.index("*/", i) + 2
            line += src.count("\n", i, j)
            i = j
        elif re.match(r'(u8|u|U|L)?R"', src[i:i + 4]):
            q = src.index('"', i)
            delim = src[q + 1:src.index("(", q)]
            start = src.index("(", q) + 1
            end = src.index(")" + delim + '"', start)
            toks.append(Tok("str", src[start:end], line, src[i:end + len(delim) + 2]))
            line += src.count("\n", i, end)
            i = end + len(delim) + 2
        elif c == '"' or (re.match(r'(u8|u|U|L)"', src[i:i + 3])):
            q = src.index('"', i)
            j = q + 1
            while src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            toks.append(Tok("str", unescape(src[q + 1:j], line), line, src[i:j + 1]))
            i = j + 1
        elif c == "'":
            j = i + 1
            while src[j] != "'":
                j += 2 if src[j] == "\\" else 1
            toks.append(Tok("char", unescape(src[i + 1:j], line), line))
            i = j + 1
        elif c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", src[i:])
            toks.append(Tok("id", m.group(0), line))
            i += len(m.group(0))
        elif c.isdigit():
            m = re.match(r"[0-9][0-9a-zA-Z_.']*", src[i:])
            toks.append(Tok("num", m.group(0), line))
            i += len(m.group(0))
        else:
            two = src[i:i + 2]
            if two in ("::", "->", "==", "!=", "<=", ">=", "&&", "||", "++", "--", "+=", "<<"):
                toks.append(Tok("op", two, line))
                i += 2
            else:
                toks.append(Tok("op", c, line))
                i += 1
    return toks


# ---------------------------------------------------------------- values


def new_msg(role="assistant", content="", reasoning="", calls=None, tool_name="", tool_call_id=""):
    return {"role": role, "content": content, "content_parts": [], "reasoning_content": reasoning,
            "tool_calls": list(calls or []), "tool_name": tool_name, "tool_call_id": tool_call_id}


def tool_call(name, arguments="", call_id=""):
    return {"name": name, "arguments": arguments, "id": call_id}


def as_str(v):
    # `{}` in a std::string position is the empty string.
    return "" if v == [] else v


def simple_assist_msg(content, reasoning="", name="", arguments="", call_id=""):
    calls = [tool_call(name, arguments, call_id)] if (name or call_id) else []
    return new_msg("assistant", content, reasoning, calls)


HELPERS = {
    "simple_assist_msg": simple_assist_msg,
    "message_with_tool_calls": lambda n, a: simple_assist_msg("", "", n, a),
    "message_with_tool_calls_and_reasoning": lambda n, a, r: simple_assist_msg("", r, n, a),
    "message_with_reasoning_content_and_multiple_tool_calls":
        lambda r, c, calls: new_msg("assistant", c, r, [tool_call(as_str(x[0]), as_str(x[1])) for x in calls]),
    "message_with_content_and_tool_call": lambda c, n, a: simple_assist_msg(c, "", n, a),
    "message_with_reasoning_and_tool_call": lambda r, n, a: simple_assist_msg("", r, n, a),
    "std::string": lambda s="": s,
}


class Unsupported(Exception):
    pass


class Evaluator:
    def __init__(self):
        self.env = {}
        self.tools = {}  # C++ identifier or inline id -> {"name","description","parameters"}

    # expression := term ('+' term)*
    def expr(self, toks, p):
        v, p = self.term(toks, p)
        while p < len(toks) and toks[p].kind == "op" and toks[p].val == "+":
            w, p = self.term(toks, p + 1)
            v = v + w
        return v, p

    def term(self, toks, p):
        t = toks[p]
        if t.kind == "str":
            s = ""
            while p < len(toks) and toks[p].kind == "str":
                s += toks[p].val
                p += 1
            # adjacent literals join as bytes: a UTF-8 sequence may be split across them
            return s.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape"), p
        if t.kind == "num":
            return int(t.val) if t.val.isdigit() else t.val, p + 1
        if t.kind == "op" and t.val == "{":
            return self.brace_list(toks, p)
        if t.kind == "op" and t.val == "(" and toks[p + 1].val in ("size_t", "int"):
            return self.term(toks, p + 3)
        if t.kind == "id":
            if t.val in ("true", "false"):
                return t.val == "true", p + 1
            if t.val in ENUMS:
                return ENUMS[t.val], p + 1
            if p + 1 < len(toks) and toks[p + 1].val == "(":
                args, p = self.args(toks, p + 1)
                if t.val not in HELPERS:
                    raise Unsupported(f"line {t.line}: call of {t.val}")
                return HELPERS[t.val](*args), p
            if t.val in self.tools:
                return ("tool", t.val), p + 1
            if t.val in self.env:
                v = self.env[t.val]
                p += 1
                while p + 1 < len(toks) and toks[p].val == "." and toks[p + 1].kind == "id" and \
                        not (p + 2 < len(toks) and toks[p + 2].val == "("):
                    v = v[toks[p + 1].val]
                    p += 2
                return v, p
            raise Unsupported(f"line {t.line}: unknown name {t.val}")
        raise Unsupported(f"line {t.line}: unexpected {t.val!r}")

    def args(self, toks, p):
        """A call's argument list `( a, b )`, as values."""
        return self.sequence(toks, p, "(", ")")

    def brace_list(self, toks, p):
        """A braced initializer `{ a, b, }`, as a list of values."""
        return self.sequence(toks, p, "{", "}")

    def sequence(self, toks, p, open_, close):
        if toks[p].val != open_:
            raise Unsupported(f"line {toks[p].line}: expected {open_!r}")
        p += 1
        out = []
        while toks[p].val != close:
            v, p = self.expr(toks, p)
            out.append(v)
            if toks[p].val == ",":
                p += 1
        return out, p + 1


def to_msg(v, line):
    if isinstance(v, dict):
        return v
    raise Unsupported(f"line {line}: not a message: {v!r}")


# ---------------------------------------------------------------- statements


def split_statements(toks, p, end):
    """Yields ("for" | "cond", header_tokens) and ("stmt", tokens) in source order; block braces are dropped."""
    while p < end:
        t = toks[p]
        if t.val in ("{", "}", ";"):
            p += 1
            continue
        if t.kind == "id" and t.val in ("for", "if", "while", "switch", "catch"):
            q, depth = p + 1, 0
            while True:
                depth += {"(": 1, ")": -1}.get(toks[q].val, 0)
                q += 1
                if depth == 0:
                    break
            yield ("for" if t.val == "for" else "cond", toks[p + 2:q - 1])
            p = q
            continue
        if t.kind == "id" and t.val in ("else", "try", "do"):
            p += 1
            continue
        q, depth = p, 0
        while True:
            v = toks[q].val if toks[q].kind == "op" else None
            if v in ("(", "{", "["):
                depth += 1
            elif v in (")", "}", "]"):
                depth -= 1
            elif v == ";" and depth == 0:
                break
            q += 1
        yield ("stmt", toks[p:q])
        p = q + 1


def find(toks, kind, val, start=0):
    for i in range(start, len(toks)):
        if toks[i].kind == kind and toks[i].val == val:
            return i
    raise ValueError(f"{val} not found")


def function_body(toks, name):
    i = find(toks, "id", name)
    while toks[i].val != "{":
        i += 1
    depth, j = 0, i
    while True:
        depth += {"{": 1, "}": -1}.get(toks[j].val if toks[j].kind == "op" else "", 0)
        if depth == 0:
            return i + 1, j
        j += 1


def load_fixtures(ev, toks):
    """Reads the file-scope tools and messages that the cases name."""
    stop = find(toks, "id", "peg_test_case")
    i = 0
    while i < stop:
        t, nxt = toks[i], toks[i + 1]
        if t.val in ("common_chat_tool", "common_chat_msg") and nxt.kind == "id" and toks[i + 2].val in ("{", "=") \
                and toks[i - 1].val in ("const", "static"):
            if toks[i + 2].val == "{":
                vals, j = ev.brace_list(toks, i + 2)
            else:
                vals, j = ev.expr(toks, i + 3)
            if t.val == "common_chat_tool":
                name, desc, params = vals
                ev.tools[nxt.val] = {"name": name, "description": desc, "parameters": params}
            elif isinstance(vals, list):
                role, content, parts, calls, reasoning, tool_name, call_id = vals
                msg = new_msg(role, content, reasoning, [tool_call(*c) for c in calls], tool_name, call_id)
                msg["content_parts"] = [{"type": a, "text": b} for a, b in parts]
                ev.env[nxt.val] = msg
            else:
                ev.env[nxt.val] = vals
            i = j
        i += 1


# ---------------------------------------------------------------- cases

MSG_FIELDS = {"role", "content", "reasoning_content", "tool_name", "tool_call_id"}


class Porter:
    def __init__(self, ev):
        self.ev = ev
        self.testers = {}  # variable -> [template file]
        self.loops = {}  # loop variable -> [string]
        self.cases, self.skipped, self.unhandled = [], [], []
        self.current = []  # templates of the tester defined last

    def in_family(self):
        return any(t in FAMILIES for t in self.current)

    def statement(self, kind, toks):
        ev = self.ev
        if kind == "for":
            # for (const auto & path : { "a", "b" })
            if len(toks) > 5 and toks[2].val == "&" and toks[4].val == ":" and toks[5].val == "{":
                vals, _ = ev.brace_list(toks, 5)
                if all(isinstance(v, str) for v in vals):
                    self.loops[toks[3].val] = vals
                    return
            if self.in_family():
                self.unhandled.append((toks[0].line, "for header"))
            return
        if kind == "cond":
            if self.in_family():
                self.unhandled.append((toks[0].line if toks else 0, "condition"))
            return
        vals = [t.val for t in toks]
        if len(toks) > 4 and vals[0] == "auto" and vals[2] == "=" and vals[3] == "peg_tester":
            arg = toks[5]
            paths = [arg.val] if arg.kind == "str" else self.loops[arg.val]
            self.current = [p.rsplit("/", 1)[1] for p in paths]
            self.testers[vals[1]] = self.current
            return
        if len(toks) > 3 and toks[0].kind == "id" and vals[0] in self.testers and vals[1:3] == [".", "test"]:
            self.chain(toks)
            return
        try:
            if self.declaration(toks, vals):
                return
        except Unsupported as e:
            if self.in_family():
                self.unhandled.append((toks[0].line, str(e)))
            return
        if self.in_family():
            self.unhandled.append((toks[0].line, " ".join(vals[:12])))

    def declaration(self, toks, vals):
        ev = self.ev
        types = ("common_chat_msg", "std::string", "auto", "common_chat_tool")
        p = 1 if vals[0] in ("const", "static") else 0
        if vals[p] in types or (vals[p] == "char" and vals[p + 1] == "*"):
            p += 2 if vals[p] == "char" else 1
            name = vals[p]
            if len(vals) == p + 1:
                ev.env[name] = new_msg(role="")
                return True
            if vals[p + 1] == "=":
                v, q = ev.expr(toks, p + 2)
                if q != len(toks):
                    raise Unsupported(f"line {toks[0].line}: trailing tokens in declaration")
                ev.env[name] = v
                return True
            return False
        # NAME.field = value;  NAME.tool_calls.push_back(...)
        if len(vals) > 3 and vals[0] in ev.env and vals[1] == "." and isinstance(ev.env[vals[0]], dict):
            msg = ev.env[vals[0]]
            if vals[3] == "=" and vals[2] in MSG_FIELDS:
                msg[vals[2]], _ = ev.expr(toks, 4)
                return True
            if vals[3] == "=" and vals[2] == "content_parts":
                parts, _ = ev.expr(toks, 4)
                msg["content_parts"] = [{"type": a, "text": b} for a, b in parts]
                return True
            if vals[3] == "=" and vals[2] == "tool_calls":
                calls, _ = ev.expr(toks, 4)
                msg["tool_calls"] = [tool_call(*[as_str(x) for x in c]) for c in calls]
                return True
        return False

    def tool_list(self, vals, line):
        out = []
        for v in vals:
            if isinstance(v, tuple) and v[0] == "tool":
                out.append(v[1])
            elif isinstance(v, list) and len(v) == 3:
                ident = f"{v[0]}@{line}"
                self.ev.tools[ident] = {"name": v[0], "description": v[1], "parameters": v[2]}
                out.append(ident)
            else:
                raise Unsupported(f"line {line}: tool {v!r}")
        return out

    def chain(self, toks):
        ev = self.ev
        line = toks[0].line
        templates = self.testers[toks[0].val]
        tc = {"input": None, "tools": [], "messages": None, "opts": {}, "is_partial": False,
              "expect_reconstruction": False, "expect": new_msg(role="")}
        p = 1
        try:
            while p < len(toks):
                if toks[p].val != "." or toks[p + 1].kind != "id":
                    raise Unsupported(f"line {toks[p].line}: unexpected {toks[p].val!r} in chain")
                method = toks[p + 1].val
                args, p = ev.args(toks, p + 2)
                self.apply(tc, method, args, line)
        except Unsupported as e:
            if any(t in FAMILIES for t in templates):
                self.unhandled.append((line, str(e)))
            return
        for tmpl in templates:
            if tmpl in FAMILIES:
                self.emit(tmpl, line, tc)

    def apply(self, tc, method, args, line):
        arg = args[0] if args else None
        if method == "test":
            tc["input"] = arg
        elif method == "run":
            pass
        elif method == "tools":
            tc["tools"] = self.tool_list(arg, line)
        elif method == "messages":
            tc["messages"] = [to_msg(m, line) for m in arg]
        elif method in ("reasoning_format", "enable_thinking", "parallel_tool_calls", "tool_choice",
                        "add_generation_prompt", "continue_final_message"):
            tc["opts"][method] = arg
        elif method == "json_schema":
            tc["opts"]["json_schema"] = json.loads(arg)
        elif method == "is_partial":
            tc["is_partial"] = arg
        elif method == "expect_reconstruction":
            tc["expect_reconstruction"] = True if arg is None else arg
        elif method == "expect":
            tc["expect"] = json.loads(json.dumps(to_msg(arg, line)))
        elif method == "expect_content":
            tc["expect"]["content"] = arg
        elif method == "expect_reasoning":
            tc["expect"]["reasoning_content"] = arg
        elif method == "expect_tool_calls":
            tc["expect"]["tool_calls"] = [tool_call(*[as_str(x) for x in c]) for c in arg]
        else:
            raise Unsupported(f"line {line}: method {method}")


DEFAULTS = {
    "reasoning_format": "none",
    "enable_thinking": True,
    "parallel_tool_calls": False,
    "tool_choice": "auto",
    "add_generation_prompt": True,
    "continue_final_message": "none",
}


# What a case means when it leaves a field out (common_chat_templates_inputs in common/chat.h and the
# test builder in test-chat.cpp), and how test-chat.cpp compares a parse with "expect".
DEFAULTS_DOC = {
    **DEFAULTS,
    "messages": [{"role": "user", "content": "Hey there!"}],
    "tools": [],
    "is_partial": False,
    "server_reasoning_format": "deepseek",
    "notes": {
        "server_reasoning_format": "common_params (llama-server's CLI) defaults reasoning_format to deepseek; "
                                   "the chat inputs these tests use default to none",
        "reasoning_format": "none: reasoning stays in content, tags included; auto and deepseek: reasoning is "
                            "extracted into reasoning_content (the cases do not tell auto and deepseek apart)",
        "parsed_text": "llama.cpp parses generation_prompt + input, where generation_prompt is the rendered "
                       "prompt (messages, tools, options of the case, add_generation_prompt=true) less its longest "
                       "common prefix with the same render with add_generation_prompt=false. A template that "
                       "opens <think> in its generation prompt therefore starts the parse inside reasoning.",
        "compare_text": "content and reasoning_content are compared after trimming ASCII whitespace "
                        "(C isspace) at both ends",
        "compare_tool_calls": "same count and order; name and id exactly (id empty when not given); arguments "
                              "compared as JSON re-serialized compactly with key order kept (order matters); "
                              "arguments that do not parse as JSON compare as the empty string",
        "streaming": "every case is also parsed prefix by prefix (each UTF-8-safe byte prefix, as partial "
                     "except the full input unless is_partial): the message deltas between successive "
                     "prefixes, accumulated, must equal each prefix's parse (modulo the trimming above), and "
                     "the accumulation at the end must equal expect",
        "is_partial": "the input is a cut-off generation: only the streamed accumulation is compared with "
                      "expect, never a final (non-partial) parse",
        "expect_reconstruction": "flag: rendering messages + [expect, with the arguments the parser returned] "
                                 "with add_generation_prompt=false must give the prompt of the case "
                                 "(add_generation_prompt=true) followed by input, exactly or as a proper prefix",
        "grammar": "llama.cpp also checks that input matches the tool-call / response-format grammar it "
                   "builds (from its trigger on); those checks are not ported",
    },
}


def msg_json(m):
    """A message as llama.cpp hands it to the template (common_chat_msg::to_json_oaicompat)."""
    out = {"role": m["role"]}
    if m["content_parts"]:
        out["content"] = m["content_parts"]
    else:
        out["content"] = m["content"]
    if m["reasoning_content"]:
        out["reasoning_content"] = m["reasoning_content"]
    if m["tool_name"]:
        out["name"] = m["tool_name"]
    if m["tool_call_id"]:
        out["tool_call_id"] = m["tool_call_id"]
    if m["tool_calls"]:
        calls = []
        for c in m["tool_calls"]:
            call = {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            if c["id"]:
                call["id"] = c["id"]
            calls.append(call)
        out["tool_calls"] = calls
    return out


def expect_json(m):
    calls = []
    for c in m["tool_calls"]:
        call = {"name": c["name"], "arguments": c["arguments"]}
        if c["id"]:
            call["id"] = c["id"]
        calls.append(call)
    return {"content": m["content"], "reasoning_content": m["reasoning_content"], "tool_calls": calls}


# Assertions elsewhere in test-chat.cpp on the ported families' templates, or next to their cases,
# that are not parser or prompt checks.
NOT_PORTED = [
    {"line": 5969, "template": "fireworks-ai-llama-3-firefunction-v2.jinja", "family": "llama3",
     "reason": "FireFunction v2 (Llama 3 based) has its own ' functools[...]' tool-call format, not one of "
               "the ported families; 3 cases left out"},
    {"line": 6103, "template": "MiMo-VL.jinja", "family": "qwen2.5",
     "reason": "MiMo-VL runs the same 3 cases as Hermes 3 and Qwen 2.5 in one loop; it is another family"},
    {"line": 7429, "template": "Qwen-Qwen3-0.6B.jinja", "family": "qwen3",
     "reason": "the only Qwen3 uses: llama-server's per-request reasoning_budget_tokens and "
               "reasoning_budget_message (lines 7429, 7460); no parse or prompt assertion"},
    {"line": 7503, "template": "meta-llama-Llama-3.1-8B-Instruct.jinja", "family": "llama3",
     "reason": "capability check: supports_reasoning_effort is false for Llama 3.1 and Qwen3-0.6B (7504), "
               "true for gpt-oss (7500); not a parse or prompt assertion"},
]


# Statements inside the ported blocks that are not builder chains: the Gemma 4 prompt checks
# (written by hand into chat_render_cases.json) and the StepFun trimming checks (another family).
HAND_PORTED = range(3199, 3292)


def porter_emit(self, tmpl, line, tc):
    case = {"line": line, "template": tmpl, "family": FAMILIES[tmpl], "input": tc["input"]}
    if tc["tools"]:
        case["tools"] = list(tc["tools"])
    if tc["messages"] is not None:
        case["messages"] = [msg_json(m) for m in tc["messages"]]
    for key, default in DEFAULTS.items():
        if key in tc["opts"] and tc["opts"][key] != default:
            case[key] = tc["opts"][key]
    if "json_schema" in tc["opts"]:
        case["options"] = {"json_schema": tc["opts"]["json_schema"]}
    if tc["is_partial"]:
        case["is_partial"] = True
    case["expect"] = expect_json(tc["expect"])
    if tc["expect_reconstruction"]:
        case["expect_reconstruction"] = True
    if case.get("continue_final_message", "none") != "none":
        reason = ("continuation of a prefilled assistant message (continue_final_message="
                  f"{case['continue_final_message']}): the output is parsed after a prompt that ends inside "
                  "the last assistant message, which needs llama.cpp's continuation rendering")
        self.skipped.append({"line": line, "template": tmpl, "family": case["family"], "reason": reason,
                             "case": case})
        return
    self.cases.append(case)


Porter.emit = porter_emit


def main():
    src_path, out_path = sys.argv[1], sys.argv[2]
    toks = tokenize(open(src_path, encoding="utf-8").read())
    ev = Evaluator()
    load_fixtures(ev, toks)
    porter = Porter(ev)
    start, end = function_body(toks, "test_template_output_peg_parsers")
    for kind, stmt in split_statements(toks, start, end):
        porter.statement(kind, stmt)
    for line, what in porter.unhandled:
        if line not in HAND_PORTED:
            print(f"unhandled at line {line}: {what}", file=sys.stderr)
    used = sorted({t for c in porter.cases + [s["case"] for s in porter.skipped] for t in c.get("tools", [])})
    names = {}
    for ident in used:
        names[ident] = ev.tools[ident]["name"] if "@" not in ident else ident
    assert len(set(names.values())) == len(names), "two tools share a name"
    tools = {}
    for ident in used:
        t = ev.tools[ident]
        tools[names[ident]] = {"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": json.loads(t["parameters"])}}
    for c in porter.cases + [s["case"] for s in porter.skipped]:
        if "tools" in c:
            c["tools"] = [names[i] for i in c["tools"]]
    out = {"source": "llama.cpp tests/test-chat.cpp (llama-cpp-python 0.3.36 sdist)",
           "defaults": DEFAULTS_DOC, "tools": tools, "cases": porter.cases,
           "skipped": porter.skipped + NOT_PORTED}
    json.dump(out, open(out_path, "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    print(f"{len(porter.cases)} cases, {len(porter.skipped)} skipped", file=sys.stderr)


if __name__ == "__main__":
    main()
