#!/usr/bin/python3
"""What eager PyTorch really allocates for one training step on a GPU, fp32
and under torch.autocast(bf16), to hold against roamc's plans of the same
step (models/export.py builds the model, its data and Adam as the exported
step has them).

usage: models/gpu_measure.py MODEL:BATCH[:SEQ] [...] [--steps N] [--amp none,bf16]

Per model and precision, one JSON line: the mean step seconds over N steps
after two warm-up steps, and torch.cuda.max_memory_allocated /
max_memory_reserved over those N steps (each step starts from grads set to
None, as zero_grad(set_to_none=True) leaves them: the step export.py
traces).  Needs a CUDA device; exit 2 without one.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402  (the same builders as the exported steps)


def measure(name, batch, seq, amp, steps):
    torch.manual_seed(0)
    model, data, _ = export.build(name, batch, 224, seq, device="cuda")
    params = [p for p in model.parameters() if p.requires_grad]
    opt, _ = export.make_optimizer("adam", params)
    tensors = [t for _, t in data]

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp == "bf16"):
            loss = model(*tensors)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    out = {"model": name, "batch": batch, "seq": seq, "amp": amp,
           "step_seconds": (time.perf_counter() - t0) / steps,
           "max_memory_allocated": torch.cuda.max_memory_allocated(),
           "max_memory_reserved": torch.cuda.max_memory_reserved(),
           "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    del model, opt, params, tensors, data
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="MODEL:BATCH[:SEQ], e.g. resnet50:32 gpt2:8:1024")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--amp", default="none,bf16")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_measure.py: no CUDA device", file=sys.stderr)
        return 2
    for spec in a.models:
        parts = spec.split(":")
        name, batch = parts[0], int(parts[1])
        seq = int(parts[2]) if len(parts) > 2 else None
        for amp in a.amp.split(","):
            try:
                print(json.dumps(measure(name, batch, seq, amp, a.steps)), flush=True)
            except Exception as e:  # report and go on: one model's failure is data too
                print(json.dumps({"model": name, "amp": amp, "error": repr(e)}), flush=True)
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
