#!/usr/bin/python3
"""`roamc --train` on eval-mode and training-mode forward exports, against the training
step models/export.py traces from the same model code (issue 29, "eval exports").

usage:
  models/eval_export_compare.py [--roamc PATH] [--dir DIR] [--order program] SPEC...
  SPEC = MODEL:BATCH[:image=S]; MODEL a torchvision classifier (resnet50, densenet121, ...)
         or unet (models/unet_module.py's U-Net, 128 x 128)

For each SPEC three files are planned with Adam, in the order given:
  export.py      models/export.py's traced training step (the reference)
  train export   torch.onnx.export(model.train(), x, F, training=TrainingMode.TRAINING,
                 do_constant_folding=False), then roamc F --train
  eval export    torch.onnx.export(model.eval(), x, F) (the defaults: eval mode, constant
                 folding), then roamc F --train
and one table row is printed: theoretical peaks, each route's difference from export.py,
and whether roamc's report warned (its "eval export" lines) on each forward file.
Runs with Debian's /usr/bin/python3 (torch 1.13, torchvision, onnx); no network.
"""
import argparse
import json
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export as ex  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from train_compare import _Forward, _LogitsOnly  # noqa: E402

warnings.filterwarnings("ignore")


def build_cpu(name, batch, image):
    """(model on the CPU, example input, the name export.py's route takes)."""
    if name == "unet":
        sys.path.insert(0, HERE)
        import unet_module
        r = unet_module.make(batch=batch, device="cpu", image_size=image)
        # export.py's --module route: make() at its default image size, 128
        return r["model"], r["inputs"]["images"], ex.UserModule(os.path.join(HERE, "unet_module.py") + ":make")
    model, data, _ = ex.build(name, batch, image, None, device="cpu")
    return _Forward(model), data[0][1], name


def export_fwd(model, x, path, train):
    with _LogitsOnly():
        if train:
            torch.onnx.export(model.train(), (x,), path, opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=["input"], output_names=["logits"])
        else:  # torch.onnx.export's defaults, as a model hub's file is made
            torch.onnx.export(model.eval(), (x,), path, opset_version=17,
                              input_names=["input"], output_names=["logits"])


def plan(roamc, model, order, extra, plan_path):
    cmd = [roamc, model, "--order", order, "-o", plan_path] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    with open(plan_path) as f:
        p = json.load(f)
    return p["peak"]["theoretical"], "eval export" in r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--roamc", default=os.path.join(HERE, "..", "build", "roamc"))
    ap.add_argument("--dir", default="eval_export_compare")
    ap.add_argument("--order", default="program")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    print("| model | batch | export.py (B) | --train, training export (B) | diff | warned | "
          "--train, eval export (B) | diff | warned |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---|")
    for s in a.specs:
        parts = s.split(":")
        name, batch = parts[0], int(parts[1])
        image = 128 if name == "unet" else 224
        for p in parts[2:]:
            k, _, v = p.partition("=")
            if k != "image" or name == "unet":
                ex.die("spec %r: unknown key %r (the U-Net is 128 x 128)" % (s, k))
            image = int(v)
        stem = os.path.join(a.dir, "%s_b%d_i%d" % (name, batch, image))
        torch.manual_seed(0)
        model, x, route = build_cpu(name, batch, image)
        trn = stem + "_train.onnx"
        if not os.path.exists(trn):
            onx, _ = ex.export(route, batch, image, None, "adam", quiet=True)
            ex.write(onx, trn)
        ref, _ = plan(a.roamc, trn, a.order, [], stem + "_train.json")
        row = "| %s | %d | %d |" % (name if name != "unet" else "U-Net (models/unet_module.py)", batch, ref)
        for mode in ("train", "eval"):
            fwd = "%s_fwd_%s.onnx" % (stem, mode)
            if not os.path.exists(fwd):
                export_fwd(model, x, fwd, mode == "train")
            got, warned = plan(a.roamc, fwd, a.order, ["--train", "--optimizer", "adam"],
                               "%s_fwd_%s.json" % (stem, mode))
            row += " %d | %+.3f%% | %s |" % (got, 100.0 * (got - ref) / ref, "yes" if warned else "no")
        print(row)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
