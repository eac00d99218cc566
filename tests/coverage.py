#!/usr/bin/python3
"""Line coverage of roamc's product code, per folder and in total, from gcov.

usage: /usr/bin/python3 tests/coverage.py BUILD_DIR SOURCE_DIR [--floor PERCENT]

BUILD_DIR is a -DROAMC_COVERAGE=ON build after its tests ran (a .gcno per
object, and a .gcda beside it once a test ran it).  gcov (the one of the gcc
that built it) reads every object once, in JSON; an object that no test ran
counts with every line unrun; a line counts as covered when any object ran it
(a header's inline functions are compiled into many objects).  Product code
is every source file under SOURCE_DIR except tests/ (and what the build
generates, e.g. the protobuf-c code).  Prints one row per folder (top level,
and planner/'s and frontend/'s sub-folders) and the total; with --floor, exits 1
when the total is below PERCENT (what .ci/run holds the code to), 2 when
there is nothing to measure.
"""
import gzip
import json
import os
import subprocess
import sys

GCOV_BATCH = 200  # objects per gcov run (the command line stays short)


def cov_note_files(build):
    found = []
    for folder, _, files in os.walk(os.path.abspath(build)):
        found += [os.path.join(folder, f) for f in files if f.endswith(".gcno")]
    return sorted(found)


def cov_gcov_json(note_files, build):
    """Yield gcov's JSON document of each object (gcov -j -t: one per line);
    an object no test ran (a .gcno without its .gcda) counts as never run."""
    for i in range(0, len(note_files), GCOV_BATCH):
        batch = note_files[i:i + GCOV_BATCH]
        out = subprocess.run(["gcov", "--json-format", "--stdout"] + batch, cwd=build,
                             capture_output=True)
        if out.returncode != 0:
            sys.exit("coverage.py: gcov failed: %s" % out.stderr.decode(errors="replace")[-400:])
        data = out.stdout
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        for line in data.splitlines():
            if line.strip():
                yield json.loads(line)


def cov_lines(build, source):
    """{source-relative path: {line: covered}} over every object."""
    src = os.path.realpath(source)
    lines = {}
    for doc in cov_gcov_json(cov_note_files(build), build):
        cwd = doc.get("current_working_directory", build)
        for f in doc["files"]:
            path = os.path.realpath(os.path.join(cwd, f["file"]))
            if not path.startswith(src + os.sep):
                continue  # system headers, generated code in the build
            rel = os.path.relpath(path, src)
            if rel.startswith("tests" + os.sep) or rel.startswith("build"):
                continue
            seen = lines.setdefault(rel, {})
            for ln in f["lines"]:
                n = ln["line_number"]
                seen[n] = seen.get(n, False) or ln["count"] > 0
    return lines


def cov_folder(rel):
    """The row a file counts in: its top folder, and for planner/ and
    frontend/ the sub-folder (planner/api, frontend/infer, ...)."""
    parts = rel.split(os.sep)
    if len(parts) > 2 and parts[0] in ("planner", "frontend"):
        return "/".join(parts[:2])
    return parts[0] if len(parts) > 1 else "."


def cov_report(lines):
    rows = {}
    for rel, seen in lines.items():
        r = rows.setdefault(cov_folder(rel), [0, 0])
        r[0] += sum(seen.values())
        r[1] += len(seen)
    hit = sum(r[0] for r in rows.values())
    total = sum(r[1] for r in rows.values())
    print("%-22s %9s %9s %8s" % ("folder", "lines", "covered", "percent"))
    for name in sorted(rows):
        h, n = rows[name]
        print("%-22s %9d %9d %7.1f%%" % (name, n, h, 100.0 * h / n if n else 0.0))
    pct = 100.0 * hit / total if total else 0.0
    print("%-22s %9d %9d %7.1f%%" % ("total", total, hit, pct))
    return pct, total


def main(argv):
    args = argv[1:]
    floor = None
    if "--floor" in args:
        i = args.index("--floor")
        try:
            floor = float(args[i + 1])
        except (IndexError, ValueError):
            print("coverage.py: --floor takes a percentage", file=sys.stderr)
            return 2
        del args[i:i + 2]
    if len(args) != 2:
        print("usage: %s BUILD_DIR SOURCE_DIR [--floor PERCENT]" % argv[0], file=sys.stderr)
        return 2
    pct, total = cov_report(cov_lines(args[0], args[1]))
    if not total:
        print("coverage.py: no .gcno under %s: not a -DROAMC_COVERAGE=ON build"
              % args[0], file=sys.stderr)
        return 2
    if floor is not None and pct < floor:
        print("FAIL: line coverage %.1f%% is below the floor %.1f%%" % (pct, floor))
        return 1
    if floor is not None:
        print("ok   line coverage %.1f%% >= the floor %.1f%%" % (pct, floor))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
