#!/usr/bin/python3
"""Compares roamc's prediction of a training set-up with models/dist_harness.py's
measurement of the same set-up (issue 28).  One comparator for ctest
(tests/test_setups.sh, tests/test_shard.sh) and the bench (tests/bench/setups_bench.sh).

usage:
  setup_compare.py one LABEL HARNESS_JSONL TOL_PERMILLE
      One process (amp-bf16, grad-accum): the harness's peak less the data inputs its
      caller holds for the whole step (the graph frees them after their last use)
      against roamc's program-order theoretical peak with gradients held as eager
      .grad holds them (LABEL.pt.rep, `roamc --method pytorch --report json`).
      LABEL.llfb.rep (program order, gradients freed) is printed beside it.
  setup_compare.py rank LABEL MODEL SETUP WORLD RANK PEAK TOL_PERMILLE
      One rank of DDP or ZeRO-1: LABEL.rep / LABEL.json / LABEL.onnx are roamc --shard's
      report, plan and step of that rank (`--method pytorch`); checks that the step
      holds what the set-up says (buckets, AllReduce, Broadcast, the rank's optimizer
      state only), then compares the plan's schedule with the data inputs held for the
      whole step (what the harness's caller does) against the harness's PEAK.
Prints one line per comparison; exit 0 when |difference| <= TOL_PERMILLE per mille
of the measured peak, 1 otherwise.
"""
import json
import sys

import onnx


def metadata(model):
    return {p.key: p.value for p in model.metadata_props}


def within(diff, measured, tol_permille):
    return abs(diff) * 1000 <= tol_permille * measured


def compare_one(label, harness_jsonl, tol):
    h = json.loads(open(harness_jsonl).read().splitlines()[0])
    assert "error" not in h, h["error"]
    pt = json.load(open(label + ".pt.rep"))["theoretical_peak"]
    ll = json.load(open(label + ".llfb.rep"))["theoretical_peak"]
    measured = h["peak_bytes"] - h["split"]["data"]
    d = measured - pt
    print("%s: harness peak %d B (data held by the caller %d B) -> %d B; roamc program order, "
          "grads held: %d B, difference %+d B (%+.3f%%); program order, grads freed (llfb): %d B"
          % (label, h["peak_bytes"], h["split"]["data"], measured, pt, d, 100.0 * d / measured, ll))
    return within(d, measured, tol)


def check_rank_step(label, setup, world, rank, sh):
    """The rank's step holds what its set-up says."""
    m = onnx.load(label + ".onnx")
    meta = metadata(m)
    assert meta["roamc.shard"].startswith("%s world=%d rank=%d" % (setup, world, rank)), \
        meta["roamc.shard"]
    ops = [n.op_type for n in m.graph.node if n.domain == "ai.roamc"]
    params = meta["roamc.parameters"].split(",")
    assert ops.count("AllReduce") == sh["buckets"] >= 1, (ops, sh["buckets"])
    ins = {i.name for i in m.graph.input}
    assert all(b in ins for b in meta["roamc.communication"].split(",")), "buckets are not inputs"
    if setup == "zero1":
        assert ops.count("Broadcast") == len(params), ops
        owned = meta["roamc.owned"].split(",")
        states = meta["roamc.optimizer_state"].split(",")
        assert all(any(s.startswith(p + ".") for p in owned) for s in states), \
            "a state of another rank"
        assert all(s in ins for s in states) and not any(
            i.startswith(p + ".") for i in ins for p in params if p not in owned), "state inputs"
    return set(meta["roamc.data_inputs"].split(","))


def peak_with_held(plan, held_names):
    """The plan's largest live sum when the buffers holding held_names live all step."""
    live = [0] * len(plan["schedule"])
    held = 0
    for b in plan["buffers"]:
        if held_names & set(b["tensors"]):
            held += b["size"]
            continue
        for t in range(b["start"], b["end"] + 1):
            live[t] += b["size"]
    return max(live) + held


def compare_rank(label, model, setup, world, rank, peak, tol):
    rep = json.load(open(label + ".rep"))
    sh = rep["shard"]
    pred = sh["peak"]
    assert pred == rep["theoretical_peak"] == sum(sh["split"].values()), (pred, sh)
    data_names = check_rank_step(label, setup, world, rank, sh)
    pred_held = peak_with_held(json.load(open(label + ".json")), data_names)
    assert pred_held >= pred, (pred_held, pred)
    d = pred_held - peak
    print("%s %s %d %d %d %d %d %+d (%+.3f%%)"
          % (model, setup, world, rank, peak, pred, pred_held, d, 100.0 * d / peak))
    return within(d, peak, tol)


def main(argv):
    if len(argv) == 5 and argv[1] == "one":
        return 0 if compare_one(argv[2], argv[3], int(argv[4])) else 1
    if len(argv) == 9 and argv[1] == "rank":
        label, model, setup = argv[2:5]
        world, rank, peak, tol = (int(a) for a in argv[5:9])
        return 0 if compare_rank(label, model, setup, world, rank, peak, tol) else 1
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
