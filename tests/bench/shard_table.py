#!/usr/bin/python3
"""shard_table.py WORK_DIR WORLD: the markdown table of tests/bench/shard_bench.sh.

Reads what shard_bench.sh left in WORK_DIR (per model and set-up: the rank's step, its plan,
roamc's JSON report, the --max-batch reports) and writes to stdout the per-GPU table beside
DeepSpeed's model-state estimators and Korthikanti et al.'s activation formula, and the
measured decomposition of each difference: what is live at the rank's peak, by what holds
it, the activations by operator and element type per layer."""
import json
import math
import os
import sys

import onnx

GIB = 1024.0 ** 3
KINDS = ["zero1", "zero2", "zero3", "fsdp"]
MODELS = {  # layers L, seq s, hidden h, heads a, vocab
    "gpt2-xl": dict(L=48, s=1024, h=1600, a=25, vocab=50257),
    "llama-7b": dict(L=32, s=2048, h=4096, a=32, vocab=32000),
}
ELEM_BYTES = {1: 4, 16: 2, 10: 2, 7: 8, 9: 1, 2: 1, 3: 1, 6: 4, 11: 8}
ELEM_NAME = {1: "fp32", 16: "bf16", 10: "fp16", 7: "int64", 9: "bool", 2: "uint8", 6: "int32"}


def gib(b):
    return "%.2f" % (b / GIB)


def numel(dims):
    return math.prod(dims) if dims else 1


def shapes(model):
    out = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        t = vi.type.tensor_type
        out[vi.name] = (t.elem_type, [d.dim_value for d in t.shape.dim])
    return out


def model_facts(path):
    m = onnx.load(path)
    meta = {p.key: p.value for p in m.metadata_props}
    sh = shapes(m)
    params = meta["roamc.parameters"].split(",")
    n = sum(numel(sh[p][1]) for p in params)
    per_module = {}
    for p in params:
        mod = p.rsplit(".", 1)[0] if "." in p else ""
        per_module[mod] = per_module.get(mod, 0) + numel(sh[p][1])
    return n, max(per_module.values())


def peak_items(l, rep, facts):
    """What the plan holds at the rank's peak: activation buffers by (op, element type,
    attention matrix or not), weight copies, vocabulary-sized tensors, data."""
    m = onnx.load(l + ".onnx")
    meta = {p.key: p.value for p in m.metadata_props}
    sh = shapes(m)
    plan = json.load(open(l + ".json"))
    producer = {}
    for n in m.graph.node:
        for o in n.output:
            producer[o] = n
    named = set()
    for k in ("roamc.parameters", "roamc.buffers", "roamc.optimizer_state",
              "roamc.communication", "roamc.gathered", "roamc.gradients"):
        named.update(x for x in meta.get(k, "").split(",") if x)
    params = set(x for x in meta.get("roamc.parameters", "").split(",") if x)
    peak = rep["shard"]["peak_step"]
    s, vocab = facts["s"], facts["vocab"]
    items = {}
    totals = {"weight copies (autocast)": 0, "vocabulary-sized (logits, loss)": 0, "data": 0,
              "layers": 0, "layers fp32": 0, "attention matrices": 0}
    data = set(meta.get("roamc.data_inputs", "").split(","))
    for b in plan["buffers"]:
        if not (b["start"] <= peak <= b["end"]):
            continue
        ts = b["tensors"]
        if any(t in named for t in ts):
            continue
        if any(t in data for t in ts):
            totals["data"] += b["size"]
            continue
        first = ts[0]
        node = producer.get(first)
        elem, dims = sh.get(first, (0, []))
        op = node.op_type if node is not None else "input"
        src = node.input[0] if node is not None and node.input else ""
        base = src.rsplit(".", 1)[0] if src.endswith((".gathered", ".regathered")) else src
        # a copy of a parameter: zero1/2 read the parameter, zero3/fsdp its gathered view
        if op == "_to_copy" and (src in params or base != src):
            totals["weight copies (autocast)"] += b["size"]
            continue
        if vocab in dims:
            totals["vocabulary-sized (logits, loss)"] += b["size"]
            continue
        att = len(dims) >= 2 and dims[-1] == s and dims[-2] == s
        key = (op, ELEM_NAME.get(elem, str(elem)), att)
        items[key] = items.get(key, 0) + b["size"]
        totals["layers"] += b["size"]
        totals["attention matrices"] += b["size"] if att else 0
        totals["layers fp32"] += b["size"] if elem == 1 else 0
    return totals, items


def main():
    work, world = sys.argv[1], int(sys.argv[2])
    os.chdir(work)
    cores = open("cores.txt").read().strip() if os.path.exists("cores.txt") else "?"
    out = []
    w = out.append
    w("# One rank of an 8-GPU job: gpt2-xl and llama-7b, bf16 autocast, ZeRO-1/2/3 and FSDP")
    w("")
    w("Made by `tests/bench/shard_bench.sh build/roamc` (issue 28; %s cores). Each model is "
      "models/export.py's step (`--amp bf16`: torch.autocast over the forward and the loss, "
      "fp32 parameters, gradients and Adam state; seq %s), one rank (rank 0) of world %d "
      "planned by `roamc --shard KIND --world %d`; every plan below passed "
      "shared/tools/check_plan.py (column *check*). Sizes in GiB (2^30 B)."
      % (cores, " / ".join("%s %d" % (k, v["s"]) for k, v in MODELS.items()), world, world))
    w("")
    w("Commands (what shard_bench.sh runs, per MODEL and KIND):")
    w("")
    w("    /usr/bin/python3 models/export.py --model MODEL --amp bf16 --batch 1 -o MODEL_b1.onnx")
    w("    /usr/bin/python3 models/export.py --model MODEL --amp bf16 --symbolic-batch -o MODEL_bsym.onnx")
    w("    roamc MODEL_b1.onnx --shard KIND --world 8 --budget 80GiB --emit-train R.onnx -o R.json --report json")
    w("    /usr/bin/python3 shared/tools/check_plan.py R.onnx R.json")
    w("    roamc MODEL_bsym.onnx --max-batch --budget {24,40,80}GiB --shard KIND --world 8 --report json")
    w("")
    rows = {}
    for model, f in MODELS.items():
        psi, ll = model_facts(model + "_b1.onnx")
        f = dict(f, psi=psi, ll=ll)
        MODELS[model] = f
        for k in KINDS:
            l = "%s_%s" % (model, k)
            rep = json.load(open(l + ".rep"))
            mb = {g: json.load(open("%s_mb%d.rep" % (l, g))) for g in (24, 40, 80)}
            chk = open(l + ".chk").read().strip().splitlines()
            totals, items = peak_items(l, rep, f)
            rows[(model, k)] = dict(rep=rep, mb=mb, chk=chk[-1] if chk else "?",
                                    sec=float(open(l + ".seconds").read()), totals=totals,
                                    items=items)
    # --- table 1: micro-batch 1
    w("## Per-GPU peak at micro-batch 1, and the largest micro-batch per GPU")
    w("")
    w("| model | set-up | roamc peak | PyTorch reserves | params | grads | optimizer | comm. "
      "| gathered | activations | max micro-batch 24 / 40 / 80 GiB: roamc (PyTorch) "
      "| plan time | check |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    for (model, k), r in rows.items():
        sp = r["rep"]["shard"]["split"]
        mbs = " / ".join("%d (%d)" % (r["mb"][g]["max_batch"]["plan"], r["mb"][g]["max_batch"]["pytorch"])
                         for g in (24, 40, 80))
        w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f s | %s |" % (
            model, k, gib(r["rep"]["actual_peak"]), gib(r["rep"]["budget"]["pytorch"]["needs"]),
            gib(sp["parameters"]), gib(sp["gradients"]), gib(sp["optimizer_state"]),
            gib(sp["communication"]), gib(sp.get("gathered", 0)), gib(sp["activations"]), mbs,
            r["sec"], "VALID" if r["chk"].startswith("VALID") else r["chk"][:40]))
    w("")
    w("roamc peak: the arena of roamc's plan of the rank's step (order and layout roam); "
      "PyTorch reserves: the same step in program order through the replayed caching "
      "allocator (what eager PyTorch would reserve); the split is at roamc's peak step. "
      "Max micro-batch: `roamc MODEL_bsym.onnx --max-batch --budget G GiB --shard KIND "
      "--world 8` (the batch-symbolic export, the rank's step written at each batch tried); "
      "0: not even one sequence. Plan time: the whole `roamc --shard` run at micro-batch 1, "
      "wall clock, loading and writing included.")
    w("")
    # --- table 2: formulas
    w("## Beside the published formulas (micro-batch 1)")
    w("")
    w("P parameters, N = %d, LL the largest module's own parameters (DeepSpeed's "
      "largest_layer_params). DeepSpeed's `estimate_zero2_model_states_mem_needs` (offload "
      "none): 4P + 16P/N; `estimate_zero3_model_states_mem_needs` (offload none): "
      "18P/N + 4 LL; ZeRO-1 has no estimator (DeepSpeed issue 5102), the ZeRO paper's "
      "(2 + 2)P + 12P/N stands in; FSDP has none, DeepSpeed's ZeRO-3 one stands in. "
      "Activations: Korthikanti et al. 2022, L s b h (34 + 5 a s / h) bytes." % world)
    w("")
    w("| model | P | LL | set-up | formula states | roamc states at peak | Korthikanti act. "
      "| roamc act. at peak | formula total | roamc peak |")
    w("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for (model, k), r in rows.items():
        f = MODELS[model]
        P, N = f["psi"], world
        states = {"zero1": 4 * P + 12 * P / N, "zero2": 4 * P + 16 * P / N,
                  "zero3": 18 * P / N + 4 * f["ll"], "fsdp": 18 * P / N + 4 * f["ll"]}[k]
        act = f["L"] * f["s"] * 1 * f["h"] * (34 + 5 * f["a"] * f["s"] / f["h"])
        sp = r["rep"]["shard"]["split"]
        ours_states = sum(v for kk, v in sp.items() if kk != "activations")
        w("| %s | %.3fB | %.1fM | %s | %s | %s | %s | %s | %s | %s |" % (
            model, P / 1e9, f["ll"] / 1e6, k, gib(states), gib(ours_states), gib(act),
            gib(sp["activations"]), gib(states + act), gib(r["rep"]["theoretical_peak"])))
    w("")
    # --- table 3: the activations at the peak, decomposed
    w("## The activations at the peak, measured")
    w("")
    w("What roamc's plan holds at the rank's peak besides parameters, gradients, optimizer "
      "state, buffers and gathered parameters (tests/bench/shard_table.py reads the rank's "
      "step and its plan): the bf16 copies autocast makes of the weights (saved for the "
      "backward pass), the vocabulary-sized tensors (logits and the loss), the data, and the "
      "rest, the layers' activations, per layer beside Korthikanti's per-layer terms "
      "(34 sbh for everything but the attention matrices, 5 a s^2 b for them).")
    w("")
    w("| model | set-up | weight copies | vocab-sized | layers | per layer | of it fp32 "
      "| attention matrices per layer (5as^2b) | rest per layer (34sbh) |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (model, k), r in rows.items():
        f = MODELS[model]
        t = r["totals"]
        L = f["L"]
        w("| %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s (%s) |" % (
            model, k, gib(t["weight copies (autocast)"]), gib(t["vocabulary-sized (logits, loss)"]),
            gib(t["layers"]), gib(t["layers"] / L), gib(t["layers fp32"] / L),
            gib(t["attention matrices"] / L), gib(5 * f["a"] * f["s"] ** 2),
            gib((t["layers"] - t["attention matrices"]) / L), gib(34 * f["s"] * f["h"])))
    w("")
    for model in MODELS:
        r = rows[(model, "zero3")]
        f = MODELS[model]
        w("Per layer of %s at the ZeRO-3 rank's peak, by operator and element type "
          "(bytes / (s b h) and GiB; *att*: an [s, s] attention matrix):" % model)
        w("")
        w("| operator | type | att | bytes/(sbh) | GiB per layer |")
        w("|---|---|---|---:|---:|")
        sbh = f["s"] * f["h"]
        for (op, el, att), v in sorted(r["items"].items(), key=lambda kv: -kv[1]):
            per = v / f["L"]
            if per < 0.01 * sbh:
                continue
            w("| %s | %s | %s | %.2f | %.3f |" % (op, el, "att" if att else "", per / sbh,
                                                 per / GIB))
        w("")
    explain(rows, world, w)
    print("\n".join(out))


def explain(rows, world, w):
    """The differences to the formulas, in words, with this run's numbers."""
    g = {m: MODELS[m] for m in MODELS}
    w("## Every difference, explained")
    w("")
    for model, f in g.items():
        P, N = f["psi"], world
        z1, z2, z3, fs = (rows[(model, k)] for k in KINDS)
        sp1, sp2, sp3, spf = (r["rep"]["shard"]["split"] for r in (z1, z2, z3, fs))
        t3 = z3["totals"]
        act = f["L"] * f["s"] * f["h"] * (34 + 5 * f["a"] * f["s"] / f["h"])
        w("**%s** (P = %.3f B parameters, world %d)." % (model, P / 1e9, N))
        w("")
        w("- *Precision.* The formulas assume DeepSpeed's bf16 mode: the model itself in bf16 "
          "(2 B/parameter of weights, 2 B of gradients) and an fp32 master copy with Adam's two "
          "moments in the optimizer (12 B, sharded). The step roamc plans is torch.autocast: "
          "the parameters stay fp32 (4 B: they are the master copy), the gradients are fp32 "
          "(4 B), Adam's moments 8 B; so the optimizer state here is 8P/N = %s GiB where "
          "the formulas count 12P/N = %s GiB, and the parameters 4P (ZeRO-1/2: %s GiB with "
          "the buffers) or 4P/N (ZeRO-3/FSDP: %s GiB) where they count 2P or 2P/N."
          % (gib(8 * P / N), gib(12 * P / N), gib(sp1["parameters"]), gib(sp3["parameters"])))
        peaks = ", ".join("%s `%s`" % (k, rows[(model, k)]["rep"]["shard"]["peak_op"].split(", ")[-1])
                          for k in KINDS)
        w("- *Where the peak is.* The ranks peak at the start of the backward pass (%s), "
          "when every activation is still held and no gradient is made yet: the gradient "
          "terms of the formulas (2P whole for ZeRO-1/2, 2P/N for ZeRO-3) are 0 there; the "
          "formulas add maxima that never coincide." % peaks)
        w("- *ZeRO-1* (DDP + ZeroRedundancyOptimizer, torch 1.13): DDP's gradient buckets are "
          "a persistent fp32 copy of every gradient, %s GiB (communication), held for the "
          "whole step; no formula counts them. States at the peak: %s GiB against the "
          "paper's (2+2)P + 12P/N = %s GiB."
          % (gib(sp1["communication"]), gib(sum(v for k, v in sp1.items() if k != "activations")),
             gib(4 * P + 12 * P / N)))
        w("- *ZeRO-2*: one reused bucket buffer (%s GiB, as large as the largest bucket) "
          "instead of ZeRO-1's; DeepSpeed's 4P + 16P/N counts whole bf16 parameters and "
          "whole bf16 gradients (its issue 5102: ZeRO-2's estimate ignores that gradients "
          "are partitioned), roamc holds none at the peak and only the rank's shard after "
          "each reduce-scatter." % gib(sp2["communication"]))
        w("- *ZeRO-3 / FSDP*: DeepSpeed's 18P/N + 4 LL (LL = %.1f M, the largest module's "
          "own parameters) against roamc's 4P/N parameters + 8P/N optimizer state, plus the "
          "gathered units where they are live: 0 at ZeRO-3's peak (the first unit of the "
          "backward is gathered only after the loss's backward), %s GiB at FSDP's (the root "
          "unit, embeddings and final norm, is not resharded after the forward, as FSDP "
          "does; with the prefetched layer later). The largest gathered unit is %s GiB "
          "(ZeRO-3) and %s GiB (FSDP, one layer or the root) in fp32, where the formula's "
          "4 LL counts 2 B + 2 B of one module."
          % (f["ll"] / 1e6, gib(spf.get("gathered", 0)),
             gib(z3["rep"]["shard"]["largest_unit_bytes"]),
             gib(fs["rep"]["shard"]["largest_unit_bytes"])))
        w("- *Activations*: roamc %s GiB against Korthikanti's %s GiB: (a) autocast's bf16 "
          "copies of the weights, made in the forward pass and saved for the backward "
          "(matmul saves its bf16 operands), %s GiB = 2 B x every weight a matmul reads; "
          "DeepSpeed's bf16 mode has no such copy (its weights are bf16), and FSDP without "
          "MixedPrecision has it whole on every rank (the copies are of the gathered "
          "parameters); (b) the vocabulary-sized tensors, logits and the loss's, %s GiB, "
          "which the per-layer formula leaves out; (c) the layers, %s GiB per layer "
          "against %s GiB: the attention matrices %s GiB against 5as^2b = %s GiB, the rest "
          "%s GiB against 34sbh = %s GiB, itemised by operator above."
          % (gib(sp3["activations"]), gib(act), gib(t3["weight copies (autocast)"]),
             gib(t3["vocabulary-sized (logits, loss)"]), gib(t3["layers"] / f["L"]),
             gib(act / f["L"]), gib(t3["attention matrices"] / f["L"]),
             gib(5 * f["a"] * f["s"] ** 2), gib((t3["layers"] - t3["attention matrices"]) / f["L"]),
             gib(34 * f["s"] * f["h"])))
        w("")
    w("Per layer, by the itemised tables: **gpt2-xl**'s attention matrices match "
      "Korthikanti's 5 B per element exactly (softmax output bf16 2 B, dropout mask 1 B, "
      "dropout output 2 B: the exporter traces CPU autocast, whose lists leave softmax in "
      "its input's dtype, the bf16 matmul output; CUDA autocast runs softmax in fp32, 4 B); the "
      "rest is above 34sbh because transformers' `gelu_new` is written out as elementwise "
      "operators whose bf16 intermediates are saved (mul, tanh: about 24 B per sbh where "
      "the formula counts GELU's input, 8), and because autocast keeps the residual stream "
      "and the LayerNorm inputs in fp32 (add fp32: 8 B per sbh where the formula counts "
      "2 x 2). **llama-7b**'s attention holds 8 B per element against 5: the fp32 softmax "
      "output (4 B; transformers 4.28 upcasts), its bf16 copy for the value matmul (2 B), "
      "and the two masks of `torch.max(w, finfo.min)`'s backward (eq, lt: 1 B each), "
      "which roamc's order computes in the forward pass so that the fp32 scores (4 B) they "
      "are made from can be freed there (eager PyTorch saves the scores); LLaMA has no "
      "dropout, so the formula's mask and dropout output are not there, but the fp32 "
      "upcast is. The rest: SwiGLU's three 11008-wide tensors (gate and up projections, "
      "SiLU, product: about 24 B per sbh) against GELU's 4h, RMSNorm in fp32 (the "
      "residual stream, x and x * rsqrt kept in fp32: about 16 B per sbh) against "
      "LayerNorm in 16-bit.")
    w("")
    w("**Max micro-batch.** llama-7b at seq 2048 without activation checkpointing holds "
      "about %s GiB of activations per sequence: no set-up fits one sequence in 24 or "
      "40 GiB, only ZeRO-3 and FSDP fit one in 80 GiB (PyTorch's program order and "
      "caching allocator: ZeRO-3 only). gpt2-xl at seq 1024 holds about %s GiB per "
      "sequence. The formulas (states + Korthikanti) would promise more: they leave out "
      "the weight copies, the logits and the fp32 parts of autocast."
      % (gib(rows[("llama-7b", "zero3")]["rep"]["shard"]["split"]["activations"]),
         gib(rows[("gpt2-xl", "zero3")]["rep"]["shard"]["split"]["activations"])))


if __name__ == "__main__":
    main()
