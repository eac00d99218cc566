"""roamc: plan the memory of an ONNX training step, or lay out a list of
buffers, from Python, through libroamc (the library the `roamc` command is
a client of: the same input and options give the same plan, byte for byte).

    import roamc
    p = roamc.plan("models/alexnet_b1.onnx", budget="16GiB")
    p.peak, p.lower_bound, p.buffers[0], p.report["theoretical_peak"]
    p.write("plan.json")

    r = roamc.layout([(1024, 0, 3), (2048, 2, 5), (512, 4, 9)], alignment=256)
    r.offsets, r.height, r.gap, r.stop

    rows = roamc.compare("models/mnasnet1_0_b1.onnx")   # PyTorch, Heuristics, ILP, ROAM
    [(w.name, w.actual_peak) for w in rows], rows.lower_bound

    import roamc.torch                      # needs torch (and onnx)
    p = roamc.torch.plan(model, (x,), loss_fn, optimizer="adam")

Errors raise roamc.Error with the library's message.  The library is found
as roamc._lib says (ROAMC_LIBRARY, the build tree, pkg-config, the loader).
"""
import ctypes as _c
import json as _json
import os as _os
from collections import namedtuple as _namedtuple

from . import _lib
from ._lib import Error

__all__ = ["Error", "Plan", "Buffer", "Stage", "MaxBatch", "Layout", "Comparison", "CompareRow",
           "plan", "max_batch", "compare", "layout", "library_version", "library_path"]
__version__ = "0.1.0"

_OK, _NO_FIT = 0, 3


def library_version():
    """The version of the libroamc loaded ("MAJOR.MINOR.PATCH")."""
    return _lib.version().decode()


def library_path():
    """The path of the libroamc loaded."""
    return _lib.path


def _b(s):
    return s if isinstance(s, bytes) else _os.fsencode(s) if isinstance(s, _os.PathLike) \
        else str(s).encode()


Buffer = _namedtuple("Buffer", "index name offset size start end persistent")
Buffer.__doc__ = """One buffer of a plan (a storage: the tensors that share memory): its first
tensor's name, its offset in the arena, its size (rounded up to the alignment; 0 for a host
copy), its closed lifetime [start, end] in steps of the schedule, and whether it is
persistent (parameters, optimizer state, inputs and outputs)."""


Stage = _namedtuple("Stage", "index theoretical_peak actual_peak")
Stage.__doc__ = """One stage of a pipeline (the option pipeline_stages): its peaks in bytes."""


class _Options:
    """A roamc_options handle filled from keyword arguments."""

    def __init__(self):
        self.h = _lib.options_new()

    def set(self, name, value):
        v = None if value is None or value is True else _b(value)
        if _lib.options_set(self.h, name.encode(), v) != _OK:
            raise Error(_lib.options_error(self.h).decode(), 2)

    def set_default(self, name):
        """The option given None: what NULL means to roamc_options_set.  An option NULL turns
        on takes its default value (train; fit: both; max-batch: the one unbound symbol;
        compare; no-sync); one that needs a value keeps the value roamc_options_new gave it
        (the library refuses NULL for it and, as roamc.h says, leaves the option as it was),
        so None there is the same as not passing the keyword."""
        if _lib.options_set(self.h, name.encode(), None) == _OK:
            return
        msg = _lib.options_error(self.h).decode()
        if msg.startswith("no option named"):
            raise Error(msg, 2)  # a misspelt keyword is an error, whatever its value

    def close(self):
        if self.h:
            _lib.options_free(self.h)
            self.h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _shape_text(name, dims):
    if isinstance(dims, str):
        return "%s=%s" % (name, dims)
    return "%s=%s" % (name, ",".join(str(d) for d in dims))


def _fill(o, input_shapes, dims, budget, train, options):
    if input_shapes:
        items = input_shapes.items() if isinstance(input_shapes, dict) else \
            [tuple(s.split("=", 1)) if isinstance(s, str) else s for s in input_shapes]
        for name, d in items:
            o.set("input-shape", _shape_text(name, d))
    if dims:
        items = dims.items() if isinstance(dims, dict) else \
            [tuple(s.split("=", 1)) if isinstance(s, str) else s for s in dims]
        for sym, v in items:
            o.set("dim", "%s=%s" % (sym, v))
    if budget is not None:
        o.set("budget", budget)
    options = dict(options, train=train)
    for key, value in options.items():
        name = key.replace("_", "-")
        if value is False:
            continue  # an option turned off: as not given
        if value is None:
            o.set_default(name)
        elif isinstance(value, (list, tuple)):
            for v in value:  # repeatable: frozen, input-shape, dim
                if v is not None:
                    o.set(name, v)
        else:
            o.set(name, value)


class _Result:
    """What Plan and Comparison share: the library's result handle, the plan file it
    holds (json(), write(path)) and its lifetime (close(), or a with block)."""

    _what = "plan"

    def json(self):
        """The plan file (roam-plan v1) as text: the bytes `roamc MODEL -o FILE` writes
        (of a comparison: the ROAM row's plan)."""
        text = _lib.text(_lib.result_plan_json, self._handle())
        if text is None:
            raise Error(_lib.result_error(self._h).decode() or "no plan", 2)
        return text

    def write(self, path):
        """Writes the plan file to path, as the command writes it (all or nothing)."""
        st = _lib.result_write(self._handle(), _b(path))
        if st != _OK:
            raise Error(_lib.result_error(self._h).decode(), st)

    def _handle(self):
        if not self._h:
            raise Error("the %s was closed" % self._what, 2)
        return self._h

    def close(self):
        """Frees the library's result now (the Python fields stay)."""
        if self._h:
            _lib.result_free(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Plan(_Result):
    """A plan of one training step (roamc.plan's answer).

    status: "ok" or "does not fit" (complete, but over the budget); fits: True or False
    with a budget, None without; schedule: operator (node) indices in the order they run;
    buffers: a list of Buffer; theoretical_peak (live bytes at the busiest step),
    actual_peak (the arena: theoretical plus fragmentation; also .peak), lower_bound (of
    the theoretical peak over every schedule), persistent_bytes, device_bytes (what the
    device needs); stages: with pipeline_stages, a Stage per stage (the plan itself is
    the chosen stage's: the option stage, else the largest), else []; report: the JSON report as a dict (what `roamc MODEL --report json`
    prints); json(): the plan file's text; write(path): the plan file (and with fit or
    shard and the option emit_train, the step it plans).
    """

    def __init__(self, handle):
        self._h = handle
        r = handle
        n = _c.c_size_t()
        self.status = "ok" if _lib.result_status(r) == _OK else "does not fit"
        self.schedule = _lib.array(_lib.result_schedule(r, _c.byref(n)), n)
        offsets = _lib.array(_lib.result_offsets(r, _c.byref(n)), n)
        sizes = _lib.array(_lib.result_sizes(r, _c.byref(n)), n)
        starts = _lib.array(_lib.result_starts(r, _c.byref(n)), n)
        ends = _lib.array(_lib.result_ends(r, _c.byref(n)), n)
        pers = _lib.array(_lib.result_persistent(r, _c.byref(n)), n)
        self.buffers = [Buffer(i, (_lib.result_buffer_name(r, i) or b"").decode("utf-8", "replace"),
                               offsets[i], sizes[i], starts[i], ends[i], bool(pers[i]))
                        for i in range(len(offsets))]
        self.theoretical_peak = _lib.result_theoretical_peak(r)
        self.actual_peak = _lib.result_actual_peak(r)
        self.lower_bound = _lib.result_lower_bound(r)
        self.persistent_bytes = _lib.result_persistent_bytes(r)
        self.device_bytes = _lib.result_device_bytes(r)
        f = _lib.result_fits(r)
        self.fits = None if f < 0 else bool(f)
        text = _lib.text(_lib.result_report_json, r)
        self.report = _json.loads(text) if text else {}
        self.stages = []
        th, ac = _c.c_uint64(), _c.c_uint64()
        for i in range(_lib.result_stage_count(r)):
            _lib.result_stage_peak(r, i, _c.byref(th), _c.byref(ac))
            self.stages.append(Stage(i, th.value, ac.value))

    @property
    def peak(self):
        """The arena's size in bytes (actual_peak)."""
        return self.actual_peak

    def __repr__(self):
        return "<roamc.Plan %s: %d operators, %d buffers, peak %d, lower bound %d>" % (
            self.status, len(self.schedule), len(self.buffers), self.peak, self.lower_bound)


def plan(path, input_shapes=None, dims=None, budget=None, train=False, name=None, **options):
    """Plans the ONNX model at path (or given as bytes: name then names it) as
    `roamc MODEL` does, and returns a Plan.

    input_shapes: {input: [d1, d2, ...]} (or "NAME=D1,D2" strings); dims: {symbol: value};
    budget: bytes or a size ("16GiB"); train: derive the training step (--train).  Every
    other planning option of the command by its long name, dashes as underscores
    (order="lescea", align=256, time_limit=30, method="pytorch", fit="recompute",
    max_overhead="33%", shard="zero3", world=8, streams="comm", comm_gbps=100,
    frozen=["bert.embeddings"],
    emit_train="step.onnx", ...); True for an option without a value, a list for a
    repeatable one.  None is the default, as NULL is to roamc_options_set: an option that
    is on or off (train, fit, no_sync) is on, with its default value (fit=None: both); one
    that takes a value keeps its default (budget=None: no budget); False: off.  A plan over the budget is returned (fits False, status "does not
    fit"); every other failure raises roamc.Error.  The largest batch that fits:
    roamc.max_batch.
    """
    if options.get("max_batch", False) is not False:
        raise Error("plan makes one plan: for the largest batch that fits, call roamc.max_batch", 2)
    if options.get("compare", False) is not False:
        raise Error("plan makes one plan: to plan every method side by side, call roamc.compare", 2)
    return Plan(_run(path, input_shapes, dims, budget, train, name, options))


def _run(path, input_shapes, dims, budget, train, name, options):
    """The result handle of one roamc_plan_file / roamc_plan_bytes run."""
    with _Options() as o:
        _fill(o, input_shapes, dims, budget, train, options)
        out = _c.c_void_p()
        if isinstance(path, (bytes, bytearray, memoryview)):
            data = bytes(path)
            st = _lib.plan_bytes(o.h, data, len(data), _b(name or "(bytes)"), _c.byref(out))
        else:
            st = _lib.plan_file(o.h, _b(path), _c.byref(out))
    if st not in (_OK, _NO_FIT):
        msg = _lib.result_error(out).decode()
        _lib.result_free(out)
        raise Error(msg, st)
    return out


class MaxBatch:
    """roamc.max_batch's answer: batch (the largest batch at which roamc's plan fits the
    budget; 0: not even batch 1), pytorch_batch (the same for PyTorch's plan), fits
    (batch >= 1), report (the search's table as a dict: what `roamc MODEL --max-batch
    --report json` prints)."""

    def __init__(self, handle):
        pt = _c.c_int64()
        self.batch = _lib.result_max_batch(handle, _c.byref(pt))
        self.pytorch_batch = pt.value
        self.fits = self.batch >= 1
        text = _lib.text(_lib.result_report_json, handle)
        self.report = _json.loads(text) if text else {}

    def __repr__(self):
        return "<roamc.MaxBatch %d (PyTorch %d)>" % (self.batch, self.pytorch_batch)


def max_batch(path, budget, symbol=None, input_shapes=None, dims=None, train=False, **options):
    """The largest batch at which the plan of the model at path (a file) fits budget, and
    PyTorch's (`roamc MODEL --max-batch[=SYMBOL] --budget B`): a MaxBatch.  symbol names the
    batch dim (default: the one input symbol left unbound); the other arguments as
    roamc.plan's (pipeline_stages=P sizes the micro-batch of a pipeline, shard= one rank's
    step, fit= the changed step).  Failures raise roamc.Error."""
    options["max_batch"] = True if symbol is None else symbol
    h = _run(path, input_shapes, dims, budget, train, None, options)
    try:
        return MaxBatch(h)
    finally:
        _lib.result_free(h)


CompareRow = _namedtuple("CompareRow", "name title order layout order_ran layout_ran "
                         "theoretical_peak actual_peak fragmentation_percent "
                         "reduction_vs_pytorch_percent seconds note")
CompareRow.__doc__ = """One row of roamc.compare: the method (name as the option method spells
it, title as the command's table prints it), its order and layout, what ran (order_ran,
layout_ran: the ILPs may fall back to a heuristic, the note says why), theoretical_peak and
actual_peak in bytes (PyTorch's row: what its caching allocator reserves),
fragmentation_percent, reduction_vs_pytorch_percent (saving in actual peak), seconds (its
planning time) and note ("" or what fell back, what ran out of time)."""


def _text(b):
    return b.decode("utf-8", "replace") if b else ""


class Comparison(_Result, list):
    """roamc.compare's answer: a list of CompareRow, one per method in the order of the
    command's table (PyTorch first, ROAM last), and lower_bound (of the theoretical peak),
    persistent_bytes, report (what `roamc MODEL --compare --report json` prints, as a dict);
    row(name) finds a row by method name; json() and write(path): the ROAM row's plan file
    (what `roamc MODEL --compare -o FILE` writes)."""

    _what = "comparison"

    def __init__(self, handle):
        super().__init__()
        self._h = handle
        w = _lib.CompareRow()
        for i in range(_lib.result_compare_count(handle)):
            if _lib.result_compare_row(handle, i, _c.byref(w)) != _OK:
                raise Error("row %d of the comparison cannot be read" % i, 1)
            self.append(CompareRow(_text(w.name), _text(w.title), _text(w.order),
                                   _text(w.layout), _text(w.order_ran), _text(w.layout_ran),
                                   w.theoretical_peak, w.actual_peak, w.fragmentation_percent,
                                   w.reduction_vs_pytorch_percent, w.seconds, _text(w.note)))
        self.lower_bound = _lib.result_lower_bound(handle)
        self.persistent_bytes = _lib.result_persistent_bytes(handle)
        text = _lib.text(_lib.result_report_json, handle)
        self.report = _json.loads(text) if text else {}

    def row(self, name):
        """The row of the method name ("pytorch", "heuristics", "ilp", "roam")."""
        for w in self:
            if w.name == name:
                return w
        raise KeyError(name)

    def __repr__(self):
        return "<roamc.Comparison %s>" % ", ".join(
            "%s %d" % (w.title, w.actual_peak) for w in self)


def compare(path, input_shapes=None, dims=None, train=False, name=None, **options):
    """Plans the ONNX model at path (or given as bytes: name then names it) every way
    `roamc MODEL --compare` does (PyTorch, Heuristics, ILP, ROAM) and returns a Comparison:
    the rows, as the command's table and its --report json give them.  The other arguments
    as roamc.plan's (time_limit=S is shared among the methods, threads=N, align=B,
    emit_train with train); not with budget, method, fit, shard or pipeline_stages.
    Failures raise roamc.Error."""
    options["compare"] = True
    return Comparison(_run(path, input_shapes, dims, None, train, name, options))


_STOPS = {0: "optimal", 1: "feasible", 2: "infeasible", 3: "work", 4: "time", 5: "heuristic"}


class Layout:
    """A layout (roamc.layout's answer): offsets (one per buffer, in the order given), height
    (largest offset + rounded size), lower_bound (the live-size bound), proven_bound (what
    the exact search proved, >= lower_bound), gap ((height - proven) / proven), stop (why
    the solver stopped: optimal, feasible, infeasible, work, time, heuristic), fits (False
    when a capacity was given and not met; else True)."""

    def __init__(self, h, fits):
        n = _c.c_size_t()
        self.offsets = _lib.array(_lib.layout_offsets(h, _c.byref(n)), n)
        self.height = _lib.layout_height(h)
        self.lower_bound = _lib.layout_lower_bound(h)
        self.proven_bound = _lib.layout_proven_bound(h)
        self.gap = _lib.layout_gap(h)
        self.stop = _STOPS.get(_lib.layout_stop_reason(h), "?")
        self.fits = fits

    def __repr__(self):
        return "<roamc.Layout height %d, bound %d, gap %.4g, %s>" % (
            self.height, self.proven_bound, self.gap, self.stop)


def _buffer_fields(b, alignment):
    """(size, alignment, first, last) of one buffer as given; first and last None: no
    lifetime; its alignment None: the default alignment."""
    if isinstance(b, dict):
        first = b.get("first", b.get("start"))
        last = b.get("last", b.get("end"))
        return _buffer_checked(b["size"], b.get("alignment"), first, last, alignment)
    if isinstance(b, int):
        return b, alignment, None, None
    b = tuple(b)
    if len(b) == 3:
        return _buffer_checked(b[0], None, b[1], b[2], alignment)
    if len(b) == 4:
        return _buffer_checked(b[0], b[3], b[1], b[2], alignment)
    raise Error("a buffer is size, (size, first, last), (size, first, last, alignment) or a "
                "dict with size[, first, last, alignment], not %r" % (b,), 2)


def _buffer_checked(size, align, first, last, alignment):
    if (first is None) != (last is None):
        raise Error("a buffer's lifetime needs both first and last (or neither: no lifetime), "
                    "not first %r, last %r" % (first, last), 2)
    return size, alignment if align is None else align, first, last


def layout(buffers, capacity=None, time_limit=None, alignment=1, pinned=None, conflicts=None,
           work=None, method=None):
    """Lays out buffers in one arena (roamc_layout_*, what `roamc layout` runs).

    buffers: a list, each a size (no lifetime: it conflicts only as conflicts says),
    (size, first, last) with the closed step range it is live in, (size, first, last,
    alignment), or a dict with size and optionally first/last (or start/end) and
    alignment.  alignment: the default (a power of two).  pinned: {index: offset} fixed
    ahead of time.  conflicts: pairs (a, b) that must not share bytes besides those whose
    lifetimes meet.  capacity: the layout must fit it (a size; .fits False when it does
    not).  time_limit: seconds; work: work units of the exact search (10^7 ~ 1 s, the
    same answer on every machine); method: roam llfb greedy bestfit pytorch.  None, for
    any of them, is the default (as roamc_layout_new sets it; alignment 1).
    """
    if alignment is None:
        alignment = 1
    h = _lib.layout_new()
    try:
        def check(st):
            if st != _OK:
                raise Error(_lib.layout_error(h).decode(), st)

        for b in buffers:
            size, align, first, last = _buffer_fields(b, alignment)
            if first is None and last is None:
                check(_lib.layout_add_buffer(h, size, align, None))
            else:
                check(_lib.layout_add_interval(h, size, align, first, last, None))
        for a, b in conflicts or ():
            check(_lib.layout_add_conflict(h, a, b))
        for i, off in (pinned.items() if isinstance(pinned, dict) else pinned or ()):
            check(_lib.layout_pin(h, i, off))
        for name, v in (("capacity", capacity), ("time-limit", time_limit), ("work", work),
                        ("method", method)):
            if v is not None:
                check(_lib.layout_set(h, name.encode(), _b(v)))
        st = _lib.layout_solve(h)
        if st not in (_OK, _NO_FIT):
            check(st)
        return Layout(h, st == _OK)
    finally:
        _lib.layout_free(h)
