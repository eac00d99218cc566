#!/usr/bin/python3
"""Compare the two routes to a training step: `roamc --train` on a forward-only
ONNX file (torch.onnx.export in training mode) and roamc on the training graph
that models/export.py traces from the same model code.

usage:
  models/train_compare.py [--roamc PATH] [--dir DIR] [--orders program,roam]
                          [--optimizer adam] SPEC...
  SPEC = MODEL:BATCH[:layers=N][:seq=L][:image=S]    e.g. resnet18:32 bert-base:8:layers=2

For each SPEC it writes DIR/STEM_fwd.onnx (forward only: the model's logits,
the loss left out), DIR/STEM_train.onnx (export.py) and DIR/STEM_derived.onnx
(--emit-train), plans both routes with each order, and prints one table row:
theoretical peak, persistent bytes and their relative difference.  Runs with
Debian's /usr/bin/python3 (torch 1.13, onnx); needs no network.
"""
import argparse
import json
import os
import subprocess
import sys

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
        ex.die("spec %r: want MODEL:BATCH[:layers=N][:seq=L][:image=S]" % s)
    spec = dict(model=parts[0], batch=int(parts[1]), layers=None, seq=None, image=224)
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


def export_forward(spec, path):
    torch.manual_seed(0)
    model, data, _ = ex.build(spec["model"], spec["batch"], spec["image"], spec["seq"], device="cpu")
    model.train()
    x = data[0][1]
    with _LogitsOnly():
        torch.onnx.export(_Forward(model), (x,), path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=[data[0][0]], output_names=["logits"])


def plan(roamc, model, order, extra, plan_path):
    cmd = [roamc, model, "--order", order, "-q", "-o", plan_path] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    with open(plan_path) as f:
        p = json.load(f)
    return p["peak"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--roamc", default=os.path.join(HERE, "..", "build", "roamc"))
    ap.add_argument("--dir", default="train_compare")
    ap.add_argument("--orders", default="program,roam")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    roam_opt = {"adam": "adam", "adamw": "adamw", "sgd": "momentum"}[a.optimizer]  # export.py's sgd has momentum 0.9
    print("| model | batch | order | export.py peak | --train peak | diff | export.py persistent | --train persistent | diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in a.specs:
        spec = parse_spec(s)
        set_layers(spec["model"], spec["layers"])
        stem = "%s%s_b%d" % (spec["model"], "_l%d" % spec["layers"] if spec["layers"] else "", spec["batch"])
        fwd = os.path.join(a.dir, stem + "_fwd.onnx")
        trn = os.path.join(a.dir, stem + "_train.onnx")
        der = os.path.join(a.dir, stem + "_derived.onnx")
        if not os.path.exists(trn):
            onx, _ = ex.export(spec["model"], spec["batch"], spec["image"], spec["seq"], a.optimizer)
            ex.write(onx, trn)
        try:
            if not os.path.exists(fwd):
                export_forward(spec, fwd)
        except Exception as e:  # torch.onnx cannot export some geometries: say so, go on
            print("| %s | %d | - | torch.onnx.export failed: %s |" % (stem, spec["batch"], str(e).split("\n")[0][:120]))
            continue
        for order in a.orders.split(","):
            ref = plan(a.roamc, trn, order, [], os.path.join(a.dir, stem + "_train.%s.json" % order))
            got = plan(a.roamc, fwd, order, ["--train", "--optimizer", roam_opt, "--emit-train", der],
                       os.path.join(a.dir, stem + "_derived.%s.json" % order))

            def pct(x, y):
                return "%+.2f%%" % (100.0 * (x - y) / y) if y else "n/a"
            print("| %s | %d | %s | %d | %d | %s | %d | %d | %s |" % (
                stem, spec["batch"], order, ref["theoretical"], got["theoretical"],
                pct(got["theoretical"], ref["theoretical"]), ref["persistent"], got["persistent"],
                pct(got["persistent"], ref["persistent"])))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
