#!/usr/bin/python3
"""Fidelity check: PyTorch's own live-tensor peak vs the exported graph's
program-order theoretical peak.

usage: models/fidelity.py --model NAME [--batch N] [--image-size S] [--seq-len L]
                          [--optimizer adam|adamw|sgd] [--amp bf16] [--grad-accum K]
                          [--onnx FILE] [--json]

Runs the same training step that models/export.py traces (same model code, same
CUDA-like dropout, same steady-state optimizer state, grads starting as None),
but eagerly on CPU with real tensors, under a TorchDispatchMode that follows
every storage an ATen operator returns through a weak reference to the
StorageImpl (torch.multiprocessing.reductions.StorageWeakRef): a storage counts
from the operator that creates it until PyTorch really frees it.  Sizes are
storage nbytes rounded up to 512 B, like the CUDA caching allocator and like
models/peak.py.  Parameters, buffers, optimizer state and the data inputs count
from the start.  The peak is taken right after each operator (its inputs and
its outputs both live), which is what "live at step s" means in DESIGN.md.

It then exports the graph (or reads --onnx) and prints both peaks and the gap.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export as E  # noqa: E402
import peak as P    # noqa: E402

import torch  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


def round_up(n, align=512):
    return (n + align - 1) // align * align


def untyped(t):
    s = t.storage()
    return getattr(s, "_storage", s)


class LiveBytes(TorchDispatchMode):
    def __init__(self):
        self.live = {}   # StorageImpl address -> (weak ref, bytes, label)
        self.current = 0
        self.peak = 0
        self.peak_at = None
        self.ops = 0
        self.series = []

    def track(self, t, label):
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        u = untyped(t)
        key = u._cdata
        old = self.live.get(key)
        if old is not None and not old[0].expired():
            return
        size = round_up(u.nbytes())
        self.live[key] = (StorageWeakRef(u), size, label)
        self.current += size

    def prune(self):
        dead = [k for k, (w, _, _) in self.live.items() if w.expired()]
        for k in dead:
            self.current -= self.live.pop(k)[1]

    def note(self, label):
        if self.current > self.peak:
            self.peak, self.peak_at = self.current, (self.ops, label)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.prune()
        out = func(*args, **(kwargs or {}))
        op = func.overloadpacket.__name__
        for t in (out if isinstance(out, (list, tuple)) else [out]):
            self.track(t, op)
        self.ops += 1
        self.series.append(self.current)
        self.note(op)
        return out


def microbatches(data, grad_accum):
    """K microbatches shaped like `data` (the first is `data` itself), named as the
    exporter names them (export.microbatch_names)."""
    if grad_accum <= 1:
        return data
    out = list(data)
    for _ in range(1, grad_accum):
        for _, t in data:
            out.append((None, torch.randint_like(t, 0, 10) if not t.is_floating_point()
                        else torch.randn_like(t)))
    names = E.microbatch_names([n for n, _ in data], grad_accum)
    return [(n, t) for n, (_, t) in zip(names, out)]


def split_microbatches(tensors, grad_accum):
    if grad_accum <= 1:
        return tensors
    per = len(tensors) // grad_accum
    return [tensors[k * per:(k + 1) * per] for k in range(grad_accum)]


def eager_peak(name, batch, image_size, seq_len, optimizer, amp=None, grad_accum=1):
    torch.manual_seed(0)
    model, data, _ = E.build(name, batch, image_size, seq_len, device="cpu")
    data = microbatches(data, grad_accum)
    model.train()
    params = list(model.parameters())
    opt, states = E.make_optimizer(optimizer, params)
    mode = LiveBytes()
    for _, t in data:
        mode.track(t, "data")
    for p in params:
        mode.track(p, "param")
    for b in model.buffers():
        mode.track(b, "buffer")
    for st in states:
        for _, t in st:
            mode.track(t, "state")
    persistent = mode.current
    mode.note("start")
    with E.cuda_like_dropout(), E.no_record_function(), mode:
        loss = E.training_step(model, split_microbatches([t for _, t in data], grad_accum), opt,
                               amp, grad_accum)
    mode.prune()
    end = mode.current
    del loss
    return dict(peak=mode.peak, peak_at=mode.peak_at, ops=mode.ops, start=persistent,
                end=end, grads=sum(round_up(untyped(p.grad).nbytes()) for p in params
                                   if p.grad is not None))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--seq-len", type=int, default=None)
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    ap.add_argument("--amp", choices=["bf16"], default=None,
                    help="run the forward and the loss under torch.autocast('cpu', bfloat16)")
    ap.add_argument("--grad-accum", type=int, default=1, metavar="K",
                    help="K microbatches of --batch, one optimizer step")
    ap.add_argument("--onnx", help="exported graph of the same configuration (default: export now)")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the text")
    a = ap.parse_args(argv)

    t0 = time.time()
    e = eager_peak(a.model, a.batch, a.image_size, a.seq_len, a.optimizer, a.amp, a.grad_accum)
    t_eager = time.time() - t0
    path = a.onnx
    tmp = None
    if path is None:
        onx, _ = E.export(a.model, a.batch, a.image_size, a.seq_len, a.optimizer, amp=a.amp,
                          grad_accum=a.grad_accum)
        tmp = tempfile.NamedTemporaryFile(suffix=".onnx", delete=False)
        tmp.close()
        E.write(onx, tmp.name)
        path = tmp.name
    g = P.analyse(path)
    gk = P.analyse(path, keep_grads=True)
    if tmp:
        os.unlink(tmp.name)
    gap = 100.0 * (e["peak"] - g["theoretical_peak"]) / g["theoretical_peak"]
    if a.json:
        import json
        print(json.dumps(dict(model=a.model, batch=a.batch, optimizer=a.optimizer,
                              amp=a.amp, grad_accum=a.grad_accum, eager_peak=e["peak"],
                              graph_peak=g["theoretical_peak"],
                              graph_peak_keep_grads=gk["theoretical_peak"],
                              eager_start=e["start"], eager_end=e["end"])))
        return 0
    print("%s batch %d (%s): PyTorch eager CPU live-storage peak %d B (%.2f MB) after op %d/%d (%s); "
          "graph program-order theoretical peak %d B (%.2f MB) at step %d/%d (%s); gap %+.2f%%"
          % (a.model, a.batch, a.optimizer, e["peak"], e["peak"] / 1e6, e["peak_at"][0], e["ops"],
             e["peak_at"][1], g["theoretical_peak"], g["theoretical_peak"] / 1e6, g["peak_step"],
             g["operators"], g["peak_op"], gap))
    print("  graph with gradients kept to the end of the step (as .grad does): %d B (%.2f MB) at "
          "step %d (%s); gap %+.2f%%" % (gk["theoretical_peak"], gk["theoretical_peak"] / 1e6,
                                         gk["peak_step"], gk["peak_op"],
                                         100.0 * (e["peak"] - gk["theoretical_peak"])
                                         / gk["theoretical_peak"]))
    print("  eager: %.2f MB live at the start (params, buffers, optimizer state, data), %.2f MB at "
          "the end, of which %.2f MB are gradients still held by .grad; eager run %.1fs"
          % (e["start"] / 1e6, e["end"] / 1e6, e["grads"] / 1e6, t_eager))
    return 0


if __name__ == "__main__":
    sys.exit(main())
