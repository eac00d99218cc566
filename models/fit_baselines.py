#!/usr/bin/python3
"""PyTorch's own ways to make a step fit, measured (issue 27, "Baselines"):
the live-tensor peak of one training step and the FLOPs it adds, on CPU.

usage: models/fit_baselines.py --model NAME [--model NAME ...] [--batch N]
                               [--image-size S] [--seq-len L] [--layers K]
                               [--optimizer adam|adamw|sgd]
                               [--methods none,sqrt,mincut]

For each model (as models/export.py builds it: resnet50, vit_b_16, bert-base,
gpt2, ...; the same model code, CUDA-like dropout, Adam state) and each
method, one training step runs eagerly on the CPU (torch 1.13) and prints one
JSON line:

  none    the plain step (loss = model(*data); loss.backward(); opt.step());
  sqrt    torch.utils.checkpoint.checkpoint_sequential over the model's
          sequence of blocks with round(sqrt(n)) segments (Chen et al. 2016):
          resnet*: the bottleneck/basic blocks of layer1..layer4 (the stem and
          the head run outside); vit_*: the encoder layers; bert-*: the
          encoder layers; gpt2*: the transformer blocks.  As in PyTorch, the
          last segment is not checkpointed, and the RNG state is restored
          for the recompute (preserve_rng_state), so dropout masks match;
  mincut  functorch.compile.aot_module(model, nop, nop,
          partition_fn=min_cut_rematerialization_partition): the model
          (forward and loss) traced once by AOTAutograd, the joint graph cut
          by the min-cut partitioner, which decides what the backward
          recomputes.  The tracing call (and its backward) runs before the
          measured step, outside the meter.

The peak is models/fidelity.py's: every storage an ATen operator returns,
followed through a weak reference from the operator that makes it until
PyTorch frees it, rounded up to 512 B; parameters, buffers, optimizer state
and data count from the start; the peak is taken after every operator.
`peak` is the whole step's; `peak_forward`, `peak_backward` and
`peak_optimizer` the largest within each phase (checkpointing can lower the
first two only: where the optimizer's phase holds the peak, as at batch 1 of
large models, no recompute lowers the step's peak).
FLOPs: 2*m*n*k for mm/addmm/bmm/baddbmm, 2*out*Cin/groups*kernel for
convolution (and for each gradient convolution_backward computes); other
operators count 0 FLOPs, and their floating output elements are summed
apart (`fwd_bwd_other_elems`, a rough measure of pointwise work: the
min-cut partitioner recomputes mostly such operators).  `fwd_flops` is what
the forward (model call and loss) of that method counts, `fwd_bwd_flops`
forward plus backward, and `added_flops` = fwd_bwd_flops - the plain step's,
i.e. the recomputation (as % of the plain forward in `added_fwd_pct`;
`added_other_elems` likewise).  A method that cannot run
on a model prints a line with "error" saying why.

Measured (batch 1, image 224, seq 128, 12 layers; 2 shared CPU cores):
on resnet50, vit_b_16, bert-base and gpt2 the min-cut step's peak is 5-9%
ABOVE the plain step's, in the backward phase, while it adds no matrix
FLOPs (it recomputes pointwise operators only).  Not verified, but likely:
under functorch 1.13 the nop-compiled backward graph is called with all its
saved inputs at once and holds them until it returns (later PyTorch frees
them as the graph goes, "boxed" calls), so this row measures 1.13's
runtime, not only the partitioner's choice.

Keep the sizes small (the defaults: batch 1, seq 128 for BERT and GPT-2,
image 224): one step of each method runs on the CPU, a few seconds to a
minute per model on 2 cores.
"""
import argparse
import json
import math
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export as E  # noqa: E402
from fidelity import LiveBytes, round_up, untyped  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import checkpoint_sequential  # noqa: E402

aten = torch.ops.aten


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def flops_of(func, args, out):
    """FLOPs of one ATen call (matrix products and convolutions; others 0)."""
    op = func.overloadpacket
    if op in (aten.mm, aten.addmm):
        a, b = (args[0], args[1]) if op is aten.mm else (args[1], args[2])
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if op in (aten.bmm, aten.baddbmm):
        a, b = (args[0], args[1]) if op is aten.bmm else (args[1], args[2])
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if op in (aten.convolution, aten._convolution):
        x, w = args[0], args[1]
        groups = args[8] if len(args) > 8 else 1
        return 2 * _numel(out.shape) * (x.shape[1] // groups) * _numel(w.shape[2:])
    if op is aten.convolution_backward:
        # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
        #  output_padding, groups, output_mask)
        go, x, w = args[0], args[1], args[2]
        groups, mask = args[9], args[10]
        one = 2 * _numel(go.shape) * (x.shape[1] // groups) * _numel(w.shape[2:])
        return one * (int(bool(mask[0])) + int(bool(mask[1])))
    return 0


class Meter(LiveBytes):
    """fidelity.py's live-storage meter, with FLOPs per phase of the step."""

    def __init__(self):
        super().__init__()
        self.phase = "setup"
        self.flops = {}
        self.elems = {}
        self.phase_peak = {}

    def note(self, label):
        super().note(label)
        if self.current > self.phase_peak.get(self.phase, -1):
            self.phase_peak[self.phase] = self.current

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.prune()
        out = func(*args, **(kwargs or {}))
        f = flops_of(func, args, out)
        if f:
            self.flops[self.phase] = self.flops.get(self.phase, 0) + f
        else:
            # the other operators' work, roughly: one per floating output element
            n = sum(t.numel() for t in (out if isinstance(out, (list, tuple)) else [out])
                    if isinstance(t, torch.Tensor) and t.is_floating_point())
            self.elems[self.phase] = self.elems.get(self.phase, 0) + n
        op = func.overloadpacket.__name__
        for t in (out if isinstance(out, (list, tuple)) else [out]):
            self.track(t, op)
        self.ops += 1
        self.note(op)
        return out


# --------------------------------------------------------------------------- sqrt(n) checkpointing

def segments_for(n):
    return max(1, min(n, int(round(math.sqrt(n)))))


class _WithMask(nn.Module):
    """A BERT layer as a one-input block (the mask bound before each call)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.mask = None

    def forward(self, h):
        return self.layer(h, self.mask)


def _bert_forward(self, input_ids, labels):
    batch, seq = input_ids.size()
    attention_mask = torch.ones((batch, seq), device=input_ids.device)
    mask = attention_mask[:, None, None, :].to(dtype=torch.float32)
    mask = (1.0 - mask) * torch.finfo(torch.float32).min
    h = self.embeddings(input_ids)
    blocks = [_WithMask(layer) for layer in self.layers]
    for b in blocks:
        b.mask = mask
    h = checkpoint_sequential(blocks, self._segments, h)
    h = self.head_norm(F.gelu(self.head_dense(h)))
    scores = self.decoder(h)
    return F.cross_entropy(scores.view(-1, self.vocab), labels.view(-1))


def _gpt2_forward(self, input_ids, labels):
    seq = input_ids.size(-1)
    position_ids = torch.arange(0, seq, dtype=torch.long, device=input_ids.device)
    position_ids = position_ids.unsqueeze(0).view(-1, seq)
    h = self.drop(self.wte(input_ids) + self.wpe(position_ids))
    h = checkpoint_sequential(list(self.h), self._segments, h)
    h = self.ln_f(h)
    logits = self.lm_head(h)
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


def _resnet_forward(self, x):
    x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
    blocks = list(self.layer1) + list(self.layer2) + list(self.layer3) + list(self.layer4)
    x = checkpoint_sequential(blocks, self._segments, x)
    return self.fc(torch.flatten(self.avgpool(x), 1))


def _vit_forward(self, x):
    x = self._process_input(x)
    n = x.shape[0]
    x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
    enc = self.encoder
    x = enc.dropout(x + enc.pos_embedding)
    x = enc.ln(checkpoint_sequential(list(enc.layers), self._segments, x))
    return self.heads(x[:, 0])


def apply_sqrt(model, name):
    """Makes model's forward checkpoint its blocks in sqrt(n) segments; returns
    (number of blocks, segments), or raises ValueError saying why it cannot."""
    if isinstance(model, E.BertForMaskedLM):
        n, fwd, target = len(model.layers), _bert_forward, model
    elif isinstance(model, E.GPT2LMHeadModel):
        n, fwd, target = len(model.h), _gpt2_forward, model
    elif isinstance(model, E.VisionClassifier) and all(hasattr(model.net, k) for k in
                                                       ("layer1", "layer4", "conv1", "maxpool", "fc")):
        net = model.net
        n = sum(len(getattr(net, k)) for k in ("layer1", "layer2", "layer3", "layer4"))
        fwd, target = _resnet_forward, net
    elif isinstance(model, E.VisionClassifier) and hasattr(model.net, "encoder") and \
            hasattr(model.net, "_process_input"):
        n, fwd, target = len(model.net.encoder.layers), _vit_forward, model.net
    else:
        raise ValueError("no sequence of blocks known for %s (known: resnet*, vit_*, bert-*, gpt2*)" % name)
    target._segments = segments_for(n)
    target.forward = types.MethodType(fwd, target)
    return n, target._segments


# --------------------------------------------------------------------------- one step

def build(name, batch, image_size, seq_len, optimizer):
    torch.manual_seed(0)
    model, data, _ = E.build(name, batch, image_size, seq_len, device="cpu")
    model.train()
    params = list(model.parameters())
    opt, states = E.make_optimizer(optimizer, params)
    return model, [t for _, t in data], params, opt, states


def measure(name, method, batch, image_size, seq_len, optimizer):
    model, data, params, opt, states = build(name, batch, image_size, seq_len, optimizer)
    info = {}
    runner = model
    if method == "sqrt":
        info["blocks"], info["segments"] = apply_sqrt(model, name)
    elif method == "mincut":
        from functorch.compile import aot_module, min_cut_rematerialization_partition, nop
        runner = aot_module(model, fw_compiler=nop, bw_compiler=nop,
                            partition_fn=min_cut_rematerialization_partition)
        t0 = time.time()
        with E.cuda_like_dropout(), E.no_record_function():
            runner(*data).backward()  # traces and partitions; not measured
        for p in params:
            p.grad = None
        info["trace_s"] = round(time.time() - t0, 2)
    m = Meter()
    for t in data:
        m.track(t, "data")
    for p in params:
        m.track(p, "param")
    for b in model.buffers():
        m.track(b, "buffer")
    for st in states:
        for _, t in st:
            m.track(t, "state")
    persistent = m.current
    m.note("start")
    t0 = time.time()
    with E.cuda_like_dropout(), E.no_record_function(), m:
        m.phase = "forward"
        loss = runner(*data)
        m.phase = "backward"
        loss.backward()
        m.phase = "optimizer"
        opt.step()
    info["step_s"] = round(time.time() - t0, 2)
    del loss
    fwd = m.flops.get("forward", 0)
    return dict(info, peak=m.peak, persistent=persistent, peak_above_persistent=m.peak - persistent,
                peak_op=m.peak_at[1] if m.peak_at else None,
                peak_forward=m.phase_peak.get("forward", 0), peak_backward=m.phase_peak.get("backward", 0),
                peak_optimizer=m.phase_peak.get("optimizer", 0), ops=m.ops, fwd_flops=fwd,
                fwd_bwd_flops=fwd + m.flops.get("backward", 0),
                fwd_bwd_other_elems=m.elems.get("forward", 0) + m.elems.get("backward", 0))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fit_baselines.py", description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--seq-len", type=int, default=128, help="BERT and GPT-2 (default 128)")
    ap.add_argument("--layers", type=int, default=None, help="BERT/GPT-2: this many layers")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    ap.add_argument("--methods", default="none,sqrt,mincut")
    a = ap.parse_args(argv)
    methods = [x for x in a.methods.split(",") if x]
    for x in methods:
        if x not in ("none", "sqrt", "mincut"):
            ap.error("unknown method %r (none, sqrt, mincut)" % x)
    if "none" not in methods:
        methods.insert(0, "none")  # the others are measured against it
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    if a.layers:
        for cfgs in (E.BERT_CONFIGS, E.GPT2_CONFIGS):
            for c in cfgs.values():
                c["layers"], c["layers_set"] = a.layers, True
    rc = 0
    for name in a.model:
        base = None
        for method in methods:
            row = dict(model=name, method=method, batch=a.batch, torch=torch.__version__.split("+")[0],
                       device="cpu", optimizer=a.optimizer)
            if name in E.BERT_CONFIGS or name in E.GPT2_CONFIGS:
                row["seq_len"] = a.seq_len
                if a.layers:
                    row["layers"] = a.layers
            else:
                row["image_size"] = a.image_size
            try:
                r = measure(name, method, a.batch, a.image_size, a.seq_len, a.optimizer)
            except Exception as e:  # a baseline that cannot run on this model says why
                row["error"] = "%s: %s" % (type(e).__name__, str(e).strip().split("\n")[0][:300])
                if method == "none":
                    rc = 1
                print(json.dumps(row), flush=True)
                continue
            row.update(r)
            if method == "none":
                base = r
            elif base is not None:
                row["added_flops"] = r["fwd_bwd_flops"] - base["fwd_bwd_flops"]
                row["added_fwd_pct"] = round(100.0 * row["added_flops"] / base["fwd_flops"], 2) \
                    if base["fwd_flops"] else None
                row["added_other_elems"] = r["fwd_bwd_other_elems"] - base["fwd_bwd_other_elems"]
                row["peak_vs_none_pct"] = round(100.0 * (r["peak"] - base["peak"]) / base["peak"], 2)
            print(json.dumps(row), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
