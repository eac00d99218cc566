#!/usr/bin/python3
"""Runs real training set-ups on this CPU and reports each rank's peak of live tensor bytes.

usage: models/dist_harness.py [--model M[,M...]] [--setup S[,S...]] [--world N[,N...]]
                              [--batch B] [--microbatches M] [--grad-accum K]
                              [--bucket-cap-mb MB] [--optimizer adam|adamw|sgd]

Set-ups (--setup):
  single      one process, fp32: the step models/export.py traces (the reference)
  amp-bf16    one process, forward and loss under torch.autocast('cpu', bfloat16)
  grad-accum  one process, K microbatches (--grad-accum, default 4), one optimizer step
  ddp         N processes (--world), DistributedDataParallel on gloo (bucket_cap_mb 25)
  zero1       N processes, DDP + torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO-1)
  fsdp        N processes, FullyShardedDataParallel (torch 1.13 on CPU: see the README)
  pipeline    2 processes, one stage each, 1F1B over M microbatches (--microbatches,
              default 4), activations and their gradients exchanged with send/recv,
              each microbatch's loss divided by M; GPT-2's tied embedding kept by both
              stages, its gradients all-reduced between them before the update

Models (--model): mlp3, gpt2-tiny (the 2-layer transformer of models/export.py),
resnet50, gpt2-4l (GPT-2 with 4 layers); --batch is the (micro)batch per rank.

How a rank is measured: as models/fidelity.py measures one process.  A
TorchDispatchMode follows every storage an ATen operator returns through a weak
reference to its StorageImpl until PyTorch frees it (nbytes rounded up to 512 B);
parameters, buffers and the data inputs count from the start.  The mode is on
from before the set-up is built (so DDP's bucket tensors, made by ATen operators
in its C++ reducer, are seen), through one warm-up step (it creates the optimizer
state, as the exporter's steady-state step assumes, and lets DDP rebuild its
buckets), then gradients are set to None and the measured step runs: its peak is
the largest sum of live storages after any operator.  Not seen: memory that is not
a tensor storage (gloo's own transport buffers, allocator caching, the Python heap).

At the peak, the live storages are split into: parameters (and buffers),
gradients (what .grad holds then), optimizer_state, data (the rank's inputs),
communication (DDP's buckets and anything else the framework held before the step
began; the pipeline's receive buffers) and activations (everything else:
activations, saved tensors, temporaries).

Output: one JSON line per (model, set-up, world, rank), in that order.  Every
random choice is seeded (the peaks do not depend on values), each process uses
one thread.  Exit status 0; a set-up that torch 1.13 cannot run on this CPU
gives a line with "error" (what PyTorch said) and no peak.
"""
import argparse
import json
import os
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export as E    # noqa: E402
import fidelity as FID  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402,F401

MODELS = {
    "mlp3": dict(model="mlp3", batch=32),
    "gpt2-tiny": dict(model="gpt2-tiny", batch=4),
    "resnet50": dict(model="resnet50", batch=2, image_size=224),
    "gpt2-4l": dict(model="gpt2", layers=4, batch=1, seq_len=128),
}
SETUPS = ("single", "amp-bf16", "grad-accum", "ddp", "zero1", "fsdp", "pipeline")
MULTI = ("ddp", "zero1", "fsdp")
# Warm-up steps before the measured one: the first creates the optimizer state, DDP
# rebuilds its buckets (in the order gradients became ready) in the second one's forward.
WARMUP = 2
CATEGORIES = ("parameters", "gradients", "optimizer_state", "data", "communication", "activations")


def build(spec, device="cpu"):
    """The model and one microbatch of data, as export.build makes them."""
    name = spec["model"]
    if spec.get("layers"):
        E.GPT2_CONFIGS[name] = dict(E.GPT2_CONFIGS[name], layers=spec["layers"])
    return E.build(name, spec["batch"], spec.get("image_size", 224), spec.get("seq_len"),
                   device=device)


def fresh_data(data, seed):
    """Data of the same shapes with values drawn from `seed` (each rank its own)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n, t in data:
        if t.is_floating_point():
            out.append((n, torch.randn(t.shape, generator=g, dtype=t.dtype)))
        else:
            hi = int(t.max()) + 1 if t.numel() else 1
            out.append((n, torch.randint(0, max(hi, 2), t.shape, generator=g, dtype=t.dtype)))
    return out


class Meter(FID.LiveBytes):
    """fidelity.LiveBytes that measures only between begin() and end() and splits the
    peak by category (see the module docstring)."""

    def __init__(self):
        super().__init__()
        self.measuring = False
        self.fixed = {}        # storage key -> category known in advance
        self.grad_keys = lambda: set()
        self.split = None

    def prune(self):
        dead = [k for k, (w, _, _) in self.live.items() if w.expired()]
        for k in dead:
            self.current -= self.live.pop(k)[1]
            self.fixed.pop(k, None)   # the address may come back as another storage

    def mark(self, t, category):
        """Files a storage already tracked (made by an operator) under `category`."""
        self.fixed[FID.untyped(t)._cdata] = category

    def track_as(self, t, category):
        self.track(t, category)
        self.fixed[FID.untyped(t)._cdata] = category

    def begin(self, state_tensors):
        self.prune()
        for t in state_tensors:
            self.track_as(t, "optimizer_state")
        self.held = {}
        for k, (_, size, label) in self.live.items():
            if k not in self.fixed:   # held by the framework before the step (DDP's buckets)
                self.fixed[k] = "communication"
                self.held[label] = self.held.get(label, 0) + size
        self.measuring = True
        self.peak, self.peak_at, self.ops = self.current, (0, "start"), 0
        self.start = self.current
        self.split = self.snapshot()

    def end(self):
        self.prune()
        self.measuring = False
        self.end_bytes = self.current

    def snapshot(self):
        grads = self.grad_keys()
        split = dict((c, 0) for c in CATEGORIES)
        for k, (w, size, _) in self.live.items():
            if w.expired():
                continue
            if k in grads:
                c = "gradients"
            else:
                c = self.fixed.get(k, "activations")
            split[c] += size
        return split

    def note(self, label):
        if self.measuring and self.current > self.peak:
            self.peak, self.peak_at = self.current, (self.ops, label)
            self.split = self.snapshot()


def storage_keys(tensors):
    out = set()
    for t in tensors:
        if t is not None and isinstance(t, torch.Tensor) and t.device.type != "meta":
            out.add(FID.untyped(t)._cdata)
    return out


def state_tensors(opt):
    """Every tensor of an optimizer's state (ZeroRedundancyOptimizer: its local shard's)."""
    inner = getattr(opt, "optim", opt)
    return [v for st in inner.state.values() for v in st.values() if isinstance(v, torch.Tensor)]


def make_opt(kind, params):
    """The exporter's optimizers (export.make_optimizer) without pre-made state: the warm-up
    step creates it."""
    cls, kw = opt_class(kind)
    return cls(params, **kw)


def opt_class(kind):
    return {"adam": (torch.optim.Adam, dict(lr=1e-3, foreach=False)),
            "adamw": (torch.optim.AdamW, dict(lr=1e-3, weight_decay=1e-2, foreach=False)),
            "sgd": (torch.optim.SGD, dict(lr=1e-2, momentum=0.9, foreach=False))}[kind]


# ---------------------------------------------------------------------------
# Pipeline stages: the model cut in two, each half with its own parameters.
# ---------------------------------------------------------------------------

class Stage(nn.Module):
    def __init__(self, parts, fn):
        super().__init__()
        self.parts = nn.ModuleDict(parts)
        self.fn = fn

    def forward(self, *x):
        return self.fn(self.parts, *x)


def split_stages(spec, model):
    """(stage 0, stage 1): stage 0 takes the data inputs but the last, stage 1 the
    activation and the last data input (target / labels) and returns the loss."""
    name = spec["model"]
    if name == "mlp3":
        s0 = Stage(dict(fc1=model.fc1, fc2=model.fc2),
                   lambda p, x: F.relu(p["fc2"](F.relu(p["fc1"](x)))))
        s1 = Stage(dict(fc3=model.fc3), lambda p, h, t: F.cross_entropy(p["fc3"](h), t))
        return s0, s1
    if name in E.GPT2_CONFIGS:
        k = len(model.h) // 2

        def f0(p, ids):
            seq = ids.size(-1)
            pos = torch.arange(0, seq, dtype=torch.long, device=ids.device).unsqueeze(0).view(-1, seq)
            h = p["drop"](p["wte"](ids) + p["wpe"](pos))
            for b in p["h"]:
                h = b(h)
            return h

        def f1(p, h, labels):
            for b in p["h"]:
                h = b(h)
            logits = p["lm_head"](p["ln_f"](h))
            sl = logits[..., :-1, :].contiguous()
            return F.cross_entropy(sl.view(-1, sl.size(-1)), labels[..., 1:].contiguous().view(-1))
        head = nn.Linear(model.lm_head.in_features, model.lm_head.out_features, bias=False)
        head.weight = nn.Parameter(model.wte.weight.detach().clone())  # the last stage's copy
        s0 = Stage(dict(wte=model.wte, wpe=model.wpe, drop=model.drop, h=model.h[:k]), f0)
        s1 = Stage(dict(h=model.h[k:], ln_f=model.ln_f, lm_head=head), f1)
        # the tied embedding: each stage's copy, whose gradients are all-reduced before
        # the update (Megatron's embedding group; roamc's "<P>.grad.all_reduce")
        s0.tied, s1.tied = [model.wte.weight], [head.weight]
        return s0, s1
    if name == "resnet50":
        r = model.net
        s0 = Stage(dict(stem=nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2)),
                   lambda p, x: p["stem"](x))
        s1 = Stage(dict(l3=r.layer3, l4=r.layer4, pool=r.avgpool, fc=r.fc),
                   lambda p, h, t: F.cross_entropy(
                       p["fc"](torch.flatten(p["pool"](p["l4"](p["l3"](h))), 1)), t))
        return s0, s1
    raise ValueError("no pipeline split for %s" % name)


def one_f_one_b(stage, stages, m):
    """The 1F1B order of one stage: warm-up forwards, then forward/backward pairs, then
    the remaining backwards (PipeDream-Flush / Megatron's non-interleaved schedule)."""
    warm = min(stages - stage - 1, m)
    order = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", i) for i in range(m - warm, m)]
    return order


# ---------------------------------------------------------------------------
# One rank.
# ---------------------------------------------------------------------------

def rank_main(rank, world, spec, setup, a, port, queue):
    t0 = time.time()
    torch.set_num_threads(1)
    rec = dict(model=spec["name"], setup=setup, world=world, rank=rank, batch=spec["batch"])
    try:
        if setup in MULTI or setup == "pipeline":
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(port)
            dist.init_process_group("gloo", rank=rank, world_size=world)
        rec.update(run_rank(rank, world, spec, setup, a))
    except Exception as e:
        rec["error"] = "%s: %s" % (type(e).__name__, str(e).strip().split("\n")[0])
        rec["where"] = traceback.format_exc().strip().split("\n")[-3].strip()
    rec["seconds"] = round(time.time() - t0, 2)
    queue.put(rec)
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def run_rank(rank, world, spec, setup, a):
    torch.manual_seed(0)   # the same initial model on every rank
    model, data, _ = build(spec)
    model.train()
    data = fresh_data(data, 1000 + rank)
    meter = Meter()
    out = {}
    if setup == "pipeline":
        return run_pipeline(rank, world, spec, model, data, meter, a)
    if setup == "grad-accum":
        data = fresh_data(FID.microbatches(data, a.grad_accum), 1000 + rank)
        out["grad_accum"] = a.grad_accum
    for _, t in data:
        meter.track_as(t, "data")
    for p in model.parameters():
        meter.track_as(p, "parameters")
    for b in model.buffers():
        meter.track_as(b, "parameters")
    params = list(model.parameters())
    meter.grad_keys = lambda: storage_keys(p.grad for p in params)
    tensors = [t for _, t in data]
    with E.cuda_like_dropout(), meter:
        net = model
        if setup in ("ddp", "zero1"):
            from torch.nn.parallel import DistributedDataParallel as DDP
            # gloo cannot broadcast bool tensors ("Invalid scalar type"): GPT-2's causal
            # masks (constant, the same on every rank) are left out of DDP's buffer sync
            DDP._set_params_and_buffers_to_ignore_for_model(
                model, [n for n, b in model.named_buffers() if b.dtype == torch.bool])
            net = DDP(model, bucket_cap_mb=a.bucket_cap_mb)
            out["bucket_cap_mb"] = a.bucket_cap_mb
        if setup == "fsdp":
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            net = FSDP(model)
            params = list(net.parameters())
            meter.grad_keys = lambda: storage_keys(p.grad for p in params)
        if setup == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            cls, kw = opt_class(a.optimizer)
            opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=cls, **kw)
        else:
            opt = make_opt(a.optimizer, list(net.parameters()))
        amp = "bf16" if setup == "amp-bf16" else None
        k = a.grad_accum if setup == "grad-accum" else 1
        batches = FID.split_microbatches(tensors, k)
        for step in range(WARMUP + 1):     # warm-up steps, then the measured one
            if step == WARMUP:
                for p in net.parameters():
                    p.grad = None
                meter.begin(state_tensors(opt))
            loss = E.training_step(net, batches, opt, amp, k)
            del loss
        meter.end()
    out.update(result(meter))
    return out


def result(meter):
    return dict(peak_bytes=meter.peak, peak_after_op=meter.peak_at[0], peak_op=meter.peak_at[1],
                ops=meter.ops, start_bytes=meter.start, end_bytes=meter.end_bytes,
                split=meter.split, held_before_step=meter.held)


def run_pipeline(rank, world, spec, model, data, meter, a):
    m = a.microbatches
    s0, s1 = split_stages(spec, model)
    stage = s0 if rank == 0 else s1
    # every microbatch's data, made before the step as a data loader would have it ready
    micro = [fresh_data(data, 2000 + i) for i in range(m)]
    with torch.no_grad():
        act = s0(*[t for _, t in micro[0][:-1]])
    act_shape, act_dtype = act.shape, act.dtype
    del act, model
    mine = [[t for _, t in d[:-1]] for d in micro] if rank == 0 else [[d[-1][1]] for d in micro]
    for d in mine:
        for t in d:
            meter.track_as(t, "data")
    params = list(stage.parameters())
    for p in params:
        meter.track_as(p, "parameters")
    for b in stage.buffers():
        meter.track_as(b, "parameters")
    meter.grad_keys = lambda: storage_keys(p.grad for p in params)
    opt = make_opt(a.optimizer, params)
    with E.cuda_like_dropout(), meter:
        for step in range(WARMUP + 1):
            if step == WARMUP:
                for p in params:
                    p.grad = None
                meter.begin(state_tensors(opt))
            pipeline_step(rank, stage, opt, mine, m, act_shape, act_dtype, meter)
        meter.end()
    out = dict(microbatches=m, schedule="1f1b", stage=rank)
    out.update(result(meter))
    return out


def pipeline_step(rank, stage, opt, mine, m, act_shape, act_dtype, meter):
    """One step of the 2-stage 1F1B schedule.  Each task first receives what it needs
    (blocking), then waits for the sends of the task before it and lets their tensors
    go, as Megatron's p2p communication waits on its sends with the next receive; so a
    sent tensor is held until the next task's receive has completed, and the last
    stage keeps only the gradient it sends (input.grad), not the received input."""
    held, sends = {}, []

    def settle():
        for h, _ in sends:
            h.wait()
        sends.clear()

    for kind, i in one_f_one_b(rank, 2, m):
        if kind == "F":
            if rank == 0:
                settle()
                out = stage(*mine[i])
                held[i] = out
                sends.append((dist.isend(out.detach(), 1), out))
                del out
            else:
                buf = torch.empty(act_shape, dtype=act_dtype)
                meter.mark(buf, "communication")
                dist.recv(buf, 0)
                settle()
                buf.requires_grad_()
                held[i] = (buf, stage(buf, *mine[i]) / m)
                del buf
        else:
            if rank == 1:
                settle()
                buf, loss = held.pop(i)
                loss.backward()
                g = buf.grad
                buf.grad = None
                del buf, loss
                sends.append((dist.isend(g, 0), g))
                del g
            else:
                g = torch.empty(act_shape, dtype=act_dtype)
                meter.mark(g, "communication")
                dist.recv(g, 1)
                settle()
                held.pop(i).backward(g)
                del g
    settle()
    # a tied parameter's copies: their gradients summed in place before the update, as
    # Megatron all-reduces the embedding group's (pipeline.h; both stages take part)
    for p in getattr(stage, "tied", []):
        dist.all_reduce(p.grad)
    opt.step()


# ---------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_setup(spec, setup, world, a):
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, world, spec, setup, a, port, q))
             for r in range(world)]
    for p in procs:
        p.start()
    recs = []
    deadline = time.time() + a.timeout
    import queue as _q
    while len(recs) < world and time.time() < deadline:
        try:
            recs.append(q.get(timeout=1.0))
        except _q.Empty:
            if all(not p.is_alive() for p in procs) and q.empty():
                break
    for p in procs:
        p.join(timeout=max(1.0, deadline - time.time()))
        if p.is_alive():
            p.kill()
    got = {r["rank"] for r in recs}
    for r in range(world):
        if r not in got:
            recs.append(dict(model=spec["name"], setup=setup, world=world, rank=r,
                             batch=spec["batch"], error="no result (timed out after %ds or the "
                             "process died)" % a.timeout))
    return sorted(recs, key=lambda r: r["rank"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mlp3,gpt2-tiny",
                    help="comma-separated: %s" % ", ".join(MODELS))
    ap.add_argument("--setup", default=",".join(SETUPS), help="comma-separated: %s" % ", ".join(SETUPS))
    ap.add_argument("--world", default="2,4", help="process counts for ddp/zero1/fsdp (default 2,4)")
    ap.add_argument("--batch", type=int, default=None, help="(micro)batch per rank (default per model)")
    ap.add_argument("--microbatches", type=int, default=4, help="pipeline microbatches (default 4)")
    ap.add_argument("--grad-accum", type=int, default=4, help="grad-accum microbatches (default 4)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25, help="DDP bucket size (default 25)")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    ap.add_argument("--timeout", type=int, default=600, help="seconds per set-up (default 600)")
    a = ap.parse_args(argv)
    models = a.model.split(",")
    setups = a.setup.split(",")
    for mname in models:
        if mname not in MODELS:
            ap.error("unknown model %r (%s)" % (mname, ", ".join(MODELS)))
    for s in setups:
        if s not in SETUPS:
            ap.error("unknown set-up %r (%s)" % (s, ", ".join(SETUPS)))
    worlds = [int(w) for w in a.world.split(",")]
    if any(w < 1 for w in worlds) or a.microbatches < 1 or a.grad_accum < 1:
        ap.error("--world, --microbatches and --grad-accum must be >= 1")
    for mname in models:
        spec = dict(MODELS[mname], name=mname)
        if a.batch is not None:
            spec["batch"] = a.batch
        for s in setups:
            ws = worlds if s in MULTI else [2] if s == "pipeline" else [1]
            for w in ws:
                for rec in run_setup(spec, s, w, a):
                    print(json.dumps(rec, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
