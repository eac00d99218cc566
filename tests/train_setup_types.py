#!/usr/bin/python3
"""The element-type and structure checks of the steps emitted by roamc --train
--precision PRECISION --grad-accum K (tests/test_train_setups.sh).

usage: /usr/bin/python3 tests/train_setup_types.py STEP.onnx PRECISION K [STEP PRECISION K]...
For each step (one process for them all: onnx is imported once, not 60 times)
prints "STEP: types ok: N half ops", or "FAIL: STEP: " and its first
problems; exits 1 when any step fails.

A committed file, not one the test writes into its work folder: the helper
once written there was named after the standard library's module types,
which it shadowed (the script's folder comes first on sys.path), and
`import onnx` died of a circular import.
"""
import sys

import onnx

F32, F16, BF16, I32 = 1, 10, 16, 6


def types_problems(path, prec, k):
    """(the step's problems, its number of half-precision matrix ops)"""
    m = onnx.load(path)
    g = m.graph
    ty = {v.name: v.type.tensor_type.elem_type for v in list(g.input) + list(g.output) + list(g.value_info)}
    ty.update({t.name: t.data_type for t in g.initializer})
    meta = {p.key: p.value for p in m.metadata_props}
    half = {"bf16": BF16, "fp16": F16, "amp-bf16": BF16, "amp-fp16": F16}.get(prec, F32)
    bad = []
    def want(names, t, what):
        for n in names:
            if n and ty.get(n) != t:
                bad.append("%s '%s' is type %s, not %s" % (what, n, ty.get(n), t))
    params = meta["roamc.parameters"].split(",")
    grads = [x for x in meta["roamc.gradients"].split(",") if x]
    state = [x for x in meta["roamc.optimizer_state"].split(",") if x]
    amp = prec.startswith("amp")
    want(params, F32 if amp else half, "parameter")
    want(grads, F32 if amp else half, "gradient")
    want([s for s in state if not s.endswith((".step", "growth_tracker", "scaler.scale"))],
         F32 if amp else half, "optimizer state")
    want([s for s in state if s.endswith(".step")], F32, "step")
    if prec == "amp-fp16":
        want(["scaler.scale"], F32, "loss scale")
        want(["scaler.growth_tracker"], I32, "growth tracker")
        for op in ("_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_"):
            if not any(n.op_type == op for n in g.node):
                bad.append("no %s node" % op)
    lowp = 0
    for n in g.node:
        if n.op_type in ("MatMul", "Gemm", "Conv") and prec != "fp32":
            for x in n.input:
                if x and ty.get(x) in (F32, F16, BF16) and ty.get(x) != half:
                    bad.append("%s reads '%s' of type %s, not %s" % (n.op_type, x, ty.get(x), half))
            lowp += 1
    if amp:
        # one half copy per weight per microbatch: no weight is cast twice in one microbatch
        casts = {}
        for n in g.node:
            if n.op_type == "Cast" and n.input[0] in params:
                key = (n.name.split(".")[0] if n.name.startswith("mb") else "", n.input[0])
                casts[key] = casts.get(key, 0) + 1
        bad += ["'%s' cast %d times in one microbatch" % (w, c) for (_, w), c in casts.items() if c > 1]
    if prec != "fp32" and meta.get("roamc.precision") != prec:
        bad.append("roamc.precision is %r" % meta.get("roamc.precision"))
    if k > 1:
        if meta.get("roamc.grad_accum") != str(k):
            bad.append("roamc.grad_accum is %r, not %d" % (meta.get("roamc.grad_accum"), k))
        data = meta["roamc.data_inputs"].split(",")
        for j in range(k):
            if not any(d.startswith("mb%d." % j) for d in data):
                bad.append("no data input of microbatch %d in %s" % (j, data))
        # every gradient of a later microbatch is added in place into .grad: K - 1 add_ each
        ends = grads  # amp-fp16: what the unscale reads (the optimizer reads its outputs)
        for n in g.node:
            if n.op_type == "_amp_foreach_non_finite_check_and_unscale_":
                ends = list(n.input)[:-2]
        added = {n.output[0] for n in g.node if n.op_type == "add_"}
        adds = sum(1 for x in ends if x in added)
        if adds != len(ends) or not ends:
            bad.append("%d of %d gradients end in an add_" % (adds, len(ends)))
    elif "roamc.grad_accum" in meta:
        bad.append("roamc.grad_accum set without --grad-accum")
    return bad, lowp


def main(argv):
    if len(argv) < 4 or (len(argv) - 1) % 3:
        print(__doc__, file=sys.stderr)
        return 2
    failed = 0
    for i in range(1, len(argv), 3):
        path, prec, k = argv[i], argv[i + 1], int(argv[i + 2])
        bad, lowp = types_problems(path, prec, k)
        if bad:
            print("FAIL: %s: %s" % (path, "; ".join(bad[:8])))
            failed += 1
        else:
            print("%s: types ok: %d half ops" % (path, lowp))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
