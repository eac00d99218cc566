#!/usr/bin/python3
"""Nothing but the interpreter's own packages decides what the tests' Python imports.

usage: /usr/bin/python3 tests/check_python_env.py SOURCE_DIR BUILD_DIR
(ctest test_python_env; exit 0 pass, 1 fail, 77 skip without ctest's JSON listing)

A helper that test_train_setups wrote into its work folder once shadowed
the standard library's module types, whose name it had: Python puts the folder of the
script it runs (or the current one, for -c and -) first on sys.path, so
`import onnx` found the helper and died of a circular import.  Three checks:

  1. every test in BUILD_DIR runs with PYTHONSAFEPATH=1 (python3 -P: neither
     folder enters sys.path), PYTHONNOUSERSITE=1 (no ~/.local packages),
     PYTHONPATH set by the test itself or emptied, and PYTHONUNBUFFERED=1 (a
     test killed at its TIMEOUT shows how far its Python steps got), as
     tests/CMakeLists.txt gives them all; read from `ctest --show-only=json-v1`;
  2. this script, run by ctest, sees those settings in force;
  3. no Python file the tests and models keep or write is named like a module
     of the standard library or of this interpreter's packages: every *.py
     outside a package under tests/, models/ and .ci/, and every NAME.py
     written in their text (what a test writes into its work folder).  A
     folder that enters sys.path on purpose (models/, export.py --module's)
     cannot shadow then either.
"""
import json
import os
import pkgutil
import re
import subprocess
import sys

WANT = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", "PYTHONUNBUFFERED": "1"}
SCANNED = ("tests", "models", ".ci")
PY_NAME = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.py\b")


def pyenv_tests_env(build):
    """{test name: {VAR: value}} of every test ctest lists in BUILD."""
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        print("SKIP: ctest --show-only=json-v1 failed: %s" % out.stderr.strip()[-200:])
        sys.exit(77)
    envs = {}
    for test in json.loads(out.stdout)["tests"]:
        env = {}
        for prop in test.get("properties", []):
            if prop["name"] == "ENVIRONMENT":
                env.update(kv.partition("=")[::2] for kv in prop["value"])
        envs[test["name"]] = env
    return envs


def pyenv_check_tests(build):
    bad = []
    envs = pyenv_tests_env(build)
    for name, env in sorted(envs.items()):
        missing = [k for k, v in WANT.items() if env.get(k) != v]
        if "PYTHONPATH" not in env:
            missing.append("PYTHONPATH")
        if missing:
            bad.append("test %s runs without %s" % (name, ", ".join(missing)))
    return bad, len(envs)


def pyenv_check_self():
    bad = []
    if not sys.flags.safe_path:
        bad.append("this script runs without PYTHONSAFEPATH: its folder %s is on sys.path" % sys.path[0])
    if not sys.flags.no_user_site:
        bad.append("this script runs with the user's site-packages")
    if os.environ.get("PYTHONPATH"):
        bad.append("this script runs with PYTHONPATH=%s" % os.environ["PYTHONPATH"])
    return bad


def pyenv_module_names(source):
    """The standard library's module names and the top-level ones this
    interpreter finds outside the source tree."""
    mine = [os.path.realpath(d) for d in (source, os.path.dirname(os.path.abspath(__file__)))]
    path = [p for p in sys.path if p and not any(os.path.realpath(p).startswith(d) for d in mine)]
    return set(sys.stdlib_module_names) | {m.name for m in pkgutil.iter_modules(path)}


def pyenv_files(source):
    for top in SCANNED:
        for folder, dirs, files in os.walk(os.path.join(source, top)):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "node_modules")]
            for f in files:
                yield folder, f


def pyenv_check_names(source):
    modules = pyenv_module_names(source)
    bad = []
    for folder, f in pyenv_files(source):
        path = os.path.join(folder, f)
        rel = os.path.relpath(path, source)
        package = os.path.exists(os.path.join(folder, "__init__.py"))
        if f.endswith(".py") and not package and f[:-3] in modules:
            bad.append("%s is named like the module '%s'" % (rel, f[:-3]))
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except (UnicodeDecodeError, OSError):
            continue  # models, fuzz inputs: no text to write a script from
        for m in PY_NAME.finditer(text):
            stem = m.group(1)
            if stem in modules and not stem.startswith("__"):
                line = text.count("\n", 0, m.start()) + 1
                bad.append("%s:%d names a file %s.py, like the module '%s'" % (rel, line, stem, stem))
    return bad


def main(argv):
    if len(argv) != 3:
        print("usage: %s SOURCE_DIR BUILD_DIR" % argv[0], file=sys.stderr)
        return 2
    source, build = argv[1], argv[2]
    bad, n = pyenv_check_tests(build)
    bad += pyenv_check_self()
    bad += pyenv_check_names(source)
    for b in bad:
        print("FAIL: %s" % b)
    if bad:
        return 1
    print("ok   %d tests run Python with %s and their own PYTHONPATH; no script named like a module"
          % (n, ", ".join("%s=%s" % kv for kv in WANT.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
