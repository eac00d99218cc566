#!/usr/bin/python3
"""Compare the two routes to a training step: `roamc --train` on a forward-only
ONNX file (torch.onnx.export in training mode) and roamc on the training graph
that models/export.py traces from the same model code.

usage:
  models/train_compare.py [--roamc PATH] [--dir DIR] [--orders program,roam]
                          [--optimizer adam] [--dynamic] SPEC...
  SPEC = MODEL:BATCH[,BATCH...][:layers=N][:seq=L][:image=S]
         e.g. resnet18:1,32 bert-base:8:layers=2

For each SPEC it writes DIR/STEM_fwd.onnx (forward only: the model's logits,
the loss left out), DIR/STEM_train.onnx (export.py) and DIR/STEM_derived.onnx
(--emit-train), plans both routes with each order, and prints one table row:
theoretical peak, persistent bytes and their relative difference, and whether
the parameter, gradient and optimizer-state bytes (from each file's roamc.*
metadata) are equal.

--dynamic: the forward file is exported once per model with a dynamic batch
(and, for BERT/GPT-2, a dynamic sequence: dim_params 'batch' and 'seq', traced
at batch 2, sequence 16) and planned at each batch with roamc --dim, as a
model hub's file would be.  efficientnet_* (torchvision's StochasticDepth
calls bernoulli_(p), which torch.onnx 1.13 refuses in training mode:
"Unsupported: ONNX export of operator Bernoulli, out parameter is not
supported for bernoulli") is exported with a custom symbolic for
aten::bernoulli registered through torch.onnx.register_custom_op_symbolic:
RandomUniformLike + Less + Cast, i.e. the same Bernoulli mask.
Runs with Debian's /usr/bin/python3 (torch 1.13, onnx); needs no network.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export as ex  # noqa: E402  (models/export.py: the model code and the tracer)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class _LogitsOnly:
    """The exporter's models end in F.cross_entropy(logits, labels); while this is
    active cross_entropy returns the logits, so the module's forward is the model
    without its loss (what a model hub's forward-only file holds)."""

    def __enter__(self):
        self.saved = F.cross_entropy
        F.cross_entropy = lambda input, target, *a, **k: input
        return self

    def __exit__(self, *exc):
        F.cross_entropy = self.saved


class _Forward(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x, x)  # the labels argument feeds only the (removed) loss


def parse_spec(s):
    parts = s.split(":")
    if len(parts) < 2:
        ex.die("spec %r: want MODEL:BATCH[,BATCH...][:layers=N][:seq=L][:image=S]" % s)
    spec = dict(model=parts[0], batches=[int(b) for b in parts[1].split(",")], layers=None,
                seq=None, image=224)
    for p in parts[2:]:
        k, _, v = p.partition("=")
        if k not in ("layers", "seq", "image"):
            ex.die("spec %r: unknown key %r" % (s, k))
        spec[k] = int(v)
    return spec


def set_layers(name, layers):
    for cfgs in (ex.BERT_CONFIGS, ex.GPT2_CONFIGS):
        if name in cfgs and layers:
            cfgs[name] = dict(cfgs[name], layers=layers, layers_set=True)


def _bernoulli_symbolic(g, input, p=None, generator=None, out=None):
    """aten::bernoulli(self, float p) as ONNX ops: (RandomUniformLike(self) < p) as float.
    torch.onnx 1.13's own symbolic refuses the form that bernoulli_(p) becomes."""
    r = g.op("RandomUniformLike", input)
    return g.op("Cast", g.op("Less", r, p), to_i=1)  # 1 = FLOAT


_SYMBOLICS = []


def register_bernoulli():
    if not _SYMBOLICS:
        torch.onnx.register_custom_op_symbolic("aten::bernoulli", _bernoulli_symbolic, 17)
        _SYMBOLICS.append(1)


def is_transformer(name):
    return name in ex.BERT_CONFIGS or name in ex.GPT2_CONFIGS


def export_forward(spec, batch, path, dynamic=False):
    torch.manual_seed(0)
    seq = spec["seq"]
    if dynamic and is_transformer(spec["model"]):
        seq = 16  # traced small; the file's 'seq' dim is bound with --dim at planning time
    model, data, _ = ex.build(spec["model"], 2 if dynamic else batch, spec["image"], seq, device="cpu")
    model.train()
    x = data[0][1]
    axes = None
    if dynamic:
        axes = {data[0][0]: {0: "batch"}, "logits": {0: "batch"}}
        if is_transformer(spec["model"]):
            axes = {data[0][0]: {0: "batch", 1: "seq"}, "logits": {0: "batch_x_seq"}}
    if spec["model"].startswith("efficientnet"):
        register_bernoulli()
    with _LogitsOnly():
        torch.onnx.export(_Forward(model), (x,), path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=[data[0][0]], output_names=["logits"], dynamic_axes=axes)


def _bytes(vi_by_name, names):
    import onnx
    from onnx import mapping
    total = 0
    for n in names:
        if not n:
            continue
        t = vi_by_name[n].type.tensor_type
        k = 1
        for d in t.shape.dim:
            k *= d.dim_value
        total += k * mapping.TENSOR_TYPE_TO_NP_TYPE[t.elem_type].itemsize
    return total


def state_bytes(path):
    """(parameter, gradient, optimizer-state) bytes from the file's roamc.* metadata."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    meta = {p.key: p.value for p in m.metadata_props}
    g = m.graph
    vi = {v.name: v for v in list(g.input) + list(g.output) + list(g.value_info)}
    return tuple(_bytes(vi, meta.get(k, "").split(",")) for k in
                 ("roamc.parameters", "roamc.gradients", "roamc.optimizer_state"))


def plan(roamc, model, order, extra, plan_path):
    cmd = [roamc, model, "--order", order, "-q", "-o", plan_path] + extra
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    with open(plan_path) as f:
        p = json.load(f)
    p["peak"]["wall"] = time.time() - t0
    return p["peak"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--roamc", default=os.path.join(HERE, "..", "build", "roamc"))
    ap.add_argument("--dir", default="train_compare")
    ap.add_argument("--orders", default="program,roam")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    ap.add_argument("--dynamic", action="store_true",
                    help="one forward file per model with dynamic batch (and sequence), bound with --dim")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    roam_opt = {"adam": "adam", "adamw": "adamw", "sgd": "momentum"}[a.optimizer]  # export.py's sgd has momentum 0.9
    orders = a.orders.split(",")
    head = "| model | batch |"
    for o in orders:
        head += " %s: export.py | --train | diff |" % o
    head += " persistent export.py / --train | params, grads, state bytes |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    diffs = {o: [] for o in orders}
    for s in a.specs:
        spec = parse_spec(s)
        set_layers(spec["model"], spec["layers"])
        base = "%s%s" % (spec["model"], "_l%d" % spec["layers"] if spec["layers"] else "")
        if spec["seq"]:
            base += "_s%d" % spec["seq"]
        dyn_fwd = os.path.join(a.dir, base + "_dyn_fwd.onnx")
        for batch in spec["batches"]:
            stem = "%s_b%d" % (base, batch)
            fwd = dyn_fwd if a.dynamic else os.path.join(a.dir, stem + "_fwd.onnx")
            trn = os.path.join(a.dir, stem + "_train.onnx")
            der = os.path.join(a.dir, stem + "_derived.onnx")
            if not os.path.exists(trn):
                onx, _ = ex.export(spec["model"], batch, spec["image"], spec["seq"], a.optimizer)
                ex.write(onx, trn)
            try:
                if not os.path.exists(fwd):
                    export_forward(spec, batch, fwd, a.dynamic)
            except Exception as e:  # torch.onnx cannot export some geometries: say so, go on
                print("| %s | %d | torch.onnx.export failed: %s |" % (base, batch, str(e).split("\n")[0][:200]))
                continue
            dims = []
            if a.dynamic:
                dims = ["--dim", "batch=%d" % batch]
                if is_transformer(spec["model"]):
                    seq = spec["seq"] or (128 if spec["model"] in ex.BERT_CONFIGS else 1024)
                    dims += ["--dim", "seq=%d" % seq]
            row = "| %s | %d |" % (base, batch)
            for order in orders:
                ref = plan(a.roamc, trn, order, [], os.path.join(a.dir, stem + "_train.%s.json" % order))
                got = plan(a.roamc, fwd, order, ["--train", "--optimizer", roam_opt, "--emit-train", der] + dims,
                           os.path.join(a.dir, stem + "_derived.%s.json" % order))
                d = 100.0 * (got["theoretical"] - ref["theoretical"]) / ref["theoretical"]
                diffs[order].append(d)
                row += " %d | %d | %+.3f%% |" % (ref["theoretical"], got["theoretical"], d)
            sb_ref, sb_got = state_bytes(trn), state_bytes(der)
            row += " %d / %d | %s |" % (ref["persistent"], got["persistent"],
                                        "equal (%d, %d, %d)" % sb_ref if sb_ref == sb_got else
                                        "DIFFER %s vs %s" % (sb_ref, sb_got))
            print(row)
            sys.stdout.flush()
    for o in orders:
        v = sorted(diffs[o])
        if v:
            med = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
            print("%s: %d rows, median diff %+.3f%%, largest |diff| %.3f%%"
                  % (o, len(v), med, max(abs(x) for x in v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
