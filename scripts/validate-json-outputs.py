#!/usr/bin/env python3
"""Checks the structured-output suite and the answers generated for it.

  validate-json-outputs.py --self-check [--suite SUITE]
      Every schema is a valid draft 2020-12 schema, its valid_example validates and its
      invalid_example does not, with format checking on; every format the suite uses has a checker.
  validate-json-outputs.py validate OUTPUTS.jsonl [--suite SUITE]
      Each line is {"id": <schema id>, "output": <generated text>, ...}; the output must parse as
      JSON (no repeated keys, no NaN or Infinity) and validate against that schema. Prints a summary per kind (and per model when lines
      have "model") and exits 1 listing every failure.

SUITE defaults to crates/runtime/tests/data/structured_suite.json in this repository.
Needs the jsonschema package (4.x).
"""

import argparse
import collections
import datetime
import ipaddress
import json
import re
import sys
from pathlib import Path

import jsonschema

DEFAULT_SUITE = Path(__file__).resolve().parent.parent / "crates/runtime/tests/data/structured_suite.json"

# jsonschema checks some formats only when optional packages are installed (date-time and time
# need rfc3339-validator, hostname needs fqdn, uri needs rfc3987 or rfc3986-validator). Where
# one is missing, the checks below stand in, so an unchecked format never passes silently.

_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])(\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")


def _is_time(text):
    return _TIME.fullmatch(text) is not None


def _is_date_time(text):
    date, sep, time = text.partition("T") if "T" in text else text.partition("t")
    if not sep or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", date):
        return False
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        return False
    return _is_time(time)


def _is_hostname(text):
    # RFC 1123: dot-separated labels of letters, digits and inner hyphens, 63 characters each.
    label = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    return len(text) <= 253 and re.fullmatch(rf"{label}(\.{label})*", text) is not None


def _uri_pattern():
    # RFC 3986 section 3: scheme ":" hier-part [ "?" query ] [ "#" fragment ].
    unreserved_sub_delims = r"A-Za-z0-9\-._~!$&'()*+,;="
    pct = r"%[0-9A-Fa-f]{2}"
    pchar = rf"(?:[{unreserved_sub_delims}:@]|{pct})"
    userinfo = rf"(?:[{unreserved_sub_delims}:]|{pct})*"
    reg_name = rf"(?:[{unreserved_sub_delims}]|{pct})*"  # IPv4 addresses are reg-names too
    host = rf"(?:\[(?P<ip_literal>[^\]]*)\]|{reg_name})"
    authority = rf"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    path_abempty = rf"(?:/{pchar}*)*"
    path_absolute = rf"/(?:{pchar}+(?:/{pchar}*)*)?"
    path_rootless = rf"{pchar}+(?:/{pchar}*)*"
    hier_part = rf"(?://{authority}{path_abempty}|{path_absolute}|{path_rootless}|)"
    query = rf"(?:{pchar}|[/?])*"
    return re.compile(rf"[A-Za-z][A-Za-z0-9+\-.]*:{hier_part}(?:\?{query})?(?:#{query})?")


_URI = _uri_pattern()


def _is_uri(text):
    match = _URI.fullmatch(text)
    if match is None:
        return False
    literal = match.group("ip_literal")
    if literal is None:
        return True
    if re.fullmatch(r"v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+", literal):
        return True  # IPvFuture
    if "%" in literal:
        return False  # a zone id is not part of RFC 3986's IPv6address
    try:
        ipaddress.IPv6Address(literal)
    except ValueError:
        return False
    return True


STAND_INS = {"date-time": _is_date_time, "time": _is_time, "hostname": _is_hostname, "uri": _is_uri}


def format_checker():
    """jsonschema's draft 2020-12 format checker, with this script's checks for the formats
    it cannot check in this installation; and for each format, who checks it."""
    checker = jsonschema.FormatChecker(formats=())
    base = jsonschema.Draft202012Validator.FORMAT_CHECKER
    checker.checkers = dict(base.checkers)
    for name, check in STAND_INS.items():
        if name not in checker.checkers:
            checker.checks(name)(check)
    return checker


def format_sources():
    base = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers
    sources = {name: "jsonschema" for name in base}
    sources["email"] = "jsonschema (loose: it only requires an '@')"
    for name in STAND_INS:
        if name not in base:
            sources[name] = "this script (jsonschema's checker needs a package that is not installed)"
    return sources


def formats_in(value):
    """Every "format" keyword value inside a schema."""
    found = set()
    if isinstance(value, dict):
        if isinstance(value.get("format"), str):
            found.add(value["format"])
        for child in value.values():
            found |= formats_in(child)
    elif isinstance(value, list):
        for child in value:
            found |= formats_in(child)
    return found


def load_suite(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["schemas"]


def validator(schema, checker):
    return jsonschema.Draft202012Validator(schema, format_checker=checker)


def first_error(schema, instance, checker):
    error = next(iter(validator(schema, checker).iter_errors(instance)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"at '{where}': {error.message}" if where else error.message


def self_check(suite_path):
    entries = load_suite(suite_path)
    checker = format_checker()
    sources = format_sources()
    problems = []
    ids = collections.Counter(e.get("id") for e in entries)
    problems += [f"id {i!r} is used {n} times" for i, n in ids.items() if n > 1]
    used_formats = set()
    for e in entries:
        name = e.get("id")
        for field in ("id", "kind", "prompt", "schema", "valid_example", "invalid_example"):
            if field not in e or (field in ("id", "kind", "prompt") and not e[field]):
                problems.append(f"{name}: no {field}")
        if "schema" not in e:
            continue
        try:
            jsonschema.Draft202012Validator.check_schema(e["schema"])
        except jsonschema.SchemaError as err:
            problems.append(f"{name}: not a valid draft 2020-12 schema: {err.message}")
            continue
        used_formats |= formats_in(e["schema"])
        error = first_error(e["schema"], e.get("valid_example"), checker)
        if error:
            problems.append(f"{name}: valid_example does not validate: {error}")
        if first_error(e["schema"], e.get("invalid_example"), checker) is None:
            problems.append(f"{name}: invalid_example validates")
    unchecked = sorted(f for f in used_formats if f not in checker.checkers)
    problems += [f"format {f!r} is used but nothing checks it" for f in unchecked]

    kinds = collections.Counter(e.get("kind") for e in entries)
    print(f"{len(entries)} schemas in {len(kinds)} kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print("formats used, and who checks them:")
    for f in sorted(used_formats):
        print(f"  {f}: {sources.get(f, 'nothing')}")
    return verdict(problems, "problems", "self-check passed")


def verdict(faults, title, success):
    """Prints the faults (the exit status is 1) or the success line (0)."""
    if faults:
        print(f"{len(faults)} {title}:")
        for fault in faults:
            print(f"  {fault}")
        return 1
    print(success)
    return 0


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"duplicate keys {repeated}")
    return dict(pairs)


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def parse_output(text):
    return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)


def validate(outputs_path, suite_path):
    entries = {e["id"]: e for e in load_suite(suite_path)}
    checker = format_checker()
    by_kind = collections.defaultdict(lambda: [0, 0])  # kind -> [passed, total]
    by_model = collections.defaultdict(lambda: [0, 0])
    failures = []
    seen = set()
    with open(outputs_path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                failures.append(f"line {number}: not a JSON line: {err}")
                continue
            entry = entries.get(record.get("id")) if isinstance(record, dict) else None
            if entry is None:
                failures.append(f"line {number}: unknown schema id {record.get('id') if isinstance(record, dict) else record!r}")
                continue
            seen.add(entry["id"])
            output = record.get("output")
            error = None
            if not isinstance(output, str):
                error = "no output text"
            else:
                try:
                    error = first_error(entry["schema"], parse_output(output), checker)
                except ValueError as err:
                    error = f"not JSON: {err}"
            model = record.get("model")
            for tally in [by_kind[entry["kind"]]] + ([by_model[model]] if model is not None else []):
                tally[1] += 1
                tally[0] += error is None
            if error:
                context = ", ".join(f"{k}={v}" for k, v in record.items() if k not in ("id", "output"))
                failures.append(f"line {number}: {entry['id']} ({context}): {error}; output {output!r}")
    total = sum(t[1] for t in by_kind.values())
    print(f"{total} outputs for {len(seen)} of {len(entries)} schemas")
    for title, tallies in (("kind", by_kind), ("model", by_model)):
        for name, (passed, count) in sorted(tallies.items()):
            print(f"  {title} {name}: {passed}/{count} valid")
    if total == 0 and not failures:
        failures.append("no outputs")
    return verdict(failures, "failures", "all outputs valid")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default=str(DEFAULT_SUITE), help="the suite's JSON file")
    parser.add_argument("--self-check", action="store_true", help="check the suite itself")
    parser.add_argument("command", nargs="?", choices=["validate"], help="validate generated outputs")
    parser.add_argument("outputs", nargs="?", help="the JSON Lines file of outputs")
    args = parser.parse_args()
    if args.self_check == (args.command is not None):
        parser.error("give either --self-check or validate OUTPUTS.jsonl")
    if args.self_check:
        return self_check(args.suite)
    if not args.outputs:
        parser.error("validate needs OUTPUTS.jsonl")
    return validate(args.outputs, args.suite)


if __name__ == "__main__":
    sys.exit(main())
