#!/usr/bin/python3
"""The shape-inference corpus: ONNX files roamc must read without our
training-graph convention (shared/DESIGN.md, "Any other ONNX file"), with
what ONNX Runtime needs to run them (tests/shape_oracle.py is the oracle).

usage: /usr/bin/python3 models/corpus.py OUTDIR [--quick] [--only SUBSTR] [--gpt2-xl] [--force]
       /usr/bin/python3 models/corpus.py OUTDIR --ops    (the operator table of a corpus)

Writes OUTDIR/NAME.onnx for every model and OUTDIR/corpus.json:

  {"models": [{"name", "file", "tag", "opset",
               "inputs": [{"name", "dtype", "shape", ["low", "high"] | ["values"]}],
               "input_shapes": ["NAME=D1,D2,..."],   # every input, as --input-shape
               "dims": {"SYMBOL": V},                # the same binding, by dim_param
               "roamc_args": [...],                  # the form the oracle passes to roamc
               "oracle": true}],                     # false: not for ONNX Runtime
   "skipped": [{"name", "reason"}]}

`inputs` is what the ORT runner feeds: floats uniform in [low, high)
(default [-1, 1)), integers in [low, high) (token ids below the vocabulary
size), or exact `values`.  `input_shapes` is the binding in the one form
every tool takes (shared/tools/check_plan.py takes only --input-shape);
`roamc_args` uses --dim for the hand-built and transformer models so that
both binding forms of roamc are exercised.

A torch export that exists and is newer than this script is kept (a rerun
resumes); --force rewrites everything.  --only SUBSTR writes the matching
models and merges them into an existing corpus.json.  --quick is the CI subset (under
two minutes on two cores).  --gpt2-xl adds only a GPT-2-XL-sized forward
pass (48 layers, hidden 1600, ~6.5 GB of constant weights in one external-data
file) for load-time benchmarks; ORT does not run it.

Models left out of the full corpus on purpose:
  vit_h_14        632M parameters (2.5 GB): over protobuf's 2 GB limit, and
                  torch 1.13 would spill it into one file per tensor
  regnet_y_128gf  645M parameters (2.6 GB): the same
"""
import argparse, importlib.util, json, os, shutil, sys, time, traceback, warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import onnx
    import torch
    import torchvision
except ImportError as e:
    sys.stderr.write("corpus.py: cannot import %s; run it with Debian's /usr/bin/python3\n" % e.name)
    sys.exit(77)

import corpus_handbuilt

TOO_BIG = {"vit_h_14", "regnet_y_128gf"}
BATCH = 2
SEG_SHAPE = [BATCH, 3, 240, 320]        # not square: a swapped H/W shows
DET_SHAPE = [3, 240, 320]               # one image; torchvision's tests make all 3 dims dynamic
SEQ = 24

# models/export.py has BERT and GPT-2 written from their published configs.
_spec = importlib.util.spec_from_file_location("roamc_export", os.path.join(HERE, "export.py"))
E = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(E)

TINY_BERT = dict(layers=2, hidden=64, heads=4, intermediate=256, vocab=1000, max_positions=64)
TINY_GPT2 = dict(layers=2, hidden=64, heads=4, vocab=1000, max_positions=64)
BASE_BERT = dict(E.BERT_CONFIGS["bert-base"], layers=2)
BASE_GPT2 = dict(E.GPT2_CONFIGS["gpt2"], layers=2)
XL_GPT2 = dict(E.GPT2_CONFIGS["gpt2-xl"])


# --------------------------------------------------------------------------
# records

def spec(name, shape, dtype="float32", low=None, high=None, values=None):
    s = {"name": name, "dtype": dtype, "shape": list(shape)}
    if low is not None:
        s["low"], s["high"] = low, high
    if values is not None:
        s["values"] = values
    return s


def record(name, tag, opset, inputs, dims, use_dim=False, oracle=True):
    shapes = ["%s=%s" % (s["name"], ",".join(map(str, s["shape"]))) for s in inputs]
    if use_dim and dims:
        args = [a for k, v in sorted(dims.items()) for a in ("--dim", "%s=%d" % (k, v))]
    else:
        args = [a for s in shapes for a in ("--input-shape", s)]
    return {"name": name, "file": name + ".onnx", "tag": tag, "opset": opset, "inputs": inputs,
            "input_shapes": shapes, "dims": dims, "roamc_args": args, "oracle": oracle}


# --------------------------------------------------------------------------
# torch exports

class TupleOutputs(torch.nn.Module):
    """Segmentation models return {"out": ..., "aux": ...}: export the tensors."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        out = self.net(x)
        return tuple(out.values()) if isinstance(out, dict) else out


class LMForward(torch.nn.Module):
    """models/export.py's BertForMaskedLM / GPT2LMHeadModel as an inference
    forward pass: the same modules, returning the logits and the loss."""

    def __init__(self, kind, cfg):
        super().__init__()
        self.kind = kind
        self.lm = (E.BertForMaskedLM if kind == "bert" else E.GPT2LMHeadModel)(cfg, torch.device("cpu"))

    def forward(self, input_ids, labels):
        m, F = self.lm, torch.nn.functional
        if self.kind == "bert":
            batch, seq = input_ids.size()
            mask = torch.ones((batch, seq))[:, None, None, :]
            mask = (1.0 - mask) * torch.finfo(torch.float32).min
            h = m.embeddings(input_ids)
            for layer in m.layers:
                h = layer(h, mask)
            logits = m.decoder(m.head_norm(F.gelu(m.head_dense(h))))
            return logits, F.cross_entropy(logits.view(-1, m.vocab), labels.view(-1))
        seq = input_ids.size(-1)
        pos = torch.arange(0, seq, dtype=torch.long).unsqueeze(0).view(-1, seq)
        h = m.drop(m.wte(input_ids) + m.wpe(pos))
        for block in m.h:
            h = block(h)
        logits = m.lm_head(m.ln_f(h))
        shifted = logits[..., :-1, :].contiguous()
        return logits, F.cross_entropy(shifted.view(-1, shifted.size(-1)), labels[..., 1:].contiguous().view(-1))


def export(net, args, path, opset, in_names, out_names, dynamic, training=False, **kw):
    if training:
        kw.update(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, args, path, opset_version=opset, input_names=in_names,
                          output_names=out_names, dynamic_axes=dynamic, **kw)


def classification_jobs(names, opsets, training=False):
    """One builder per model: the network is made once, exported at every opset."""
    jobs = []
    for n in names:
        size = 299 if n == "inception_v3" else 224
        tag = "training-mode" if training else "classification"
        recs = [record("%s%s_op%d" % (n, "_train" if training else "", o), tag, o,
                       [spec("input", [BATCH, 3, size, size])], {"batch": BATCH}) for o in opsets]

        def make(n=n, size=size):
            net = getattr(torchvision.models, n)(weights=None)
            net.train(training)
            if n in ("googlenet", "inception_v3"):
                net.aux_logits = False                     # inference graph: logits only
                if hasattr(net, "AuxLogits"):
                    net.AuxLogits = None
            # Batch 1 in the dummy, as users export; the binding (2) differs,
            # so a size baked into the file shows in ONNX Runtime.
            x = torch.randn(1 if not training else 2, 3, size, size)
            return net, (x,), ["input"], ["output"], {"input": {0: "batch"}, "output": {0: "batch"}}
        jobs.append((recs, make, dict(training=training)))
    return jobs


def segmentation_jobs(names, opsets):
    jobs = []
    for n in names:
        recs = [record("%s_op%d" % (n, o), "segmentation", o, [spec("input", SEG_SHAPE)],
                       {"batch": SEG_SHAPE[0], "height": SEG_SHAPE[2], "width": SEG_SHAPE[3]})
                for o in opsets]

        def make(n=n):
            net = TupleOutputs(getattr(torchvision.models.segmentation, n)(
                weights=None, weights_backbone=None)).eval()
            dyn = {"input": {0: "batch", 2: "height", 3: "width"}}
            return net, (torch.randn(1, 3, 224, 224),), ["input"], None, dyn
        jobs.append((recs, make, {}))
    return jobs


# Output names in the order each detection model returns them.
DET_OUTPUTS = {"ssd": ["boxes", "scores", "labels"], "retinanet": ["boxes", "scores", "labels"],
               "fcos": ["boxes", "scores", "labels"], "mask": ["boxes", "labels", "scores", "masks"],
               "keypoint": ["boxes", "labels", "scores", "keypoints", "keypoints_scores"]}


def detection_jobs(names, opsets):
    jobs = []
    for n in names:
        dims = {"channels": DET_SHAPE[0], "height": DET_SHAPE[1], "width": DET_SHAPE[2]}
        recs = [record("%s_op%d" % (n, o), "detection", o,
                       [spec("images_tensors", DET_SHAPE, low=0, high=1)], dims) for o in opsets]

        def make(n=n):
            kw = dict(weights=None, weights_backbone=None)
            if not n.startswith("ssd"):
                # smaller images (torchvision's own ONNX tests do the same), and
                # every box kept: random weights score low, and an empty result
                # would leave the data-dependent sizes untested
                kw.update(min_size=200, max_size=300)
                kw["score_thresh" if n.startswith(("retinanet", "fcos")) else "box_score_thresh"] = 0.0
            net = getattr(torchvision.models.detection, n)(**kw).eval()
            outs = next((v for k, v in DET_OUTPUTS.items() if k in n), ["boxes", "labels", "scores"])
            dyn = {"images_tensors": {0: "channels", 1: "height", 2: "width"}}
            dyn.update({o: {0: "detections"} for o in outs})
            return net, ([torch.rand(3, 300, 400)],), ["images_tensors"], outs, dyn
        jobs.append((recs, make, {}))
    return jobs


def transformer_jobs(variants, opsets, functions=False):
    """variants: [(name, "bert"|"gpt2", cfg)].  Dynamic batch and sequence."""
    jobs = []
    for name, kind, cfg in variants:
        vocab = cfg["vocab"] if "vocab" in cfg else (E.BERT_COMMON if kind == "bert" else E.GPT2_COMMON)["vocab"]
        ins = [spec("input_ids", [BATCH, SEQ], "int64", 0, vocab), spec("labels", [BATCH, SEQ], "int64", 0, vocab)]
        recs = [record("%s_op%d" % (name, o), "transformer", o, ins, {"batch": BATCH, "seq": SEQ}, use_dim=True)
                for o in opsets]

        def make(kind=kind, cfg=cfg, vocab=vocab):
            net = LMForward(kind, cfg).eval()
            ids = torch.randint(0, vocab, (1, 8))
            dyn = {"input_ids": {0: "batch", 1: "seq"}, "labels": {0: "batch", 1: "seq"},
                   "logits": {0: "batch", 1: "seq"}}
            return net, (ids, ids), ["input_ids", "labels"], ["logits", "loss"], dyn
        extra = {}
        if functions:   # torch 1.13 can write modules as ModelProto.functions
            extra["export_modules_as_functions"] = {E.BertLayer if kind == "bert" else E.GPT2Block}
        jobs.append((recs, make, extra))
    return jobs


def run_torch_job(outdir, recs, make, extra, force):
    """Builds the network once and exports it at each record's opset."""
    todo = [r for r in recs if force or not fresh(os.path.join(outdir, r["file"]))]
    done, skipped = [r for r in recs if r not in todo], []
    if not todo:
        return done, skipped
    torch.manual_seed(0)
    try:
        net, args, ins, outs, dyn = make()
    except Exception as e:
        return done, [{"name": r["name"], "reason": "build failed: %s" % oneline(e)} for r in todo]
    for r in todo:
        path = os.path.join(outdir, r["file"])
        t = time.time()
        try:
            export(net, args, path, r["opset"], ins, outs, dyn, **extra)
            onnx.load(path, load_external_data=False)      # a file torch wrote whole
        except Exception as e:
            reason = oneline(e)
            print("  skip %s: export failed: %s" % (r["name"], reason), flush=True)
            skipped.append({"name": r["name"], "reason": "export failed: " + reason})
            if os.path.exists(path):
                os.remove(path)
            continue
        print("  %-46s %7.1f MB %6.1f s" % (r["file"], os.path.getsize(path) / 1e6, time.time() - t), flush=True)
        done.append(r)
    return done, skipped


def oneline(e):
    msg = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, msg[0][:300] if msg else "")


def fresh(path):
    """A torch export newer than this script is kept (hand-built graphs,
    seconds to write, are always rewritten)."""
    return os.path.exists(path) and os.path.getmtime(path) > os.path.getmtime(os.path.abspath(__file__))


# --------------------------------------------------------------------------
# hand-built graphs

def handbuilt_job(outdir, builder, big):
    case = builder(big) if builder is corpus_handbuilt.external_data else builder()
    g = case.model.graph
    name = g.name
    inits = {i.name for i in g.initializer}
    ins = []
    for vi in g.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else case.dims[d.dim_param] for d in t.shape.dim]
        dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.elem_type].name
        lo, hi = case.ranges.get(vi.name, (None, None))
        ins.append(spec(vi.name, shape, dtype, lo, hi, case.values.get(vi.name)))
    opset = next(o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx"))
    tag = "handbuilt-" + ("external-data" if case.external else name.rsplit("_op", 1)[0].replace("_", "-"))
    rec = record(name, tag, opset, ins, case.dims, use_dim=True)
    path = os.path.join(outdir, rec["file"])
    if case.check:
        # not onnx.checker: onnx 1.12's wants a shape on every graph output,
        # and these leave them out on purpose; strict inference checks the
        # nodes against their schemas instead
        onnx.shape_inference.infer_shapes(case.model, check_type=True, strict_mode=True)
    if case.external:
        data = os.path.join(outdir, case.external)
        if os.path.exists(data):
            os.remove(data)      # onnx appends to an existing data file
        onnx.save_model(case.model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=case.external, size_threshold=1024)
    else:
        onnx.save(case.model, path)
    return rec


# --------------------------------------------------------------------------
# GPT-2-XL, for load-time benchmarks only

def gpt2_xl(outdir, force):
    """Exports the forward pass with constant weights (their values do not
    matter for loading), then gathers the per-tensor
    files torch writes for a >2 GB model into one external-data file."""
    rec = record("gpt2_xl_op17", "transformer-xl", 17,
                 [spec("input_ids", [1, 1024], "int64", 0, 50257), spec("labels", [1, 1024], "int64", 0, 50257)],
                 {"batch": 1, "seq": 1024}, use_dim=True, oracle=False)
    path = os.path.join(outdir, rec["file"])
    if not force and fresh(path):
        return rec
    free = shutil.disk_usage(outdir).free
    if free < 14e9:     # two copies of the weights while they are gathered
        raise RuntimeError("gpt2-xl needs 14 GB free in %s (%.1f GB free)" % (outdir, free / 1e9))
    net = LMForward("gpt2", XL_GPT2)
    with torch.no_grad():
        # one constant per tensor: torch's exporter merges initializers with
        # equal values, and all-zero layers would collapse into one
        for i, p in enumerate(net.parameters()):
            p.fill_(1e-4 * (i + 1))
    tmp = os.path.join(outdir, "gpt2_xl_tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    ids = torch.zeros((1, 8), dtype=torch.long)
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "labels": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    export(net, (ids, ids), os.path.join(tmp, "m.onnx"), 17, ["input_ids", "labels"], ["logits", "loss"], dyn)
    del net
    consolidate(os.path.join(tmp, "m.onnx"), path, "gpt2_xl_op17.onnx.data")
    shutil.rmtree(tmp)
    return rec


def consolidate(src, dst, data_name):
    """Rewrites a model whose initializers live in one file each (or inline)
    so that all of them live in DST's directory in one file, DATA_NAME,
    streaming the bytes (never the whole 6 GB in memory)."""
    from onnx.external_data_helper import uses_external_data
    m = onnx.load(src, load_external_data=False)
    srcdir, dstdir = os.path.dirname(src), os.path.dirname(dst)
    with open(os.path.join(dstdir, data_name), "wb") as out:
        for t in m.graph.initializer:
            if uses_external_data(t):
                info = {e.key: e.value for e in t.external_data}
                with open(os.path.join(srcdir, info["location"]), "rb") as f:
                    f.seek(int(info.get("offset", 0)))
                    blob = f.read(int(info["length"])) if "length" in info else f.read()
            elif len(t.raw_data) >= 1024:
                blob = t.raw_data
            else:
                continue
            off = out.tell()
            out.write(blob)
            out.write(b"\0" * (-len(blob) % 4096))             # page-aligned offsets, for loaders that map them
            del t.external_data[:]
            t.ClearField("raw_data")
            t.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(off)), ("length", str(len(blob)))):
                t.external_data.add(key=k, value=v)
    onnx.save(m, dst)


# --------------------------------------------------------------------------

def plan(quick):
    """The torch jobs of the corpus: [(records, make, export kwargs)]."""
    if quick:
        return (classification_jobs(["resnet18"], [11, 17]) +
                classification_jobs(["mobilenet_v3_small"], [13]) +
                segmentation_jobs(["lraspp_mobilenet_v3_large"], [11]) +
                detection_jobs(["fasterrcnn_mobilenet_v3_large_320_fpn"], [11]) +
                transformer_jobs([("bert_tiny", "bert", TINY_BERT)], [13]) +
                transformer_jobs([("gpt2_tiny", "gpt2", TINY_GPT2)], [17]) +
                transformer_jobs([("bert_tiny_functions", "bert", TINY_BERT)], [15], functions=True) +
                classification_jobs(["resnet18"], [17], training=True))
    vision = [n for n in torchvision.models.list_models(module=torchvision.models) if n not in TOO_BIG] \
        if hasattr(torchvision.models, "list_models") else sorted(
            n for n, f in vars(torchvision.models).items()
            if callable(f) and n[0].islower() and not n.startswith(("_", "get_", "list_")) and n not in TOO_BIG)
    return (classification_jobs(vision, [11, 13, 17]) +
            segmentation_jobs(["fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large",
                               "lraspp_mobilenet_v3_large"], [11, 13, 17]) +
            detection_jobs(["fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_resnet50_fpn",
                            "retinanet_resnet50_fpn", "fcos_resnet50_fpn", "ssdlite320_mobilenet_v3_large",
                            "ssd300_vgg16", "maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn"], [11, 13, 17]) +
            transformer_jobs([("bert_tiny", "bert", TINY_BERT), ("gpt2_tiny", "gpt2", TINY_GPT2),
                              ("bert_l2", "bert", BASE_BERT), ("gpt2_l2", "gpt2", BASE_GPT2)], [13, 17]) +
            transformer_jobs([("bert_tiny_functions", "bert", TINY_BERT),
                              ("gpt2_tiny_functions", "gpt2", TINY_GPT2)], [15, 17], functions=True) +
            classification_jobs(["resnet18", "mobilenet_v2"], [13, 17], training=True))


def op_table(outdir):
    """The operators and opset imports of the corpus in OUTDIR, as text: what
    the C shape inference has to cover (nodes in If/Loop/Scan bodies and in
    model-local functions counted too, and marked)."""
    import collections
    with open(os.path.join(outdir, "corpus.json")) as f:
        recs = json.load(f)["models"]
    nodes, inner, models = collections.Counter(), collections.Counter(), collections.defaultdict(set)
    opsets, irs = collections.defaultdict(collections.Counter), collections.Counter()

    def walk(graph_nodes, name, top):
        for n in graph_nodes:
            key = (n.domain or "ai.onnx", n.op_type)
            (nodes if top else inner)[key] += 1
            models[key].add(name)
            for a in n.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    walk(g.node, name, False)
    for r in recs:
        m = onnx.load(os.path.join(outdir, r["file"]), load_external_data=False)
        irs[m.ir_version] += 1
        for o in m.opset_import:
            opsets[o.domain or "ai.onnx"][o.version] += 1
        walk(m.graph.node, r["name"], True)
        for fn in m.functions:
            walk(fn.node, r["name"], False)
    lines = ["# Operators in the corpus (%d models in %s): domain, op_type, nodes in main graphs,"
             % (len(recs), os.path.basename(os.path.abspath(outdir))),
             "# nodes in subgraphs/functions, models using it.  models/corpus.py OUTDIR --ops"]
    for key in sorted(set(nodes) | set(inner)):
        lines.append("%-20s %-30s %7d %5d %4d" % (key[0], key[1], nodes[key], inner[key], len(models[key])))
    lines.append("# opset_import: domain version(models) ...")
    for d in sorted(opsets):
        lines.append("%-20s %s" % (d, " ".join("%d(%d)" % kv for kv in sorted(opsets[d].items()))))
    lines.append("# ir_version(models): " + " ".join("%d(%d)" % kv for kv in sorted(irs.items())))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--quick", action="store_true", help="the CI subset")
    ap.add_argument("--only", help="only models whose name contains this")
    ap.add_argument("--gpt2-xl", action="store_true", help="only the GPT-2-XL load-time model")
    ap.add_argument("--force", action="store_true", help="rewrite files that are up to date")
    ap.add_argument("--ops", action="store_true", help="write nothing; print the corpus's operators")
    a = ap.parse_args()
    if a.ops:
        sys.stdout.write(op_table(a.outdir))
        return
    os.makedirs(a.outdir, exist_ok=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    t0 = time.time()
    models, skipped = [], []
    if a.gpt2_xl:
        models.append(gpt2_xl(a.outdir, a.force))
    else:
        for recs, make, extra in plan(a.quick):
            recs = [r for r in recs if not a.only or a.only in r["name"]]
            if recs:
                done, skip = run_torch_job(a.outdir, recs, make, extra, a.force)
                models += done
                skipped += skip
        for b in corpus_handbuilt.BUILDERS + [corpus_handbuilt.external_data]:
            if not a.only or a.only in b.__name__:
                try:
                    models.append(handbuilt_job(a.outdir, b, not a.quick))
                except Exception as e:
                    traceback.print_exc()
                    skipped.append({"name": b.__name__, "reason": oneline(e)})
    index = os.path.join(a.outdir, "corpus.json")
    if (a.only or a.gpt2_xl) and os.path.exists(index):     # merge into the existing listing
        with open(index) as f:
            old = json.load(f)
        names = {m["name"] for m in models} | {s["name"] for s in skipped}
        models = [m for m in old["models"] if m["name"] not in names] + models
        skipped = [s for s in old.get("skipped", []) if s["name"] not in names] + skipped
    with open(index + ".tmp", "w") as f:
        json.dump({"models": models, "skipped": skipped}, f, indent=1)
    os.replace(index + ".tmp", index)
    size = sum(os.path.getsize(os.path.join(a.outdir, f)) for f in os.listdir(a.outdir)
               if os.path.isfile(os.path.join(a.outdir, f)))
    print("corpus.py: %d models, %d skipped, %.1f MB in %s, %.0f s"
          % (len(models), len(skipped), size / 1e6, a.outdir, time.time() - t0))
    for s in skipped:
        print("  skipped %s: %s" % (s["name"], s["reason"]))


if __name__ == "__main__":
    main()
