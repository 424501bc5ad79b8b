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


def code_depths(text):
    """Each line's brace depth at its end, comments, strings and char literals left out."""
    depths, depth, i, n = [], 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            depths.append(depth)
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            depths.extend([depth] * text.count("\n", i, n if j < 0 else j))
            i = n if j < 0 else j + 2
            continue
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = len(re.match(r'r(#*)"', text[i:]).group(1))
            close = '"' + "#" * hashes
            j = text.find(close, i + 2 + hashes)
            depths.extend([depth] * text.count("\n", i, n if j < 0 else j))
            i = n if j < 0 else j + len(close)
            continue
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            depths.extend([depth] * text.count("\n", i, j))
            i = j + 1
            continue
        elif c == "'":
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", text[i:i + 12])
            if m:
                i += len(m.group(0))
                continue
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    depths.append(depth)
    return depths


def functions(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    depths = code_depths(text)
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        # The reason, if any: a `// long:` line in the comment block above the fn and its
        # doc comment and attributes.
        j = i - 1
        while j >= 0 and lines[j].strip().startswith(("#[", "///")):
            j -= 1
        reason = False
        while j >= 0 and lines[j].strip().startswith("//") and not reason:
            reason = lines[j].strip().startswith("// long:")
            j -= 1
        before = depths[i - 1] if i else 0
        if line.rstrip().endswith(";"):
            continue  # a trait method without a body
        # The body ends where the depth comes back down after it went up (or on the line
        # that opens and closes it).
        k, opened = i, False
        while k < len(lines):
            opened = opened or depths[k] > before
            if depths[k] <= before and (opened or "{" in lines[k]):
                break
            k += 1
        yield m.group(6), i + 1, k - i + 1, reason


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
