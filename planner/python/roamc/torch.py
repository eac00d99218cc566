"""roamc.torch: plan the training step of your own torch.nn.Module in process.

    import roamc.torch
    p = roamc.torch.plan(model, (images,), torch.nn.CrossEntropyLoss(), targets=(labels,),
                         optimizer="adam", budget="16GiB")

The step is traced by models/export.py's machinery (the same code as
`models/export.py --module FILE.py:FUNC`), on the meta device (shapes only:
nothing is allocated, values are never read), written as ONNX bytes (or to
onnx_path) and planned by roamc.plan.  The module given is not changed: the
exporter works on a copy.

export.py is taken from $ROAMC_EXPORT_PY, else the copy bundled at install,
else the checkout's models/export.py.
"""
import contextlib
import copy
import importlib.util
import io
import os
import sys

import roamc as _roamc
from roamc import Error

__all__ = ["plan", "export"]

_export_module = None


def _export_py():
    """models/export.py, imported once (as roamc._export_impl)."""
    global _export_module
    if _export_module is not None:
        return _export_module
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    candidates = [os.environ.get("ROAMC_EXPORT_PY"), os.path.join(here, "_export.py"),
                  os.path.join(checkout, "models", "export.py")]
    path = next((p for p in candidates if p and os.path.isfile(p)), None)
    if path is None:
        raise Error("roamc.torch: cannot find models/export.py (set ROAMC_EXPORT_PY to its path)", 1)
    spec = importlib.util.spec_from_file_location("roamc._export_impl", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        with _exporter_errors():
            spec.loader.exec_module(mod)
    except Error:
        raise
    _export_module = mod
    return mod


@contextlib.contextmanager
def _exporter_errors():
    """export.py reports a problem with die(): a line on stderr and SystemExit.  Here it
    becomes roamc.Error with that line; what else it prints goes on to stderr."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            yield
    except SystemExit as e:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        msg = lines[-1] if lines else "the exporter stopped (exit %s)" % e.code
        prefix = "export.py: error: "
        raise Error(msg[len(prefix):] if msg.startswith(prefix) else msg,
                    e.code if isinstance(e.code, int) else 2) from None
    else:
        sys.stderr.write(err.getvalue())


def export(module, example_inputs, loss_fn=None, optimizer="adam", targets=None, name=None,
           amp=None, grad_accum=1):
    """Traces one training step of module (loss = loss_fn(module(*example_inputs),
    *targets), or module(*example_inputs) when loss_fn is None; backward; optimizer step)
    and returns its ONNX bytes, as `models/export.py --module` writes them.

    example_inputs and targets: a tensor, a tuple/list of tensors, or a dict name -> tensor
    (the names become the graph's inputs); only their shapes and dtypes are read.
    optimizer: sgd, momentum, adam, adamw (export.py's); name: the step's roamc.model
    metadata (default the module's class name); amp ("bf16"), grad_accum: as export.py's
    --amp and --grad-accum.  None, for any keyword, is its default (optimizer adam,
    grad_accum 1, no amp, no targets).
    """
    ex = _export_py()
    optimizer = "adam" if optimizer is None else optimizer
    grad_accum = 1 if grad_accum is None else grad_accum
    spec = name or type(module).__name__
    # the exporter moves what it is given to the meta device in place: give it copies
    model = copy.deepcopy(module)
    loss = copy.deepcopy(loss_fn) if isinstance(loss_fn, ex.nn.Module) else loss_fn
    step = dict(model=model, inputs=example_inputs, loss_fn=loss)
    if targets is not None:
        step["targets"] = targets

    class _Given(ex.UserModule):
        """A UserModule whose FUNC is the objects given (no file to import)."""

        def __init__(self):  # pylint: disable=super-init-not-called
            self.spec, self.path, self.func_name = spec, "", spec
            self.func = lambda: step
            self.takes = set()

    with _exporter_errors():
        onx, _ = ex.export(_Given(), None, optimizer=optimizer, quiet=True, amp=amp,
                           grad_accum=grad_accum)
        return onx.SerializeToString(deterministic=True) if ex._has_det() \
            else onx.SerializeToString()


def plan(module, example_inputs, loss_fn=None, optimizer="adam", targets=None, name=None,
         onnx_path=None, amp=None, grad_accum=1, **plan_options):
    """Exports module's training step (export) and plans it (roamc.plan): returns a
    roamc.Plan.  onnx_path: also write the step there (atomically, as export.py does) and
    plan that file, so that the plan names it and emit_train/write work as for any file;
    else the step is planned from memory and the plan names it name (default the module's
    class name).  plan_options: roamc.plan's (budget, input_shapes, dims, and every
    planning option by name)."""
    data = export(module, example_inputs, loss_fn, optimizer, targets, name, amp, grad_accum)
    if onnx_path is None:
        return _roamc.plan(data, name=name or type(module).__name__, **plan_options)
    d = os.path.dirname(os.path.abspath(onnx_path))
    tmp = "%s.tmp" % onnx_path
    try:
        os.makedirs(d, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, onnx_path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise Error("cannot write %s: %s" % (onnx_path, e.strerror or e), 1) from None
    return _roamc.plan(onnx_path, **plan_options)
