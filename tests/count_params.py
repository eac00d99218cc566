#!/usr/bin/env python3
"""count_params.py: the parameters of every C function definition (issue 32).

usage: count_params.py [--all] [--max-extern N] [--max-static N] PATH...

Each PATH is a C file or a folder (its *.c and *.h files, subfolders too).
Prints "FILE:LINE NAME COUNT" for every function definition over its
limit: 6 parameters for a function with external linkage, 8 for a static
one (--all: every definition, with "static" or "extern" after the count).
A variadic "..." counts as a parameter, "(void)" as none; prototypes are
not counted (their definition is).  The last line, on stderr, says how many
definitions and files were read, so that a count of 0 over the limits is
seen to come from real code.  Exit 0 when no definition is over, 1 when
some is, 2 on bad usage or an unreadable file.

Plain Python 3, no module outside the standard library: a lexer that blanks
comments, string and character literals and preprocessor lines (keeping
every newline, so lines stay right), then the text before each '{' at file
scope is a definition when it ends in NAME(PARAMS).
"""
import os
import re
import sys

KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "_Alignof"}


def blank(src):
    """src with comments, literals and preprocessor lines turned to spaces
    (newlines kept)."""
    out = []
    i, n = 0, len(src)
    line_start = True  # only blanks since the last newline
    while i < n:
        c = src[i]
        if c == "/" and src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        if c == "/" and src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", src[i + 1 : j - 1]) + c)
            i = j
            line_start = False
            continue
        if c == "#" and line_start:
            j = i
            while True:  # to the end of the line, through backslash-newlines
                k = src.find("\n", j)
                if k < 0:
                    j = n
                    break
                if src[k - 1] == "\\":
                    j = k + 1
                    continue
                j = k
                break
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def strip_attributes(head):
    """head without trailing spaces and __attribute__((...)) groups."""
    h = head.rstrip()
    while h.endswith(")"):
        open_at = matching_open(h, len(h) - 1)
        if open_at is None:
            break
        before = h[:open_at].rstrip()
        if not re.search(r"\b__attribute__$", before):
            break
        h = before[: -len("__attribute__")].rstrip()
    return h


def matching_open(text, close_at):
    """Index of the '(' that the ')' at close_at closes, or None."""
    depth = 0
    for k in range(close_at, -1, -1):
        if text[k] == ")":
            depth += 1
        elif text[k] == "(":
            depth -= 1
            if depth == 0:
                return k
    return None


def count_params(params):
    """The number of parameters in the text between a definition's parentheses."""
    p = params.strip()
    if p in ("", "void"):
        return 0
    depth, count = 0, 1
    for c in p:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            count += 1
    return count


def definitions(src):
    """(line, name, count, static) for each function defined at file scope."""
    text = blank(src)
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                d = definition(text, start, i)
                if d:
                    yield d
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif c == ";" and depth == 0:
            start = i + 1


def definition(text, start, brace):
    head = strip_attributes(text[start:brace])
    if not head.endswith(")"):
        return None  # a struct, enum, union or initializer
    open_at = matching_open(head, len(head) - 1)
    if open_at is None:
        return None
    m = re.search(r"([A-Za-z_]\w*)\s*$", head[:open_at])
    if not m or m.group(1) in KEYWORDS:
        return None
    prefix = head[: m.start()]
    # a type before the name, and nothing that makes it an expression
    if not prefix.strip() or "=" in prefix or prefix.rstrip().endswith("("):
        return None
    line = text.count("\n", 0, start + m.start()) + 1
    static = re.search(r"\bstatic\b", prefix) is not None
    return line, m.group(1), count_params(head[open_at + 1 : -1]), static


def c_files(path):
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(root, f)
    else:
        yield path


def main(argv):
    args, show_all, limits = [], False, {"extern": 6, "static": 8}
    it = iter(argv)
    for a in it:
        if a == "--all":
            show_all = True
        elif a in ("--max-extern", "--max-static"):
            v = next(it, None)
            if v is None or not v.isdigit():
                print(f"usage: {a} takes a count", file=sys.stderr)
                return 2
            limits[a[6:]] = int(v)
        elif a.startswith("-"):
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
        else:
            args.append(a)
    if not args:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    n_files = n_defs = n_over = 0
    for path in args:
        if not os.path.exists(path):
            print(f"count_params.py: {path}: no such file or folder", file=sys.stderr)
            return 2
        for f in c_files(path):
            try:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    src = fh.read()
            except OSError as e:
                print(f"count_params.py: {f}: {e.strerror}", file=sys.stderr)
                return 2
            n_files += 1
            for line, name, count, static in definitions(src):
                n_defs += 1
                kind = "static" if static else "extern"
                over = count > limits[kind]
                n_over += over
                if show_all:
                    print(f"{f}:{line} {name} {count} {kind}")
                elif over:
                    print(f"{f}:{line} {name} {count}")
    print(
        f"count_params.py: {n_defs} definitions in {n_files} files, {n_over} over the limits "
        f"({limits['extern']} parameters, {limits['static']} static)",
        file=sys.stderr,
    )
    return 1 if n_over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
