#!/usr/bin/env python3
"""Lists the Rust functions under crates/ longer than a limit (default 80 lines), longest first.

A function with a comment block starting `// long:` just above it (above its doc comment and
attributes) states why it stays long; it is listed as such and not counted as unexplained.
Usage: scripts/fn-lengths.py [LIMIT] [--src]   (--src: library and binary code only, no tests)
"""
import pathlib
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def functions(path):
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        # The reason, if any: the nearest comment line above the fn and its attributes.
        j = i - 1
        while j >= 0 and lines[j].strip().startswith(("#[", "///")):
            j -= 1
        reason = False
        while j >= 0 and lines[j].strip().startswith("//") and not reason:
            reason = lines[j].strip().startswith("// long:")
            j -= 1
        depth, started, k = 0, False, i
        while k < len(lines):
            code = re.sub(r'"([^"\\]|\\.)*"', '""', lines[k].split("//")[0])
            code = re.sub(r"'([^'\\]|\\.)'", "''", code)
            depth += code.count("{") - code.count("}")
            started = started or "{" in code
            if (started and depth <= 0) or (not started and code.rstrip().endswith(";")):
                break
            k += 1
        yield m.group(6), i + 1, k - i + 1, reason
        i += 1


def main():
    limit = int(next((a for a in sys.argv[1:] if a.isdigit()), 80))
    src_only = "--src" in sys.argv
    rows = []
    for path in sorted(pathlib.Path("crates").rglob("*.rs")):
        if "target" in path.parts:
            continue
        if src_only and ("tests" in path.parts or path.name == "tests.rs"):
            continue
        for name, line, length, reason in functions(path):
            if length > limit:
                rows.append((length, f"{path}:{line}", name, reason))
    rows.sort(reverse=True)
    for length, where, name, reason in rows:
        print(f"{length:5} {where} {name}{'  (long: reason given)' if reason else ''}")
    unexplained = sum(1 for r in rows if not r[3])
    print(f"# {len(rows)} functions over {limit} lines, {unexplained} without a stated reason")


main()
