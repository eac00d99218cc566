#!/usr/bin/python3
"""Program-order theoretical peak of a roamc training-graph ONNX file.

usage: models/peak.py MODEL.onnx [MODEL.onnx ...] [--align N] [--json]
                      [--plan PLAN.json] [--keep-grads]

Implements the definitions of shared/DESIGN.md ("Meanings") independently of
roamc, for cross-checking:

  - tensor size = product of dims x element size, rounded up to --align
    (default 512); a storage (alias group, joined through the `alias`
    attributes, or the checker's name rules where a node has none) is as large
    as its largest tensor;
  - the schedule is the node order in the file (program order);
  - a storage lives from the step of the first operator producing any of its
    tensors (0 for graph inputs and initializers) to the last step reading or
    writing any of them; a tensor nothing reads lives only at its producer's
    step; storages holding a graph output, parameters, optimizer state or
    buffers (metadata roamc.parameters / roamc.optimizer_state /
    roamc.buffers) live to the end;
  - theoretical peak = max over steps of the sum of live storage sizes.

--keep-grads also keeps every gradient (metadata roamc.gradients) to the end
of the step, as eager PyTorch does while .grad holds it (for models/fidelity.py).

--plan writes a roam-plan v1 file for the program order with a trivial layout
(every storage at its own offset), so that shared/tools/check_plan.py can
check the lifetimes and the peak this script computes.
"""
import json
import sys

import onnx
from onnx import TensorProto

DTYPE_BYTES = {
    TensorProto.FLOAT: 4, TensorProto.UINT8: 1, TensorProto.INT8: 1,
    TensorProto.UINT16: 2, TensorProto.INT16: 2, TensorProto.INT32: 4,
    TensorProto.INT64: 8, TensorProto.BOOL: 1, TensorProto.FLOAT16: 2,
    TensorProto.DOUBLE: 8, TensorProto.UINT32: 4, TensorProto.UINT64: 8,
    TensorProto.COMPLEX64: 8, TensorProto.COMPLEX128: 16, TensorProto.BFLOAT16: 2,
}
STD_VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
ATEN_VIEW_OPS = {"view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose",
                 "permute", "expand", "detach", "alias", "squeeze", "unsqueeze", "slice",
                 "select", "as_strided", "split", "split_with_sizes", "unbind", "narrow",
                 "diagonal", "unfold", "view_as", "expand_as", "numpy_T", "chunk",
                 "tensor_split", "movedim", "flatten", "unflatten"}


def node_alias(node):
    """{output index: (input index, writes)} -- the same rules as tools/check_plan.py."""
    attrs = {a.name: a for a in node.attribute}
    if "alias" in attrs:
        inplace = attrs["inplace"].i if "inplace" in attrs else 0
        return {k: (j, bool(inplace)) for k, j in enumerate(attrs["alias"].ints) if j >= 0}
    if node.domain in ("", "ai.onnx") and node.op_type in STD_VIEW_OPS:
        return {0: (0, False)}
    if node.domain == "org.pytorch.aten":
        base = node.op_type.split(".")[0]
        if base in ATEN_VIEW_OPS:
            return {k: (0, False) for k in range(len(node.output))}
        if base.endswith("_") and not base.startswith("_"):
            return {0: (0, True)}
    return {}


def nbytes(vi):
    tt = vi.type.tensor_type
    if tt.elem_type not in DTYPE_BYTES or not tt.HasField("shape"):
        raise ValueError("value %r has no static shape/known type" % vi.name)
    n = 1
    for d in tt.shape.dim:
        if not d.HasField("dim_value"):
            raise ValueError("value %r has a symbolic dimension" % vi.name)
        n *= d.dim_value
    return n * DTYPE_BYTES[tt.elem_type]


def round_up(n, align):
    return (n + align - 1) // align * align if align > 1 else n


def analyse(path, align=512, keep_grads=False):
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    meta = {p.key: p.value for p in m.metadata_props}
    size = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        size[vi.name] = nbytes(vi)
    for init in g.initializer:
        n = 1
        for d in init.dims:
            n *= d
        size[init.name] = n * DTYPE_BYTES[init.data_type]
    nodes = list(g.node)
    steps = len(nodes)

    parent = {}

    def find(a):
        root = a
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(a, a) != root:
            parent[a], a = root, parent[a]
        return root
    for nd in nodes:
        for k, (j, _) in node_alias(nd).items():
            if k < len(nd.output) and j < len(nd.input) and nd.output[k] and nd.input[j]:
                parent[find(nd.output[k])] = find(nd.input[j])

    start, end, ssize, members = {}, {}, {}, {}
    inputs = [x.name for x in g.input] + [x.name for x in g.initializer]
    for name in inputs:
        r = find(name)
        start[r] = 0
        end.setdefault(r, 0)
    for s, nd in enumerate(nodes):
        for t in nd.output:
            if t:
                r = find(t)
                start[r] = min(start.get(r, s), s)
                end[r] = max(end.get(r, s), s)
        for t in nd.input:
            if t:
                r = find(t)
                end[r] = max(end.get(r, s), s)
    for t in size:
        r = find(t)
        if r in start:
            ssize[r] = max(ssize.get(r, 0), round_up(size[t], align))
            members.setdefault(r, []).append(t)

    def names(key):
        return [x for x in meta.get(key, "").split(",") if x]
    params, state = names("roamc.parameters"), names("roamc.optimizer_state")
    buffers, data = names("roamc.buffers"), names("roamc.data_inputs")
    persistent_roots = {find(x) for x in params + state + buffers}
    for o in g.output:
        persistent_roots.add(find(o.name))
    for r in persistent_roots:
        if r in start:
            end[r] = steps - 1
    if keep_grads:
        # PyTorch keeps .grad until the next zero_grad: gradients live to the end of the step
        for x in names("roamc.gradients"):
            if find(x) in start:
                end[find(x)] = steps - 1
    # inputs the step does not write (never outputs) but that are params/state stay too
    delta = [0] * (steps + 1)
    pdelta = [0] * (steps + 1)
    for r in start:
        sz = ssize.get(r, 0)
        delta[start[r]] += sz
        delta[end[r] + 1] -= sz
        if r not in persistent_roots:
            pdelta[start[r]] += sz
            pdelta[end[r] + 1] -= sz
    live = plive = peak = peak_step = peak_np = 0
    for s in range(steps):
        live += delta[s]
        plive += pdelta[s]
        if live > peak:
            peak, peak_step = live, s
        peak_np = max(peak_np, plive)

    def total(xs):
        return sum(size[x] for x in xs)  # exact bytes (the peak uses rounded sizes)
    res = dict(model=path, operators=steps, tensors=len(size), storages=len(start),
               params_bytes=total(params), state_bytes=total(state), buffer_bytes=total(buffers),
               data_bytes=total(data), persistent_bytes=sum(ssize.get(r, 0) for r in persistent_roots
                                                            if r in start),
               theoretical_peak=peak, peak_step=peak_step,
               peak_op=nodes[peak_step].op_type if nodes else None,
               peak_without_persistent=peak_np, align=align)
    res["_plan"] = (start, end, ssize, members, steps)
    return res


def write_plan(res, path):
    start, end, ssize, members, steps = res["_plan"]
    buffers, off = [], 0
    for i, r in enumerate(sorted(start, key=lambda r: (start[r], r))):
        buffers.append(dict(id=i, tensors=sorted(members.get(r, [r])), size=ssize.get(r, 0),
                            offset=off, start=start[r], end=end[r]))
        off += ssize.get(r, 0)
    plan = {"format": "roam-plan", "version": 1, "model": res["model"], "align": res["align"],
            "schedule": list(range(steps)), "buffers": buffers,
            "peak": {"theoretical": res["theoretical_peak"], "actual": off},
            "note": "program order, trivial layout (models/peak.py)"}
    with open(path, "w") as f:
        json.dump(plan, f)


def mb(x):
    return "%.2f MB" % (x / 1e6)


def main(argv):
    align, as_json, plan, files, keep_grads = 512, False, None, [], False
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--align":
            align, i = int(argv[i + 1]), i + 2
            continue
        if a == "--plan":
            plan, i = argv[i + 1], i + 2
            continue
        if a == "--json":
            as_json = True
        elif a == "--keep-grads":
            keep_grads = True
        elif a.startswith("-"):
            print(__doc__)
            return 2
        else:
            files.append(a)
        i += 1
    if not files:
        print(__doc__)
        return 2
    if plan and len(files) != 1:
        print("--plan needs exactly one model")
        return 2
    out = []
    for f in files:
        r = analyse(f, align, keep_grads)
        if plan:
            write_plan(r, plan)
        del r["_plan"]
        out.append(r)
        if not as_json:
            print("%s: %d operators, %d tensors, %d storages; params %s, optimizer state %s; "
                  "program-order theoretical peak %d B (%s) at step %d (%s), %s without "
                  "persistent storages" % (f, r["operators"], r["tensors"], r["storages"],
                                           mb(r["params_bytes"]), mb(r["state_bytes"]),
                                           r["theoretical_peak"], mb(r["theoretical_peak"]),
                                           r["peak_step"], r["peak_op"],
                                           mb(r["peak_without_persistent"])))
    if as_json:
        print(json.dumps(out if len(out) > 1 else out[0], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
