#!/bin/sh
# The hand-built shape-inference cases of tests/shape_cases (one script per
# rule family of frontend/infer/infer_*.c): each builds small ONNX models for
# every operator in its opset forms, runs `roamc shapes`, and compares each
# value's type and shape with the expectation, which was checked against
# ONNX Runtime where ORT runs the model (rerun a script by hand with its ORT
# flag to check again: math_cases.py by default, nn_cases.py/shape_cases.py/
# contrib_cases.py --oracle, control_cases.py --ort).  Malformed and hostile nodes must fail cleanly.
#
# usage: test_shape_cases.sh ROAMC        (exit 77 = skipped)
set -u
. "$(dirname "$0")/lib.sh"
test_usage 1 1 "ROAMC" "$@"
roamc=$1
here=$(dirname "$0")
/usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null ||
    skip "needs /usr/bin/python3 with python3-onnx (Debian) to build the models"
for family in math nn shape control contrib; do
    case $family in math) extra=--no-ort ;; *) extra= ;; esac
    /usr/bin/python3 "$here/shape_cases/${family}_cases.py" "$roamc" $extra > "$family.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        pass "$family: $(tail -n 1 "$family.log")"
    else
        fail "$family: $(tail -n 1 "$family.log")"
        grep -A3 FAIL "$family.log" | head -n 40
    fi
done
test_finish test_shape_cases
