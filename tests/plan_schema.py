#!/usr/bin/python3
"""The plan file's JSON Schema (planner/plan.schema.json) applied to plans.

    plan_schema.py PLAN.json...
        validate each plan: exit 0 when all conform, 1 when one does not
        (every problem on stdout: "SCHEMA INVALID PLAN: at /buffers/3/size: ...")
    plan_schema.py --check-plan CHECK_PLAN_PY MODEL PLAN [ARGS...]
        what the tests run instead of check_plan.py (tests/lib.sh
        test_check_plan_py, tests/clirun.c check_plan_py): PLAN against the
        schema, then CHECK_PLAN_PY MODEL PLAN ARGS with its output and exit
        status; silent about the schema when the plan conforms, so check_plan.py's
        output is unchanged
    plan_schema.py --check-plans CHECK_PLAN_PY LIST
        the same for many plans in one process: LIST has one check a line,
        its words separated by tabs: TAG MODEL PLAN [ARGS...].  check_plan.py
        is loaded once and its main() run for each (it keeps no state between
        runs); each check's output is printed under a "== TAG: ok|FAILED
        (exit N)" line; exit 1 when any failed.  Python and onnx start once
        instead of twice per plan: test_train_setups' 60 plans took 74 s of
        CPU as separate runs (with the type checks), 4 s batched
    plan_schema.py --schema FILE ...   another schema file (the default is the
        one beside this script's folder: ../planner/plan.schema.json)

Exit 2 for bad usage, an unreadable file, or a python3 without jsonschema
(Debian: python3-jsonschema); the schema itself is checked against the
draft 2020-12 meta-schema first.
"""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMA = os.path.join(HERE, "..", "planner", "plan.schema.json")
MAX_PROBLEMS = 20


def usage():
    sys.stderr.write(__doc__)
    sys.exit(2)


def load_validator(schema_path):
    try:
        import jsonschema
    except ImportError:
        sys.stderr.write("plan_schema.py: %s cannot import jsonschema (Debian: apt-get install "
                         "python3-jsonschema)\n" % sys.executable)
        sys.exit(2)
    try:
        with open(schema_path) as f:
            schema = json.load(f)
    except (OSError, ValueError) as e:
        sys.stderr.write("plan_schema.py: cannot read the schema %s: %s\n" % (schema_path, e))
        sys.exit(2)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems_of(validator, path):
    """The schema's complaints about the plan file at path, as lines; None when
    the file cannot be read or parsed (said on stderr)."""
    try:
        with open(path, "rb") as f:
            plan = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        sys.stderr.write("plan_schema.py: cannot read %s: %s\n" % (path, e))
        return None
    out = []
    errors = sorted(validator.iter_errors(plan), key=lambda e: list(e.absolute_path))
    for e in errors[:MAX_PROBLEMS]:
        where = "/" + "/".join(str(p) for p in e.absolute_path)
        out.append("SCHEMA INVALID %s: at %s: %s" % (path, where, e.message[:300]))
    if len(errors) > MAX_PROBLEMS:
        out.append("SCHEMA INVALID %s: ... and %d more" % (path, len(errors) - MAX_PROBLEMS))
    return out


def schema_check_plan_in_process(check_plan, validator, model, plan, rest):
    """One check as --check-plan makes it: (exit status, output)."""
    probs = problems_of(validator, plan)
    if probs:
        return 1, "\n".join(probs) + "\n"
    out = io.StringIO()
    rc = 0
    with contextlib.redirect_stdout(out):
        try:
            check_plan.main([check_plan.__file__, model, plan] + rest)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception as e:  # a crash of the checker is a failed check, not the end
            print("check_plan.py raised %s: %s" % (type(e).__name__, e))
            rc = 1
    return rc, out.getvalue()


def schema_check_plans(schema, checker, listing):
    validator = load_validator(schema)
    spec = importlib.util.spec_from_file_location("check_plan", checker)
    check_plan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_plan)
    try:
        with open(listing) as f:
            checks = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    except OSError as e:
        sys.stderr.write("plan_schema.py: cannot read %s: %s\n" % (listing, e))
        return 2
    failed = 0
    for words in checks:
        if len(words) < 3:
            sys.stderr.write("plan_schema.py: %s: want TAG MODEL PLAN [ARGS...]: %r\n" % (listing, words))
            return 2
        tag, model, plan, rest = words[0], words[1], words[2], words[3:]
        rc, out = schema_check_plan_in_process(check_plan, validator, model, plan, rest)
        failed += rc != 0
        print("== %s: %s" % (tag, "ok" if rc == 0 else "FAILED (exit %d)" % rc))
        sys.stdout.write(out)
    print("%d plans checked, %d failed" % (len(checks), failed))
    return 1 if failed else 0


def main(argv):
    schema = DEFAULT_SCHEMA
    if len(argv) >= 2 and argv[0] == "--schema":
        schema, argv = argv[1], argv[2:]
    if argv and argv[0] == "--check-plans":
        if len(argv) != 3:
            usage()
        return schema_check_plans(schema, argv[1], argv[2])
    if argv and argv[0] == "--check-plan":
        if len(argv) < 4:
            usage()
        checker, model, plan, rest = argv[1], argv[2], argv[3], argv[4:]
        v = load_validator(schema)
        probs = problems_of(v, plan)
        if probs is None:
            # unreadable: check_plan.py says so in its own words
            pass
        elif probs:
            print("\n".join(probs))
            return 1
        sys.stdout.flush()
        return subprocess.call([sys.executable, checker, model, plan] + rest)
    if not argv or argv[0].startswith("-"):
        usage()
    v = load_validator(schema)
    rc = 0
    for plan in argv:
        probs = problems_of(v, plan)
        if probs is None:
            rc = max(rc, 2)
        elif probs:
            print("\n".join(probs))
            rc = max(rc, 1)
        else:
            print("SCHEMA OK %s" % plan)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
