#!/usr/bin/python3
"""Run a roamc plan on real tensors in one arena and compare it bit for bit
with the same step run eagerly in program order.

usage: models/run_plan.py MODEL.onnx PLAN.json [PLAN.json ...] [--device cpu|cuda]
                          [--steps N] [--seed N] [--trust-plan] [--quiet]
                          [--reference ORIGINAL.onnx] [--interleavings N]

MODEL.onnx is a training step written by models/export.py (every node an ATen
operator of the domain org.pytorch.aten, its overload and its non-tensor
arguments recorded as attributes in schema order); PLAN.json a roam-plan v1
(or v2, below) file for it (`roamc MODEL.onnx -o PLAN.json`); several plans of one model
share one reference run.

MODEL may also be a step `roamc --train --emit-train` derived from a forward
file (torch.onnx.export's, say), or a --fit step of one.  Its forward nodes
are ONNX operators, run as the ATen calls PyTorch makes for them (ONNX_OPS);
its derived ATen nodes record no overloads or non-tensor arguments, which the
runner rebuilds from the step (DERIVED_OPS: the forward node a saved tensor
comes from, value_info's shapes, the optimizer state's roles; the optimizer's
scalars are torch.optim's defaults); its initializers (running statistics,
constants) hold their data.  The parameters come from the initializers of
the file it was derived from (metadata roamc.derived_from, from the current
folder or the step's), by name; where that file or a parameter is missing,
from seeded random data.  An operator outside those tables is refused by
name (exit 2).

Two runs of the step, from the same random parameters, optimizer state and
data (fixed by --seed):

  reference  every node in the file's order (what PyTorch ran), each output
             an ordinary allocation, freed after its last reader;
  plan       one byte arena of exactly the plan's `peak.actual` bytes; the
             nodes in the plan's `schedule`; every tensor at its buffer's
             `offset`.  An output that is not a view is computed and copied
             into its slot (with the strides the operator gave it when they
             fit, else contiguous); views and in-place writes land in the
             arena by themselves, and the runner checks that they do.

Random operators (dropout, bernoulli_, ...) are seeded per node (seed + node
index) in both runs, so their masks do not depend on the order.  Memory that
an `empty*` operator returns is filled with 0xFF bytes in both runs, and so
is the whole arena at the start and every buffer's slot after its last step
(float NaN), so a read of memory the plan does not hold the right bytes in
shows in the result.

Guards (off with --trust-plan, which leaves the verdict to the comparison
alone): before each node, every tensor it reads lies inside its buffer's slot
and the buffer is live at that step; every output lies in its slot, in a
buffer live at that step; a buffer that starts overlaps no live buffer; the
buffers fit in the arena.  A guard that fires stops the run: exit 1.

The runs match when the loss, every graph output, and every parameter,
optimizer-state tensor and module buffer after the step are equal bit for bit.

Changed steps (DESIGN.md, "A step that fits"): MODEL may hold recompute nodes
(copies of forward nodes with new output names and a STRING attribute
roamc_recompute naming the forward output they recompute) and ai.roamc
Offload(x) -> x_host / Reload(x_host) -> y nodes.  --reference ORIGINAL.onnx
makes the reference run the unchanged step (what PyTorch ran: same inputs,
outputs, loss and state names) while the plan runs MODEL, so a match proves
the change computes the same as the original.  In the plan run an Offload
copies x into host memory outside the arena (one tensor per entry of the
plan's `host_buffers`, pinned under --device cuda), a Reload copies it back
into y's arena slot; host memory is poisoned when its host buffer ends.  A
random node of MODEL is seeded by the reference node that made the same
output; a recompute copy by the reference node that made the value its
roamc_recompute names, so a correct recompute of a dropout draws the
forward's mask again, and a copy without the attribute (or naming another
value) draws a new one, which the comparison shows.  Always rejected (exit
1, with or without --trust-plan): a node other than a Reload reading a host
value, a Reload of a device value, a host graph output.  Guards: a host
value in `buffers` or a device value in `host_buffers`, a host value used
outside its host buffer's lifetime, a read of an offloaded value after its
device buffer ended (the message says to read the Reload), and, as for any
value, a Reload run before its Offload or after its reader.  Without
--reference a changed step is its own reference (run in file order, the
copies made the same way).

--steps N (default 1) runs N training steps in both: each step starts from
the parameters, optimizer state and module buffers the step before left
(the same data batch; random operators seeded per step and node), and the
runs are compared after every step.  The arena is made once and reused, as a
runtime would: every step first fills it with 0xFF bytes, then copies the
carried state into its slots, so nothing but the state survives a step.

Several streams (DESIGN.md, "Several streams"): a roam-plan v2 file
(`stream` per step, `waits`) runs under --interleavings N (default 50)
interleavings of its streams that the waits allow, each a fresh step in the
same arena compared bit for bit as above: the schedule's own order first,
then seeded random choices of which stream moves next, each node a start
event (inputs read, outputs scribbled) and a finish event (outputs written)
with other streams' events between them, freed buffers poisoned, a write
under a node still reading a torn read; models/run_streams.py says how.  A
plan fails when any interleaving fails (the count is printed).

Exit status: 0 every plan run matches the reference; 1 one does not (a
guard fired, or values differ: the first differences are listed); 2 bad input (an
unreadable or foreign model or plan, a plan made for another model, an
operator the runner cannot replay).

--device cuda runs both on the GPU (the arena one torch.cuda byte tensor)
and prints torch.cuda.max_memory_allocated/max_memory_reserved of each run
(per step; with --steps N >= 2 also the largest over steps 2..N, after the
warm-up step).  The carried state is copied through host memory, so it does
not count in the device figures.
It has NOT been run on a GPU yet (no GPU was lent when it was written):
treat its numbers as untested until someone runs it on one.
"""
import argparse
import hashlib
import json
import os
import sys
import time

EXIT_MATCH, EXIT_MISMATCH, EXIT_BAD = 0, 1, 2
ATEN = "org.pytorch.aten"
ROAMC = "ai.roamc"  # Offload/Reload of a changed step (DESIGN.md, "A step that fits")
# a sharded or pipelined rank's step (planner/shard/shard.h, pipeline.h): Depend runs
# here (views of its inputs, a token for an output that aliases none); the others are
# handed to whoever drives the run (models/run_ranks.py computes them across the ranks)
COMM_OPS = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Send", "Recv", "Depend"}
RECOMPUTE_ATTR = "roamc_recompute"
POISON = 0xFF
# operators that draw random numbers: seeded per node
RANDOM_OPS = {"native_dropout", "dropout", "bernoulli", "bernoulli_", "rand", "rand_like", "randn",
              "randn_like", "randint", "randint_like", "normal", "normal_", "uniform_", "randperm",
              "multinomial", "exponential_", "geometric_", "cauchy_", "log_normal_", "random_",
              "rrelu_with_noise", "fused_dropout", "_fused_dropout"}
# operators whose output memory is uninitialised: filled with POISON in both runs
EMPTY_OPS = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided"}


class BadInput(Exception):
    pass


class PlanViolation(Exception):
    pass


class StepViolation(Exception):
    """A changed step that breaks DESIGN.md's rules for Offload/Reload: it is
    wrong whatever the plan (exit 1, with or without --trust-plan)."""
    pass


try:
    import onnx
    import onnx.numpy_helper
    import torch
except ImportError as e:  # pragma: no cover
    sys.stderr.write("run_plan.py: cannot import torch/onnx (%s); use Debian's /usr/bin/python3\n" % e)
    sys.exit(EXIT_BAD)

# models/ on purpose (ctest runs Python with PYTHONSAFEPATH, so a script's
# folder is not on sys.path by itself), as the other scripts here do
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_streams as RS  # noqa: E402  (version 2 plans: streams run under many interleavings)

DTYPES = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32,
          7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16,
          14: torch.complex64, 15: torch.complex128}


# --------------------------------------------------------------------------- the graph

class Graph:
    """The exporter's graph: nodes with their ATen overloads and decoded calls."""

    def __init__(self, path):
        try:
            with open(path, "rb") as f:
                self.bytes = f.read()
            self.model = onnx.load_from_string(self.bytes)
        except Exception as e:
            raise BadInput("%s: not a readable ONNX model (%s)" % (path, e))
        self.path = path
        g = self.model.graph
        self.nodes = list(g.node)
        self.meta = {p.key: p.value for p in self.model.metadata_props}
        self.info = {}
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            tt = vi.type.tensor_type
            if tt.elem_type not in DTYPES or any(not d.HasField("dim_value") for d in tt.shape.dim):
                raise BadInput("%s: value '%s' has no static shape or a type the runner does not know"
                               % (path, vi.name))
            self.info[vi.name] = (DTYPES[tt.elem_type], tuple(d.dim_value for d in tt.shape.dim))
        # a step `roamc --train` derived keeps the file's non-parameter initializers (running
        # statistics, shape constants) with their data: values at step 0, as graph inputs are
        self.initial = {}
        for t in g.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL or t.data_type not in DTYPES:
                raise BadInput("%s: initializer '%s' holds no data here (external data) or has a type "
                               "the runner does not know" % (path, t.name))
            self.initial[t.name] = torch.from_numpy(onnx.numpy_helper.to_array(t).copy()).to(DTYPES[t.data_type])
            self.info[t.name] = (DTYPES[t.data_type], tuple(t.dims))
        self.inputs = [vi.name for vi in g.input] + [t for t in self.initial if t not in
                                                     {vi.name for vi in g.input}]
        self.outputs = [vi.name for vi in g.output]
        self.loss = self.meta.get("roamc.loss")
        if self.loss is None:
            raise BadInput("%s: no roamc.loss metadata: not a graph written by models/export.py" % path)
        self.producer = {}
        for i, n in enumerate(self.nodes):
            for o in n.output:
                if o:
                    self.producer[o] = i
        # a step roamc --train derived: its ATen nodes record no arguments (DerivedCall)
        self.derived = self.meta.get("roamc.exporter", "").startswith("roamc --train")
        self.params = set(x for x in self.meta.get("roamc.parameters", "").split(",") if x)
        self.state = set(x for x in self.meta.get("roamc.optimizer_state", "").split(",") if x)
        self.calls = []
        for i, n in enumerate(self.nodes):
            self.calls.append(self._resolve(i, n))
        # values in host memory: what an Offload makes
        self.host = {c.node.output[0] for c in self.calls if c.op == "Offload"}
        self.changed = bool(self.host) or any(c.recompute is not None or c.op == "Reload" for c in self.calls)
        # collectives and point-to-point nodes: only models/run_ranks.py can run this step
        self.comm = [c for c in self.calls if isinstance(c, CommCall) and c.op != "Depend"]

    def _resolve(self, i, n):
        where = "%s: node %d (%s)" % (self.path, i, n.op_type)
        if n.domain == ROAMC and n.op_type in COMM_OPS:
            return CommCall(n, where)
        if n.domain == ROAMC:
            if n.op_type not in ("Offload", "Reload"):
                raise BadInput("%s: the runner replays ai.roamc Offload, Reload and (models/run_ranks.py, "
                               "every rank in one process) %s, not %s"
                               % (where, ", ".join(sorted(COMM_OPS)), n.op_type))
            if len([x for x in n.input if x]) != 1 or len([x for x in n.output if x]) != 1:
                raise BadInput("%s: %s takes one input and makes one output" % (where, n.op_type))
            if n.input[0] in self.info and n.output[0] in self.info and \
                    self.info[n.input[0]] != self.info[n.output[0]]:
                raise BadInput("%s: '%s' and '%s' differ in type or shape" % (where, n.input[0], n.output[0]))
            return CopyCall(n, where)
        if n.domain in ("", "ai.onnx"):
            return OnnxCall(n, where, self.info)
        if n.domain != ATEN:
            raise BadInput("%s: domain '%s'; the runner replays org.pytorch.aten nodes (models/export.py) "
                           "and the ONNX operators of a step roamc --train derived (ONNX_OPS)"
                           % (where, n.domain))
        attrs = {a.name: a for a in n.attribute}
        if self.derived and "overload" not in attrs:
            return DerivedCall(n, where, self)
        overload = attrs["overload"].s.decode() if "overload" in attrs else "default"
        try:
            fn = getattr(getattr(torch.ops.aten, n.op_type), overload or "default")
        except (AttributeError, RuntimeError):
            raise BadInput("%s: no ATen operator %s.%s in this torch %s"
                           % (where, n.op_type, overload, torch.__version__))
        alias = list(attrs["alias"].ints) if "alias" in attrs else [-1] * len(n.output)
        return Call(fn, n, attrs, alias, where)


def _attr_value(a, arg):
    """The Python value of attribute a for schema argument arg."""
    ty = str(arg.type)
    t = a.type
    if t == onnx.AttributeProto.INT:
        return bool(a.i) if ty.startswith("bool") else a.i
    if t == onnx.AttributeProto.FLOAT:
        return a.f
    if t == onnx.AttributeProto.STRING:
        s = a.s.decode()
        if ty not in ("str", "Optional[str]"):
            # dtypes, memory formats and layouts are written by name ("float32"); the
            # schema prints ScalarType as int, so the name decides
            v = getattr(torch, s, None)
            if isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
                return v
            if s in ("inf", "-inf", "nan"):
                return float(s)  # infinite and NaN floats are written as strings
        return s
    if t == onnx.AttributeProto.INTS:
        return [bool(x) for x in a.ints] if ty.startswith("bool") else list(a.ints)
    if t == onnx.AttributeProto.FLOATS:
        return list(a.floats)
    raise BadInput("attribute '%s' of type %d" % (a.name, t))


def _tensor_type(arg):
    return "Tensor" in str(arg.type)


def _list_type(arg):
    return str(arg.type).endswith("[]") or "List[" in str(arg.type)


class Call:
    """One node as an ATen call: which inputs feed which argument."""

    def __init__(self, fn, node, attrs, alias, where):
        self.fn, self.node, self.alias, self.where = fn, node, alias, where
        self.op = node.op_type
        self.inplace = attrs["inplace"].i if "inplace" in attrs else 0
        # a recompute copy: the forward output it recomputes (DESIGN.md, "A step that fits")
        self.recompute = attrs[RECOMPUTE_ATTR].s.decode() if RECOMPUTE_ATTR in attrs else None
        self.random = self.op in RANDOM_OPS
        self.empty = self.op in EMPTY_OPS
        schema = fn._schema
        self.schema = schema
        inputs = list(node.input)
        args = schema.arguments

        def attr_of(name):
            return attrs.get(("arg_" + name) if name in ("alias", "inplace", "overload") else name)

        # tensor arguments given as inputs (a Python number given for a Tensor is an attribute)
        fed = [a for a in args if _tensor_type(a) and attr_of(a.name) is None]
        singles = [a for a in fed if not _list_type(a)]
        lists = [a for a in fed if _list_type(a)]
        if len(lists) > 1:
            raise BadInput("%s: more than one tensor-list argument" % where)
        n_list = len(inputs) - len(singles) if lists else 0
        if n_list < 0:
            n_list = 0
        self.plan = []  # per argument: ("in", [input positions] or pos) | ("const", value)
        pos = 0
        for a in args:
            at = attr_of(a.name)
            if _tensor_type(a) and at is None:
                if _list_type(a):
                    self.plan.append((a, "list", list(range(pos, pos + n_list))))
                    pos += n_list
                else:
                    self.plan.append((a, "in", pos))
                    pos += 1
            elif at is not None:
                self.plan.append((a, "const", _attr_value(at, a)))
            elif a.has_default_value():
                self.plan.append((a, "const", a.default_value))
            else:
                self.plan.append((a, "const", None))
        if pos < len(inputs):
            raise BadInput("%s: %d inputs, the schema %s takes %d" % (where, len(inputs), schema, pos))
        self.inputs = inputs

    def arguments(self, value_of, device):
        pos, kw = [], {}
        for a, kind, v in self.plan:
            if kind == "in":
                x = value_of(self.inputs[v]) if v < len(self.inputs) and self.inputs[v] else None
            elif kind == "list":
                x = [value_of(self.inputs[k]) if self.inputs[k] else None for k in v]
            else:
                x = v
                if a.name == "device" and x is None and device.type != "cpu":
                    x = device  # factory ops: the run's device
            if a.kwarg_only:
                kw[a.name] = x
            else:
                pos.append(x)
        return pos, kw

    def flat_outputs(self, out, value_of):
        """The node's outputs in recorded order: returned tensors, then arguments
        written in place but not returned (recorded with alias to their input)."""
        rets = self.schema.returns
        flat = []
        if rets:
            vals = out if len(rets) > 1 else (out,)
            for r, v in zip(rets, vals):
                if isinstance(v, (list, tuple)):
                    flat.extend(v)
                elif isinstance(v, torch.Tensor):
                    flat.append(v)
                elif v is None and "Tensor" in str(r.type):
                    flat.append(None)
        n = len(self.node.output)
        for k in range(len(flat), n):
            j = self.alias[k] if k < len(self.alias) else -1
            if j < 0:
                raise BadInput("%s: output %d is neither returned nor an input written in place"
                               % (self.where, k))
            flat.append(value_of(self.inputs[j]))
        if len(flat) != n:
            raise BadInput("%s: the operator gives %d outputs, the node has %d" % (self.where, len(flat), n))
        return flat


def _ints(attrs, name, default):
    return list(attrs[name].ints) if name in attrs else default


def _pads(attrs, n, where):
    """ONNX pads [begin..., end...] as PyTorch's symmetric padding."""
    if attrs.get("auto_pad") is not None and attrs["auto_pad"].s not in (b"", b"NOTSET"):
        raise BadInput("%s: auto_pad %s (the runner takes explicit pads)" % (where, attrs["auto_pad"].s.decode()))
    pads = _ints(attrs, "pads", [0] * (2 * n))
    if pads[:n] != pads[n:]:
        raise BadInput("%s: asymmetric pads %s" % (where, pads))
    return pads[:n]


def _onnx_conv(x, w, b=None, *, a, where):
    n = w.dim() - 2
    return [torch.ops.aten.convolution(x, w, b, _ints(a, "strides", [1] * n), _pads(a, n, where),
                                       _ints(a, "dilations", [1] * n), False, [0] * n,
                                       a["group"].i if "group" in a else 1)]


def _onnx_batch_norm(x, scale, bias, mean, var, *, a, where):
    """Training mode (roamc --train sets it): the running statistics updated in place, as
    native_batch_norm does (outputs 1 and 2 alias inputs 3 and 4); PyTorch's momentum is
    1 - ONNX's.  The derived backward reads them as stand-ins of save_mean/save_invstd
    (frontend/train/TRAIN.md), so the runner gives it exactly those tensors."""
    eps = a["epsilon"].f if "epsilon" in a else 1e-5
    momentum = a["momentum"].f if "momentum" in a else 0.9
    train = bool(a["training_mode"].i) if "training_mode" in a else False
    y = torch.ops.aten.native_batch_norm(x, scale, bias, mean, var, train, 1.0 - momentum, eps)[0]
    return [y, mean, var] if train else [y]


def _onnx_max_pool(x, *, a, where):
    n = x.dim() - 2
    k = _ints(a, "kernel_shape", None)
    fn = {1: torch.ops.aten.max_pool1d_with_indices, 2: torch.ops.aten.max_pool2d_with_indices,
          3: torch.ops.aten.max_pool3d_with_indices}[n]
    y, idx = fn(x, k, _ints(a, "strides", [1] * n), _pads(a, n, where), _ints(a, "dilations", [1] * n),
                bool(a["ceil_mode"].i) if "ceil_mode" in a else False)
    return [y, idx]  # PyTorch's indices: what the derived max_pool*_with_indices_backward reads


def _onnx_avg_pool(x, *, a, where):
    n = x.dim() - 2
    fn = {1: torch.ops.aten.avg_pool1d, 2: torch.ops.aten.avg_pool2d, 3: torch.ops.aten.avg_pool3d}[n]
    return [fn(x, _ints(a, "kernel_shape", None), _ints(a, "strides", [1] * n), _pads(a, n, where),
               bool(a["ceil_mode"].i) if "ceil_mode" in a else False,
               bool(a["count_include_pad"].i) if "count_include_pad" in a else False)]


def _onnx_gemm(A, B, C=None, *, a, where):
    if "transA" in a and a["transA"].i:
        A = A.t()
    if "transB" in a and a["transB"].i:
        B = B.t()
    alpha = a["alpha"].f if "alpha" in a else 1.0
    beta = a["beta"].f if "beta" in a else 1.0
    if C is None:
        return [torch.ops.aten.mm(A, B) if alpha == 1.0 else torch.ops.aten.mm(A, B) * alpha]
    return [torch.ops.aten.addmm(C, A, B, beta=beta, alpha=alpha)]


def _onnx_flatten(x, *, a, where):
    axis = a["axis"].i if "axis" in a else 1
    axis += x.dim() if axis < 0 else 0
    lead = 1
    for d in x.shape[:axis]:
        lead *= d
    return [torch.ops.aten.reshape(x, [lead, -1])]


def _onnx_reshape(x, shape, *, a, where):
    dims = [int(d) for d in shape.tolist()]
    dims = [x.shape[i] if d == 0 and not (a.get("allowzero") and a["allowzero"].i) else d
            for i, d in enumerate(dims)]
    return [torch.ops.aten.reshape(x, dims)]


def _onnx_dropout(x, ratio=None, training=None, *, a, where):
    p = float(ratio) if ratio is not None else (a["ratio"].f if "ratio" in a else 0.5)
    if training is not None and not bool(training):
        return [x.clone(), torch.ones_like(x, dtype=torch.bool)]
    y, mask = torch.ops.aten.native_dropout(x, p, True)
    return [y, mask]


def _onnx_softmax(x, *, a, where):
    return [torch.ops.aten._softmax(x, a["axis"].i if "axis" in a else -1, False)]


def _onnx_transpose(x, *, a, where):
    return [torch.ops.aten.permute(x, _ints(a, "perm", list(range(x.dim() - 1, -1, -1))))]


def _onnx_concat(*xs, a, where):
    return [torch.ops.aten.cat(list(xs), a["axis"].i)]


def _onnx_constant(*, a, where):
    if "value" not in a:
        raise BadInput("%s: a Constant without a tensor 'value'" % where)
    return [torch.from_numpy(onnx.numpy_helper.to_array(a["value"].t).copy())]


def _clip_bounds(a, lo, hi):
    lo = float(lo) if lo is not None else (a["min"].f if "min" in a else float("-inf"))
    hi = float(hi) if hi is not None else (a["max"].f if "max" in a else float("inf"))
    return lo, hi


def _onnx_clip(x, lo=None, hi=None, *, a, where):
    return [torch.ops.aten.hardtanh(x, *_clip_bounds(a, lo, hi))]  # ReLU6 is hardtanh(x, 0, 6)


def _unary(fn):
    return lambda x, *, a, where: [fn(x)]


def _binary(fn):
    return lambda x, y, *, a, where: [fn(x, y)]


# The ONNX operators of a step `roamc --train` derives from a torch.onnx export (its forward
# nodes stay the file's own; everything it adds is ATen): each as the ATen call PyTorch makes
# for the module that exported it, so that the derived backward, an ATen graph, reads what it
# would read in PyTorch.  An operator outside this table is refused by name (exit 2).
ONNX_OPS = {
    "Conv": _onnx_conv, "BatchNormalization": _onnx_batch_norm, "MaxPool": _onnx_max_pool,
    "AveragePool": _onnx_avg_pool, "Gemm": _onnx_gemm, "Flatten": _onnx_flatten,
    "Reshape": _onnx_reshape, "Dropout": _onnx_dropout, "Softmax": _onnx_softmax,
    "Transpose": _onnx_transpose, "Concat": _onnx_concat, "Constant": _onnx_constant,
    "Clip": _onnx_clip,
    "GlobalAveragePool": lambda x, *, a, where: [torch.ops.aten.mean(x, list(range(2, x.dim())), True)],
    "Relu": _unary(torch.ops.aten.relu), "Sigmoid": _unary(torch.ops.aten.sigmoid),
    "Tanh": _unary(torch.ops.aten.tanh), "Identity": _unary(torch.ops.aten.clone),
    "Erf": _unary(torch.ops.aten.erf), "Sqrt": _unary(torch.ops.aten.sqrt),
    "Add": _binary(torch.ops.aten.add), "Sub": _binary(torch.ops.aten.sub),
    "Mul": _binary(torch.ops.aten.mul), "Div": _binary(torch.ops.aten.div),
    "MatMul": _binary(torch.ops.aten.matmul), "Pow": _binary(torch.ops.aten.pow),
}


class OnnxCall:
    """A forward node of a step `roamc --train` derived (ONNX domain), run as ONNX_OPS says.
    Its attributes alias/inplace (a training BatchNormalization's running statistics) and
    roamc_recompute (a --fit copy) mean what they mean on an ATen node."""

    def __init__(self, node, where, info):
        self.node, self.where, self.op = node, where, node.op_type
        if self.op not in ONNX_OPS:
            raise BadInput("%s: the runner replays %s of the ONNX operators, not %s"
                           % (where, ", ".join(sorted(ONNX_OPS)), self.op))
        self.attrs = {a.name: a for a in node.attribute}
        self.inputs = list(node.input)
        self.alias = list(self.attrs["alias"].ints) if "alias" in self.attrs else [-1] * len(node.output)
        self.inplace = self.attrs["inplace"].i if "inplace" in self.attrs else 0
        self.recompute = self.attrs[RECOMPUTE_ATTR].s.decode() if RECOMPUTE_ATTR in self.attrs else None
        self.random = self.op == "Dropout"
        self.empty = False
        self.info = info
        impl = ONNX_OPS[self.op]
        # a Constant is made on the host: moved to the run's device (the others are there)
        self.fn = lambda *xs, device=None: [t.to(device) if t is not None and device is not None else t
                                            for t in impl(*xs, a=self.attrs, where=where)]

    def arguments(self, value_of, device):
        return [value_of(x) if x else None for x in self.inputs], {"device": device}

    def flat_outputs(self, out, value_of):
        n = len(self.node.output)
        if len(out) < n:
            raise BadInput("%s: the operator gives %d outputs, the node has %d" % (self.where, len(out), n))
        flat = []
        for name, t in zip(self.node.output, out[:n]):
            if t is not None and name in self.info:
                dt, shape = self.info[name]
                if t.dtype != dt or tuple(t.shape) != shape:
                    raise BadInput("%s: output '%s' is %s %s here, the file says %s %s"
                                   % (self.where, name, t.dtype, tuple(t.shape), dt, shape))
            flat.append(t)
        return flat


# A step `roamc --train` derived records its ATen nodes (loss, backward, optimizer) without
# their overloads and non-tensor arguments (frontend/train/TRAIN.md): the runner rebuilds
# them from what the step does record, each op below from its inputs, the forward node its
# saved tensors come from, the shapes in value_info and the optimizer state's roles; an op
# outside the table is refused by name.  The optimizer's scalars are torch.optim's defaults
# at step 1 (lr 1e-3, Adam's betas 0.9/0.999, eps 1e-8, AdamW's weight decay 1e-2, momentum
# 0.9): the run checks where the plan puts every byte, against the same step run eagerly.
LR, BETA1, BETA2, EPS, WEIGHT_DECAY, MOMENTUM = 1e-3, 0.9, 0.999, 1e-8, 1e-2, 0.9


class DerivedCall:
    """An ATen node of a step `roamc --train` derived, its arguments rebuilt (DERIVED_OPS)."""

    def __init__(self, node, where, g):
        self.node, self.where, self.op, self.g = node, where, node.op_type, g
        if self.op not in DERIVED_OPS:
            raise BadInput("%s: a node roamc --train derived, whose arguments the step does not record; "
                           "the runner rebuilds those of %s, not %s"
                           % (where, ", ".join(sorted(DERIVED_OPS)), self.op))
        attrs = {a.name: a for a in node.attribute}
        self.inputs = list(node.input)
        self.alias = list(attrs["alias"].ints) if "alias" in attrs else [-1] * len(node.output)
        self.inplace = attrs["inplace"].i if "inplace" in attrs else 0
        self.recompute = attrs[RECOMPUTE_ATTR].s.decode() if RECOMPUTE_ATTR in attrs else None
        self.random = self.empty = False
        impl = DERIVED_OPS[self.op]
        self.fn = lambda *xs: impl(self, *xs)

    def arguments(self, value_of, device):
        return [value_of(x) if x else None for x in self.inputs], {}

    def flat_outputs(self, out, value_of):
        return OnnxCall.flat_outputs(self, out, value_of)

    @property
    def info(self):
        return self.g.info

    def out_shape(self, k=0):
        return list(self.g.info[self.node.output[k]][1])

    def forward_node(self, k, op_types):
        """The forward (ONNX) node that made input k (through Casts), of one of op_types."""
        name = self.inputs[k]
        while name in self.g.producer:
            n = self.g.nodes[self.g.producer[name]]
            if n.op_type in op_types:
                return n, {a.name: a for a in n.attribute}
            if n.op_type != "Cast":
                break
            name = n.input[0]
        raise BadInput("%s: input '%s' does not come from a %s node" % (self.where, self.inputs[k],
                                                                        " or ".join(op_types)))

    def role(self, k):
        """What input k is, following in-place writes back to the graph input they update:
        'param', 'step', 'exp_avg', 'exp_avg_sq', 'momentum_buffer', or None."""
        name = self.inputs[k]
        while name in self.g.producer:
            i = self.g.producer[name]
            c, n = self.g.calls[i], self.g.nodes[i]
            j = c.alias[list(n.output).index(name)] if i < len(self.g.calls) else -1
            if j < 0:
                return None
            name = n.input[j]
        if name in self.g.params:
            return "param"
        for suffix in ("step", "exp_avg_sq", "exp_avg", "momentum_buffer"):
            if name.endswith("." + suffix) and name in self.g.state:
                return suffix
        return None


def _d_mm(c, x, y):
    """roamc writes a Gemm's gradients as mm of the tensors torch multiplies, without the
    transposes (its rule keeps what is read and made): the product whose shape is the
    output's, a transposed operand where needed."""
    want = tuple(c.out_shape())
    for a, b in ((x, y), (x.t(), y), (x, y.t()), (x.t(), y.t())):
        if a.shape[1] == b.shape[0] and (a.shape[0], b.shape[1]) == want:
            return [torch.ops.aten.mm(a, b)]
        if a.shape[1] == b.shape[0] and (b.shape[1], a.shape[0]) == want:
            return [torch.ops.aten.mm(b.t(), a.t())]
    raise BadInput("%s: no product of %s and %s is %s" % (c.where, tuple(x.shape), tuple(y.shape), want))


def _d_sum(c, x):
    shape = c.out_shape()
    lead = list(range(x.dim() - len(shape)))
    y = torch.ops.aten.sum.dim_IntList(x, lead, False) if lead else x
    keep = [d for d in range(y.dim()) if shape[d] == 1 and y.shape[d] != 1]
    return [torch.ops.aten.sum.dim_IntList(y, keep, True) if keep else y]


def _d_div(c, x, y=None):
    if y is not None:
        return [torch.ops.aten.div.Tensor(x, y)]
    if c.g.nodes[c.g.producer[c.inputs[0]]].op_type == "expand":  # a mean's backward
        e = c.g.nodes[c.g.producer[c.inputs[0]]]
        n_in = 1
        for d in c.g.info[e.input[0]][1]:
            n_in *= d
        return [torch.ops.aten.div.Scalar(x, x.numel() // max(n_in, 1))]
    if c.g.nodes[c.g.producer[c.inputs[0]]].op_type == "sqrt":  # Adam: / sqrt(bias_correction2)
        return [torch.ops.aten.div.Scalar(x, (1 - BETA2) ** 0.5)]
    raise BadInput("%s: a div by a number after %s" % (c.where, c.g.nodes[c.g.producer[c.inputs[0]]].op_type))


def _d_add_(c, x, y=None):
    role = c.role(0)
    if y is None:
        return [x.add_(1 if role == "step" else EPS)]
    alpha = {"param": -LR, "exp_avg": 1 - BETA1, "momentum_buffer": 1.0}.get(role)
    if alpha is None:
        raise BadInput("%s: add_ into '%s', not a parameter or optimizer state" % (c.where, c.inputs[0]))
    return [x.add_(y, alpha=alpha)]


def _d_mul_(c, x, y=None):
    if y is not None:
        return [x.mul_(y)]
    factor = {"exp_avg": BETA1, "exp_avg_sq": BETA2, "momentum_buffer": MOMENTUM,
              "param": 1 - LR * WEIGHT_DECAY}.get(c.role(0))
    if factor is None:
        raise BadInput("%s: mul_ of '%s' by a number: not optimizer state" % (c.where, c.inputs[0]))
    return [x.mul_(factor)]


def _d_concat_slice(c, gy):
    """A Concat's gradient for one of its inputs (roamc's rule: slice views of the output's
    gradient, one per input, in the inputs' order): the k-th slice of gy takes the k-th input's
    range along the axis.  The step records neither k nor the Concat, so k is this node's place
    among the slices of gy and the range comes from the forward Concats of gy's shape with as
    many inputs; refused where they disagree."""
    siblings = [n for n in c.g.nodes if n.op_type == "slice" and n.input[0] == c.inputs[0]]
    k = [id(n) for n in siblings].index(id(c.node))
    ranges = set()
    for n in c.g.nodes:
        if n.op_type != "Concat" or len(n.input) != len(siblings):
            continue
        if tuple(c.g.info[n.output[0]][1]) != tuple(gy.shape):
            continue
        axis = {t.name: t for t in n.attribute}["axis"].i % gy.dim()
        sizes = [c.g.info[name][1][axis] for name in n.input]
        ranges.add((axis, sum(sizes[:k]), sum(sizes[: k + 1])))
    if len(ranges) != 1:
        raise BadInput("%s: a slice of '%s' that %s forward Concat explains" %
                       (c.where, c.inputs[0], "no" if not ranges else "more than one"))
    axis, start, end = ranges.pop()
    return [torch.ops.aten.slice(gy, axis, start, end)]


def _d_batch_norm_backward(c, gy, x, w, save_mean, save_invstd):
    _, a = c.forward_node(3, ("BatchNormalization",))
    eps = a["epsilon"].f if "epsilon" in a else 1e-5
    mask = [bool(o) for o in c.node.output] + [False] * (3 - len(c.node.output))
    return list(torch.ops.aten.native_batch_norm_backward(gy, x, w, None, None, save_mean, save_invstd,
                                                          True, eps, mask[:3]))


def _d_conv_backward(c, gy, x, w):
    # the Conv of this weight (its input may be a --fit recompute or Reload of the one it read)
    convs = [n for n in c.g.nodes if n.op_type == "Conv" and len(n.input) > 1 and n.input[1] == c.inputs[2]]
    if not convs:
        raise BadInput("%s: no Conv node reads the weight '%s'" % (c.where, c.inputs[2]))
    n_conv = next((n for n in convs if n.input[0] == c.inputs[1]), convs[0])
    a = {at.name: at for at in n_conv.attribute}
    nd = w.dim() - 2
    bias = [w.shape[0]] if len(n_conv.input) > 2 and n_conv.input[2] else None
    mask = [bool(o) for o in c.node.output] + [False] * (3 - len(c.node.output))
    return list(torch.ops.aten.convolution_backward(
        gy, x, w, bias, _ints(a, "strides", [1] * nd), _pads(a, nd, c.where), _ints(a, "dilations", [1] * nd),
        False, [0] * nd, a["group"].i if "group" in a else 1, mask[:3]))


def _d_max_pool_backward(c, gy, x, idx):
    _, a = c.forward_node(2, ("MaxPool",))
    nd = x.dim() - 2
    return [torch.ops.aten.max_pool2d_with_indices_backward(
        gy, x, _ints(a, "kernel_shape", None), _ints(a, "strides", [1] * nd), _pads(a, nd, c.where),
        _ints(a, "dilations", [1] * nd), bool(a["ceil_mode"].i) if "ceil_mode" in a else False, idx)]


def _d_dropout_backward(c, gy, mask):
    _, a = c.forward_node(1, ("Dropout",))
    n = c.g.nodes[c.g.producer[c.inputs[1]]]
    p = c.g.initial[n.input[1]].item() if len(n.input) > 1 and n.input[1] in c.g.initial else \
        (a["ratio"].f if "ratio" in a else 0.5)
    return [torch.ops.aten.native_dropout_backward(gy, mask, 1.0 / (1.0 - p))]


def _static_value(g, name):
    """The value of an initializer or a Constant node's output (a Clip's bounds), or None."""
    if not name:
        return None
    if name in g.initial:
        return g.initial[name]
    n = g.nodes[g.producer[name]] if name in g.producer else None
    if n is not None and n.op_type == "Constant":
        return _onnx_constant(a={x.name: x for x in n.attribute}, where=name)[0]
    raise BadInput("'%s' is neither an initializer nor a Constant" % name)


def _d_hardtanh_backward(c, gy, x):
    clips = [n for n in c.g.nodes if n.op_type == "Clip" and n.input[0] == c.inputs[1]]
    if not clips:
        raise BadInput("%s: no Clip node reads '%s'" % (c.where, c.inputs[1]))
    n = clips[0]
    bounds = [_static_value(c.g, n.input[k]) if len(n.input) > k else None for k in (1, 2)]
    return [torch.ops.aten.hardtanh_backward(gy, x, *_clip_bounds({a.name: a for a in n.attribute}, *bounds))]


DERIVED_OPS = {
    "hardtanh_backward": _d_hardtanh_backward,
    "_log_softmax": lambda c, x: [torch.ops.aten._log_softmax(x, 1, False)],
    "_log_softmax_backward_data": lambda c, g, y: [torch.ops.aten._log_softmax_backward_data(g, y, 1, y.dtype)],
    "nll_loss_forward": lambda c, x, t, w=None: list(torch.ops.aten.nll_loss_forward(x, t, w, 1, -100)),
    "nll_loss_backward": lambda c, g, x, t, w, tw: [torch.ops.aten.nll_loss_backward(g, x, t, w, 1, -100, tw)],
    "ones_like": lambda c, x: [torch.ops.aten.ones_like(x)],
    "mm": _d_mm,
    "t": lambda c, x: [torch.ops.aten.t(x)],
    "add": lambda c, x, y: [torch.ops.aten.add.Tensor(x, y)],
    "mul": lambda c, x, y: [torch.ops.aten.mul.Tensor(x, y)],
    "sum": _d_sum, "div": _d_div,
    "view": lambda c, x: [torch.ops.aten.view(x, c.out_shape()) if c.alias[0] == 0
                          else torch.ops.aten.reshape(x, c.out_shape())],
    "expand": lambda c, x: [torch.ops.aten.expand(x, c.out_shape())],
    "clone": lambda c, x: [torch.ops.aten.clone(x)],
    "threshold_backward": lambda c, g, x: [torch.ops.aten.threshold_backward(g, x, 0)],
    "sigmoid_backward": lambda c, g, y: [torch.ops.aten.sigmoid_backward(g, y)],
    "tanh_backward": lambda c, g, y: [torch.ops.aten.tanh_backward(g, y)],
    "native_batch_norm_backward": _d_batch_norm_backward,
    "convolution_backward": _d_conv_backward,
    "max_pool2d_with_indices_backward": _d_max_pool_backward,
    "native_dropout_backward": _d_dropout_backward,
    "sqrt": lambda c, x: [torch.ops.aten.sqrt(x)],
    "slice": _d_concat_slice,
    "add_": _d_add_, "mul_": _d_mul_,
    "addcmul_": lambda c, x, a, b: [x.addcmul_(a, b, value=1 - BETA2)],
    "addcdiv_": lambda c, x, a, b: [x.addcdiv_(a, b, value=-LR / (1 - BETA1))],
}


class CopyCall:
    """An ai.roamc Offload (device -> host) or Reload (host -> device): a copy."""

    def __init__(self, node, where):
        self.node, self.where, self.op = node, where, node.op_type
        self.inputs = list(node.input)
        self.alias = [-1]
        self.inplace = 0
        self.random = self.empty = False
        self.recompute = None


class CommCall:
    """An ai.roamc communication node of a rank's step: AllReduce, ReduceScatter,
    Broadcast (in place: alias 0), AllGather, Recv (new memory), Send (a view of
    what it sends), Depend (views of its inputs; an output aliasing none is a new
    ordering token).  Only Depend is computed here (local); the others are yielded
    to the driver of the run, which answers with the outputs (comm_outputs)."""

    def __init__(self, node, where):
        self.node, self.where, self.op = node, where, node.op_type
        self.inputs = list(node.input)
        attrs = {a.name: a for a in node.attribute}
        self.attrs = {k: a.i for k, a in attrs.items() if a.type == onnx.AttributeProto.INT}
        self.alias = list(attrs["alias"].ints) if "alias" in attrs else [-1] * len(node.output)
        self.inplace = self.attrs.get("inplace", 0)
        self.random = self.empty = False
        self.recompute = None
        if len(self.alias) != len(node.output):
            raise BadInput("%s: %d alias entries for %d outputs" % (where, len(self.alias), len(node.output)))

    def depend(self, value_of, info, device):
        """Depend's outputs: a view of input alias[k]; a 4-byte token where alias[k] < 0."""
        out = []
        for k, name in enumerate(self.node.output):
            j = self.alias[k]
            if j >= 0:
                out.append(torch.ops.aten.alias(value_of(self.inputs[j])))
            else:
                dt, shape = info[name]
                out.append(torch.zeros(shape, dtype=dt, device=device))
        return out


def comm_outputs(c, out, info):
    """The driver's answer for communication node c: one tensor per output, of the
    value_info's dtype and shape (BadInput otherwise)."""
    if not isinstance(out, (list, tuple)) or len(out) != len(c.node.output):
        raise BadInput("%s: the driver gave %r for %d outputs" % (c.where, type(out), len(c.node.output)))
    for name, t in zip(c.node.output, out):
        if name in info and (t.dtype, tuple(t.shape)) != info[name]:
            raise BadInput("%s: '%s' came back %s %s, its value_info says %s %s"
                           % (c.where, name, t.dtype, tuple(t.shape), info[name][0], info[name][1]))
    return list(out)


def drive_alone(gen):
    """Runs an executor generator of one process to its end: a step with
    collectives or Send/Recv needs its peers (models/run_ranks.py)."""
    try:
        c, _ = next(gen)
    except StopIteration as e:
        return e.value
    raise BadInput("%s: a %s needs the other ranks: run every rank with models/run_ranks.py"
                   % (c.where, c.op))


def check_host_use(g):
    """DESIGN.md's rules for host values, from the graph alone: only a Reload
    reads a value an Offload made, a Reload reads nothing else, no host value
    is a graph output, nothing offloads a host value again."""
    for i, c in enumerate(g.calls):
        for t in c.node.input:
            if not t:
                continue
            if t in g.host and c.op != "Reload":
                raise StepViolation("%s reads '%s', a host value (node %d's Offload made it); only a "
                                    "Reload may read it: the reader should read the Reload's output"
                                    % (c.where, t, g.producer[t]))
            if c.op == "Reload" and t not in g.host:
                raise StepViolation("%s reloads '%s', which no Offload made (a device value)" % (c.where, t))
    for t in g.outputs:
        if t in g.host:
            raise StepViolation("%s: graph output '%s' is a host value (an Offload makes it)" % (g.path, t))


def seed_keys(g, ref):
    """Per node of g, the index its random draws are seeded by: the node of the
    reference step `ref` that made the same output (so a moved node draws the
    same mask); for a recompute copy (attribute roamc_recompute) the reference
    node that made the value it names, so that a correct recompute of a random
    op draws the forward's mask again; a random node with neither draws from a
    seed of its own, one no reference node has (a new mask)."""
    keys = []
    for i, c in enumerate(g.calls):
        if not c.random:
            keys.append(None)
        elif c.recompute is not None:
            if c.recompute not in ref.producer:
                raise BadInput("%s: %s names '%s', which the reference step %s does not make"
                               % (c.where, RECOMPUTE_ATTR, c.recompute, ref.path))
            keys.append(ref.producer[c.recompute])
        else:
            outs = [o for o in c.node.output if o in ref.producer]
            keys.append(ref.producer[outs[0]] if outs else len(ref.nodes) + i)
    return keys


def host_tensor(t, device):
    """A host copy of t, outside the arena (pinned when the run is on CUDA)."""
    h = torch.empty(t.shape, dtype=t.dtype, pin_memory=device.type == "cuda")
    h.copy_(t)
    return h


def check_same_step(g, ref):
    """The changed step g and the reference step ref take the same inputs and
    give the same outputs, loss and state (what the comparison reads)."""
    problems = []
    if set(g.inputs) != set(ref.inputs):
        problems.append("inputs differ: %s" % sorted(set(g.inputs) ^ set(ref.inputs))[:4])
    if set(g.outputs) != set(ref.outputs):
        problems.append("graph outputs differ: %s" % sorted(set(g.outputs) ^ set(ref.outputs))[:4])
    for t in set(g.inputs) & set(ref.inputs):
        if g.info[t] != ref.info[t]:
            problems.append("input '%s' is %s there, %s here" % (t, ref.info[t], g.info[t]))
    for key in ("roamc.loss", "roamc.parameters", "roamc.optimizer_state", "roamc.buffers"):
        if g.meta.get(key) != ref.meta.get(key):
            problems.append("metadata %s differs" % key)
    if problems:
        raise BadInput("%s is not a changed version of the reference step %s: %s"
                       % (g.path, ref.path, "; ".join(problems[:4])))


# --------------------------------------------------------------------------- inputs

def original_weights(g, quiet=True):
    """The parameters' values of a step `roamc --train` derived: the initializers of the file
    it was derived from (metadata roamc.derived_from, as given to roamc: found from the
    current folder or the step's), by name; {} when the step records none or the file is
    not there (then every parameter is seeded random data)."""
    src = g.meta.get("roamc.derived_from")
    if not src:
        return {}
    for path in (src, os.path.join(os.path.dirname(os.path.abspath(g.path)), src)):
        if os.path.isfile(path):
            break
    else:
        if not quiet:
            print("note: %s was derived from %s, which is not here: its parameters are seeded random data"
                  % (g.path, src))
        return {}
    try:
        m = onnx.load(path)
    except Exception as e:
        raise BadInput("%s (roamc.derived_from of %s): not a readable ONNX model (%s)" % (path, g.path, e))
    weights = {}
    for t in m.graph.initializer:
        if t.data_type in DTYPES and t.data_location != onnx.TensorProto.EXTERNAL:
            weights[t.name] = torch.from_numpy(onnx.numpy_helper.to_array(t).copy()).to(DTYPES[t.data_type])
    return weights


def make_inputs(g, seed, quiet=True):
    """Values for every graph input, the same for both runs: a derived step's initializers
    hold theirs, its parameters come from the original file's initializers (original_weights)
    where it has them; the rest (data, optimizer state, the parameters of an exporter's step)
    are random, from seed."""
    gen = torch.Generator().manual_seed(seed)
    vals = {}
    weights = original_weights(g, quiet)
    n_orig = 0
    for name in g.inputs:
        dt, shape = g.info[name]
        w = g.initial.get(name)
        if w is None and name in weights and weights[name].dtype == dt and tuple(weights[name].shape) == shape:
            w = weights[name]
            n_orig += 1
        if w is not None:
            vals[name] = w.clone()
            continue
        if dt.is_floating_point:
            v = torch.randn(shape, generator=gen, dtype=torch.float32).to(dt) * 0.1
            if "exp_avg_sq" in name or "running_var" in name:
                v = v.abs()  # second moments and variances are never negative
        elif dt == torch.bool:
            v = torch.rand(shape, generator=gen) < 0.5
        else:
            # class labels, token ids, token types (BERT has 2), positions, counters:
            # 0 and 1 fit every class count and table of the bundled models
            v = torch.randint(0, 2, shape, generator=gen, dtype=torch.int64).to(dt)
        vals[name] = v
    if g.meta.get("roamc.derived_from") and not quiet:
        params = [x for x in g.meta.get("roamc.parameters", "").split(",") if x]
        print("parameters: %d of %d from %s's initializers, the rest seeded random data"
              % (n_orig, len(params), g.meta["roamc.derived_from"]))
    return vals


def storage_ptr(t):
    """Address of the storage t views (torch 1.13 has no untyped_storage())."""
    return t.storage().data_ptr()


def fill_poison(t):
    """Uninitialised memory made deterministic: NaN, True or -1 everywhere."""
    if t.numel() == 0:
        return
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(-1)


def seed_node(i, seed, device):
    torch.manual_seed(seed * 1000003 + i)


# --------------------------------------------------------------------------- reference

def run_reference(g, init, seed, device, keys=None, keep_also=(), overrides=None):
    """Program order, ordinary allocations: the results to match.  keys: the
    seed index of each random node (seed_keys; default its own index).  An
    Offload is a copy to a host tensor, a Reload a copy back.  keep_also: values
    kept past their last reader (besides inputs and outputs).  overrides: {name:
    tensor}, each copied in place into the value as soon as its node makes it
    (models/run_ranks.py: the step with one gradient summed in another order)."""
    return drive_alone(reference_steps(g, init, seed, device, keys, keep_also, overrides))


def reference_steps(g, init, seed, device, keys=None, keep_also=(), overrides=None):
    """run_reference as a generator: at each communication node (CommCall other
    than Depend) it yields (call, input tensors) and takes the outputs back
    (comm_outputs); returns env."""
    env = {k: v.clone().to(device) for k, v in init.items()}
    keep = set(g.inputs) | set(g.outputs) | set(keep_also)
    last = {}
    for i, n in enumerate(g.nodes):
        for t in n.input:
            if t:
                last[t] = i
    for i, c in enumerate(g.calls):
        for t in c.node.input:
            if t and t not in env:
                raise StepViolation("%s reads '%s' before anything in the file made it" % (c.where, t))
        if c.op in ("Offload", "Reload"):
            x = env[c.inputs[0]]
            env[c.node.output[0]] = host_tensor(x, device) if c.op == "Offload" else x.to(device, copy=True)
            if last.get(c.inputs[0]) == i and c.inputs[0] not in keep:
                del env[c.inputs[0]]
            continue
        if isinstance(c, CommCall):
            if c.op == "Depend":
                flat = c.depend(lambda x: env[x], g.info, device)
            else:
                flat = comm_outputs(c, (yield c, [env[x] if x else None for x in c.inputs]), g.info)
        else:
            if c.random:
                seed_node(i if keys is None else keys[i], seed, device)
            a, kw = c.arguments(lambda x: env[x], device)
            out = c.fn(*a, **kw)
            flat = c.flat_outputs(out, lambda x: env[x])
        for name, t in zip(c.node.output, flat):
            if not name:
                continue
            if c.empty:
                fill_poison(t)
            if overrides and name in overrides:
                with torch.no_grad():
                    t.copy_(overrides[name])
            env[name] = t
        for t in set(c.node.input):
            if t and last.get(t) == i and t not in keep:
                del env[t]
    return env


# --------------------------------------------------------------------------- plan run

def _extent(t):
    """Byte range [lo, hi) a tensor can touch."""
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + span * t.element_size()


class Arena:
    def __init__(self, g, plan, device, guards, keys=None):
        self.g, self.guards = g, guards
        self.keys = keys  # seed index per random node (seed_keys); None: the node's own
        try:
            self.sched = [int(x) for x in plan["schedule"]]
            self.buffers = plan["buffers"]
            self.host_buffers = plan.get("host_buffers", [])
            self.actual = int(plan["peak"]["actual"])
            for b in self.buffers:
                for k in ("size", "offset", "start", "end"):
                    b[k] = int(b[k])
            for b in self.host_buffers:
                for k in ("size", "start", "end"):
                    b[k] = int(b[k])
                list(b["tensors"])
        except (KeyError, TypeError, ValueError) as e:
            raise BadInput("the plan lacks a field or has a wrong type (%s)" % e)
        if sorted(self.sched) != list(range(len(g.nodes))):
            raise BadInput("the plan's schedule is not a permutation of the %d nodes" % len(g.nodes))
        self.buf_of, self.host_of = {}, {}
        for bi, b in enumerate(self.buffers):
            for t in b["tensors"]:
                if t in g.host:
                    # a host value in the arena would count in the device peak and hide a missing copy
                    raise PlanViolation("'%s' is a host value (an Offload makes it) but the plan puts it in "
                                        "device buffer %d; it belongs in host_buffers" % (t, bi))
                self.buf_of[t] = bi
        for hi, b in enumerate(self.host_buffers):
            for t in b["tensors"]:
                if t not in g.host:
                    raise PlanViolation("'%s' is in host buffer %d, but no Offload makes it (a device value)"
                                        % (t, hi))
                self.host_of[t] = hi
        for name in list(g.info):
            if name not in self.buf_of and name not in self.host_of:
                raise BadInput("tensor '%s' is in no buffer of the plan" % name)
        self.step_of = {n: s for s, n in enumerate(self.sched)}
        # where each offloaded device value was copied out (for the guard's message)
        self.offloaded_at = {c.inputs[0]: self.step_of[i] for i, c in enumerate(g.calls) if c.op == "Offload"}
        # host memory: one pinned (on CUDA) byte tensor per host buffer, outside the arena
        self.host_mem = [torch.full((max(b["size"], 0),), POISON, dtype=torch.uint8,
                                    pin_memory=device.type == "cuda") for b in self.host_buffers]
        top = max([b["offset"] + b["size"] for b in self.buffers] + [0])
        if top > self.actual:
            msg = "buffers reach byte %d, beyond the plan's actual peak %d" % (top, self.actual)
            if guards:
                raise PlanViolation(msg)
        # the arena: exactly the plan's actual bytes (more only when --trust-plan runs a plan
        # whose buffers do not fit, so that the comparison can speak)
        self.mem = torch.full((max(self.actual, top),), POISON, dtype=torch.uint8, device=device)
        self.base = self.mem.data_ptr()
        self.env = {}
        self.step = -1
        # values wanted after the step whose buffers end before it (models/run_ranks.py:
        # a pipeline stage's loss): copied out before their slots are poisoned
        self.capture, self.captured = set(), {}

    def slot_range(self, bi):
        b = self.buffers[bi]
        return self.base + b["offset"], self.base + b["offset"] + b["size"]

    def check(self, name, t, what):
        """Guard: t lies in its buffer's slot, and the buffer is live now."""
        if not self.guards or t is None:
            return
        bi = self.buf_of[name]
        b = self.buffers[bi]
        if not (b["start"] <= self.step <= b["end"]):
            off = self.offloaded_at.get(name)
            raise PlanViolation("step %d (node %d, %s): %s '%s' outside its buffer %d's lifetime [%d,%d]%s"
                                % (self.step, self.node, self.g.nodes[self.node].op_type, what, name, bi,
                                   b["start"], b["end"],
                                   "" if off is None or off > self.step else
                                   " (it was offloaded at step %d and its device copy freed: a reader after "
                                   "that must read its Reload)" % off))
        if t.numel() == 0:
            return
        if storage_ptr(t) != self.base:
            raise PlanViolation("step %d (node %d, %s): %s '%s' is not in the arena"
                                % (self.step, self.node, self.g.nodes[self.node].op_type, what, name))
        lo, hi = _extent(t)
        slo, shi = self.slot_range(bi)
        if lo < slo or hi > shi:
            raise PlanViolation("step %d (node %d, %s): %s '%s' touches bytes [%d,%d) of the arena, outside "
                                "its buffer %d's slot [%d,%d)"
                                % (self.step, self.node, self.g.nodes[self.node].op_type, what, name,
                                   lo - self.base, hi - self.base, bi, slo - self.base, shi - self.base))

    def place(self, name, r):
        """A new tensor: r copied into its slot, with r's strides when they fit."""
        bi = self.buf_of[name]
        b = self.buffers[bi]
        if self.guards and not (b["start"] <= self.step <= b["end"]):
            raise PlanViolation("step %d (node %d, %s): '%s' is produced outside its buffer %d's lifetime "
                                "[%d,%d]" % (self.step, self.node, self.g.nodes[self.node].op_type, name, bi,
                                             b["start"], b["end"]))
        n = r.numel()
        span = 1 + sum((s - 1) * st for s, st in zip(r.shape, r.stride())) if n else 0
        dense = n == 0 or (span == n and all(st >= 0 for st in r.stride()))
        stride = r.stride() if dense else None
        need = (span if dense else n) * r.element_size()
        if need > b["size"]:
            msg = ("step %d (node %d): '%s' needs %d bytes, its buffer %d has %d"
                   % (self.step, self.node, name, need, bi, b["size"]))
            if self.guards:
                raise PlanViolation(msg)
        off = b["offset"]
        nbytes = max(need, 0)
        raw = self.mem[off:off + nbytes]
        if off % r.element_size():
            raise PlanViolation("'%s' at offset %d is not aligned for %s" % (name, off, r.dtype))
        flat = raw.view(r.dtype) if nbytes else torch.empty(0, dtype=r.dtype, device=self.mem.device)
        if stride is None:
            dst = flat[:n].view(r.shape)
        else:
            dst = flat.as_strided(r.shape, stride, flat.storage_offset())
        dst.copy_(r)
        return dst

    def run(self, init, seed, device):
        return drive_alone(self.steps(init, seed, device))

    def steps(self, init, seed, device):
        """run as a generator: at each communication node (not Depend) it yields
        (call, input tensors) and takes the outputs back (comm_outputs); an
        in-place collective writes its input's slot, a new output is placed in its
        own; returns env."""
        g = self.g
        # a fresh step: only what `init` brings survives from an earlier run
        self.mem.fill_(POISON)
        self.env = {}
        # graph inputs into their slots, at step 0
        self.step, self.node = 0, self.sched[0]
        self.live = []
        started = set()
        starts = {}
        for bi, b in enumerate(self.buffers):
            starts.setdefault(b["start"], []).append(bi)
        ends = {}
        for bi, b in enumerate(self.buffers):
            ends.setdefault(b["end"], []).append(bi)
        last_step = len(self.sched) - 1
        host_ends = {}
        for hi, b in enumerate(self.host_buffers):
            host_ends.setdefault(b["end"], []).append(hi)
        for h in self.host_mem:
            h.fill_(POISON)
        self.open_buffers(starts.get(0, []), started)
        for name in g.inputs:
            self.env[name] = self.place(name, init[name].to(device))
        for s, i in enumerate(self.sched):
            self.step, self.node = s, i
            if s:
                self.open_buffers(starts.get(s, []), started)
            c = g.calls[i]
            for t in c.node.input:
                if t:
                    if t not in self.env:
                        raise PlanViolation("step %d (node %d, %s) reads '%s' before anything produced it"
                                            % (s, i, c.op, t))
                    if t in self.host_of:
                        self.check_host(t)
                    else:
                        self.check(t, self.env[t], "reads")
            if c.op in ("Offload", "Reload"):
                self.copy(c)
                self.end_buffers(ends.get(s, []), host_ends.get(s, []), s < last_step)
                continue
            if isinstance(c, CommCall):
                if c.op == "Depend":
                    flat = c.depend(lambda x: self.env[x], g.info, device)
                else:
                    flat = comm_outputs(c, (yield c, [self.env[x] if x else None for x in c.inputs]), g.info)
            else:
                if c.random:
                    seed_node(i if self.keys is None else self.keys[i], seed, device)
                a, kw = c.arguments(lambda x: self.env[x], device)
                if c.op in ("as_strided", "as_strided_") and len(a) > 3 and a[3] is not None:
                    # storage_offset counts from the start of the storage, which eager
                    # allocated on its own and the plan puts at its buffer's offset
                    a[3] += self.buffers[self.buf_of[c.inputs[0]]]["offset"] // a[0].element_size()
                out = c.fn(*a, **kw)
                flat = c.flat_outputs(out, lambda x: self.env[x])
            for k, (name, t) in enumerate(zip(c.node.output, flat)):
                if not name:
                    continue
                if t is None:
                    raise BadInput("%s: output '%s' is undefined" % (c.where, name))
                j = c.alias[k] if k < len(c.alias) else -1
                if j >= 0:
                    # a view or an in-place write: already in the arena, in its input's slot
                    if t.numel() and storage_ptr(t) != self.base:
                        raise BadInput("%s: output '%s' is recorded as sharing the storage of '%s', but "
                                       "the operator returned new memory" % (c.where, name, c.inputs[j]))
                    if c.empty:
                        fill_poison(t)
                    self.env[name] = t
                    self.check(name, t, "writes" if c.inplace else "views")
                else:
                    if c.empty:
                        fill_poison(t)
                    self.env[name] = self.place(name, t)
            self.end_buffers(ends.get(s, []), host_ends.get(s, []), s < last_step)
        self.env.update(self.captured)
        return self.env

    def end_buffers(self, bis, his, poison):
        for bi in bis:
            for t in self.buffers[bi]["tensors"]:
                if t in self.capture and t in self.env:
                    self.captured[t] = self.env[t].detach().clone()  # read after the step
            lo, hi = self.slot_range(bi)
            if hi > lo and poison:
                self.mem[lo - self.base:hi - self.base].fill_(POISON)  # freed: nothing may read it
            self.live = [x for x in self.live if x != bi]
        for hi in his:
            if poison:
                self.host_mem[hi].fill_(POISON)

    def check_host(self, name):
        """Guard: a host value is read while its host buffer is live."""
        b = self.host_buffers[self.host_of[name]]
        if self.guards and not (b["start"] <= self.step <= b["end"]):
            raise PlanViolation("step %d (node %d, %s): reads host value '%s' outside its host buffer %d's "
                                "lifetime [%d,%d]" % (self.step, self.node, self.g.nodes[self.node].op_type,
                                                      name, self.host_of[name], b["start"], b["end"]))

    def copy(self, c):
        """Offload: the device value copied into its host buffer's memory, outside
        the arena.  Reload: the host value copied into the output's arena slot."""
        src, dst = c.inputs[0], c.node.output[0]
        x = self.env[src]
        if c.op == "Offload":
            hi = self.host_of[dst]
            b = self.host_buffers[hi]
            if self.guards and not (b["start"] <= self.step <= b["end"]):
                raise PlanViolation("step %d (node %d, Offload): '%s' is produced outside its host buffer %d's "
                                    "lifetime [%d,%d]" % (self.step, self.node, dst, hi, b["start"], b["end"]))
            need = x.numel() * x.element_size()
            if need > b["size"]:
                raise PlanViolation("step %d (node %d, Offload): '%s' needs %d bytes, its host buffer %d has %d"
                                    % (self.step, self.node, dst, need, hi, b["size"]))
            h = self.host_mem[hi][:need].view(x.dtype).view(x.shape) if need else \
                torch.empty(x.shape, dtype=x.dtype)
            h.copy_(x)
            self.env[dst] = h
        else:
            self.env[dst] = self.place(dst, x)

    def open_buffers(self, bis, started):
        for bi in bis:
            if self.guards:
                lo, hi = self.slot_range(bi)
                for o in self.live:
                    olo, ohi = self.slot_range(o)
                    if lo < ohi and olo < hi and hi > lo and ohi > olo:
                        raise PlanViolation("step %d: buffer %d (%s) starts at bytes [%d,%d), overlapping "
                                            "buffer %d (%s) at [%d,%d), which is still live"
                                            % (self.step, bi, self.buffers[bi]["tensors"][0], lo - self.base,
                                               hi - self.base, o, self.buffers[o]["tensors"][0],
                                               olo - self.base, ohi - self.base))
            self.live.append(bi)
            started.add(bi)


# --------------------------------------------------------------------------- compare

def bits(t):
    t = t.detach()
    return t.reshape(-1).contiguous().view(torch.uint8).cpu() if t.numel() else torch.empty(0, dtype=torch.uint8)


def compare(g, ref, got):
    names = []
    for key in ("roamc.parameters", "roamc.optimizer_state", "roamc.buffers"):
        names += [x for x in g.meta.get(key, "").split(",") if x]
    names = [g.loss] + [n for n in g.outputs if n != g.loss] + [n for n in names if n not in g.outputs]
    diffs = []
    for n in names:
        a, b = ref[n], got[n]
        if a.shape != b.shape or a.dtype != b.dtype:
            diffs.append("%s: shape/dtype %s %s vs %s %s" % (n, tuple(a.shape), a.dtype, tuple(b.shape), b.dtype))
        elif not torch.equal(bits(a), bits(b)):
            d = (a.double().cpu() - b.double().cpu()).abs()
            d = d[~torch.isnan(d)]
            diffs.append("%s differs: %d of %d bytes; largest difference %s"
                         % (n, int((bits(a) != bits(b)).sum()), a.numel() * a.element_size(),
                            "%.3g" % float(d.max()) if d.numel() else "nan"))
    return names, diffs


# --------------------------------------------------------------------------- main

def load_plan(path, g):
    try:
        with open(path) as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput("%s: not a readable JSON plan (%s)" % (path, e))
    if not isinstance(plan, dict) or plan.get("format") != "roam-plan" or plan.get("version") not in (1, 2):
        raise BadInput("%s: not a roam-plan v1 or v2 file" % path)
    digest = hashlib.sha256(g.bytes).hexdigest()
    if "model_sha256" in plan and plan["model_sha256"] != digest:
        raise BadInput("%s was made for another model: it names '%s', SHA-256 %s..., but %s has %s..."
                       % (path, plan.get("model"), str(plan["model_sha256"])[:16], g.path, digest[:16]))
    return plan


def cuda_peaks(device):
    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    r = (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
    torch.cuda.reset_peak_memory_stats()
    return r


def carried_state(g, init, after):
    """The next step's inputs: the parameters, optimizer state and module
    buffers the step left (copied to the host: the next run writes over the
    arena), and the same data batch as before."""
    state = set()
    for key in ("roamc.parameters", "roamc.optimizer_state", "roamc.buffers"):
        state.update(x for x in g.meta.get(key, "").split(",") if x)
    return {k: after[k].detach().to("cpu", copy=True) if k in state else v for k, v in init.items()}


def cuda_text(mem):
    return "; cuda max allocated %d B, reserved %d B" % mem if mem else ""


def cuda_max(mems):
    return tuple(max(m[i] for m in mems) for i in range(2))


def main(argv):
    ap = argparse.ArgumentParser(prog="run_plan.py", description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("plans", nargs="+", metavar="PLAN",
                    help="one or more plans of MODEL (the reference runs once for all)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=1,
                    help="training steps run and compared (the first is the warm-up for CUDA figures)")
    ap.add_argument("--trust-plan", action="store_true",
                    help="no guards: only the comparison decides")
    ap.add_argument("--reference", metavar="ORIGINAL.onnx",
                    help="the reference run is this step (the unchanged one PyTorch ran), the plan run "
                         "MODEL (a changed step: recompute nodes, Offload/Reload); default: MODEL itself")
    ap.add_argument("--interleavings", type=int, default=50, metavar="N",
                    help="a version 2 plan (several streams) runs under N interleavings (models/run_streams.py)")
    ap.add_argument("--quiet", action="store_true")
    try:
        args = ap.parse_args(argv[1:])
    except SystemExit as e:
        return EXIT_BAD if e.code else 0
    if args.interleavings < 1:
        print("run_plan.py: --interleavings must be at least 1, not %d" % args.interleavings, file=sys.stderr)
        return EXIT_BAD
    if args.steps < 1:
        print("run_plan.py: --steps must be at least 1, not %d" % args.steps, file=sys.stderr)
        return EXIT_BAD
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("run_plan.py: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return EXIT_BAD
    if device.type == "cuda":
        # atomics (embedding_dense_backward, index_add) and cuBLAS's split reductions
        # would otherwise differ between two runs of the same step
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    where = args.model
    try:
        t0 = time.time()
        g = Graph(args.model)
        check_host_use(g)
        ref = Graph(args.reference) if args.reference else g
        if ref is not g:
            check_host_use(ref)
            check_same_step(g, ref)
        plans = [load_plan(p, g) for p in args.plans]
        init = make_inputs(ref, args.seed, args.quiet)
        keys = seed_keys(g, ref)
        cuda_peaks(device)
        keep = set(ref.inputs) | set(ref.outputs)
        where = "%s (reference run)" % ref.path
        if g.changed and ref is g and not args.quiet:
            print("note: %s is a changed step (recompute, Offload/Reload) and is its own reference; "
                  "--reference ORIGINAL.onnx proves it against the unchanged step" % g.path)
        refs, mems_ref, state = [], [], init
        for step in range(args.steps):
            t1 = time.time()
            env = run_reference(ref, state, args.seed + step, device, seed_keys(ref, ref))
            t_ref = time.time() - t1
            mems_ref.append(cuda_peaks(device))
            # kept on the host, so that N steps hold one step's tensors on the device
            refs.append({k: v.detach().to("cpu", copy=device.type != "cpu") for k, v in env.items() if k in keep})
            del env
            state = carried_state(ref, init, refs[-1])
            if not args.quiet:
                print("reference %s%s: %d nodes in program order, ordinary allocations, %.2f s%s%s"
                      % (ref.path, " step %d" % (step + 1) if args.steps > 1 else "", len(ref.nodes), t_ref,
                         " (setup %.2f s)" % (t1 - t0) if step == 0 else "", cuda_text(mems_ref[-1])))
        if args.steps > 1 and not args.quiet and mems_ref[-1]:
            print("reference %s after warm-up, largest over steps 2..%d%s"
                  % (ref.path, args.steps, cuda_text(cuda_max(mems_ref[1:]))))
        rc = EXIT_MATCH
        for path, plan in zip(args.plans, plans):
            where = "%s (plan %s)" % (args.model, path)
            try:
                arena = Arena(g, plan, device, not args.trust_plan, keys)
            except PlanViolation as e:
                print("MISMATCH %s: the plan broke a guard: %s" % (path, e))
                rc = EXIT_MISMATCH
                continue
            if plan.get("version") == 2:
                if not RS.run_interleavings(sys.modules[__name__], path, g, plan, arena, init, refs, args, device):
                    rc = EXIT_MISMATCH
                del arena
                continue
            state, mems, failed = init, [], False
            for step in range(args.steps):
                at = " step %d" % (step + 1) if args.steps > 1 else ""
                t2 = time.time()
                try:
                    got = arena.run(state, args.seed + step, device)
                except PlanViolation as e:
                    print("MISMATCH %s%s: the plan broke a guard: %s" % (path, at, e))
                    failed = True
                    break
                t_run = time.time() - t2
                mems.append(cuda_peaks(device))
                names, diffs = compare(g, refs[step], got)
                info = "arena %d B%s, plan run %.2f s%s" % (
                    arena.mem.numel(), ", host %d B" % sum(h.numel() for h in arena.host_mem)
                    if arena.host_mem else "", t_run, cuda_text(mems[-1]))
                if diffs:
                    print("MISMATCH %s%s: %d of %d compared tensors differ (%s)"
                          % (path, at, len(diffs), len(names), info))
                    for d in diffs[:20]:
                        print("  " + d)
                    failed = True
                    break
                if not args.quiet:
                    print("MATCH %s%s: loss, graph outputs, parameters and optimizer state (%d tensors) bit for "
                          "bit equal to the reference; %s" % (path, at, len(names), info))
                state = carried_state(g, init, got)
                del got
            if failed:
                rc = EXIT_MISMATCH
            elif args.steps > 1 and not args.quiet and mems[-1]:
                print("plan %s after warm-up, largest over steps 2..%d%s"
                      % (path, args.steps, cuda_text(cuda_max(mems[1:]))))
            del arena
        return rc
    except BadInput as e:
        print("run_plan.py: %s" % e, file=sys.stderr)
        return EXIT_BAD
    except StepViolation as e:
        print("REJECTED %s: the changed step breaks the Offload/Reload rules: %s" % (args.model, e))
        return EXIT_MISMATCH
    except (RuntimeError, TypeError, ValueError, IndexError) as e:
        # an operator that refused its arguments: not a graph the runner can replay
        print("run_plan.py: %s: %s" % (where, e), file=sys.stderr)
        return EXIT_BAD


if __name__ == "__main__":
    sys.exit(main(sys.argv))
