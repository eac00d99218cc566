#!/usr/bin/python3
"""roamc --train's gradient rules against PyTorch autograd, on small modules.

usage: tests/train_grads.py ROAMC CHECK_PLAN_PY OUTDIR [CASE...]

Each case is a small nn.Module built so that the operators under test sit on
the gradient path with parameters feeding them directly, in broadcast
positions where the operator broadcasts (a bias [C] added to [N, C], a scale
[1, C, 1, 1], a weight behind a Transpose, an embedding behind a Gather...),
so that every parameter's gradient comes out of the rules being tested.  For
each case:

  1. torch.onnx.export, training mode, opset 17, no constant folding: the
     forward file a model hub would give;
  2. roamc FILE --train [--loss ...] --emit-train DERIVED -o PLAN;
  3. the derived step's trained parameters (roamc.parameters) are exactly the
     module's parameters that autograd gives a gradient, and each gradient
     value (roamc.gradients) has the shape and dtype of autograd's .grad for
     the same loss (cross-entropy on the logits, or the module's own loss);
  4. the plan passes `roamc check` and tools/check_plan.py.

Then every operator in the rule table (frontend/train/TRAIN.md) must have appeared
on a gradient path in some case.  Exit 0 pass, 1 fail, 77 skip (no torch).
"""
import importlib.util
import io
import contextlib
import os
import subprocess
import sys
import time
import warnings

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx
except ImportError as e:
    print("SKIP: /usr/bin/python3 cannot import torch and onnx (%s)" % e)
    sys.exit(77)

warnings.filterwarnings("ignore")

# The operators frontend/train/train_rules.c has a gradient rule for (tr_rules), less Sum
# (torch.onnx writes Python sums as Add chains); each must be on a gradient
# path in some case below.
RULE_OPS = """Relu Sigmoid Tanh LeakyRelu Elu Selu Celu HardSigmoid HardSwish Softplus Softmax
LogSoftmax Exp Log Neg Cast Sqrt Erf Pow Abs Sin Cos Reciprocal Clip Add Sub Mul Div Where MatMul
Gemm Conv ConvTranspose BatchNormalization LayerNormalization MaxPool AveragePool GlobalAveragePool
ReduceMean ReduceSum Reshape Flatten Squeeze Unsqueeze Identity Transpose Concat Split Slice Gather
GatherElements Expand Tile Pad Dropout SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss""".split()


class Unary1(nn.Module):
    """Activations, each on its own branch of a parameter-dependent value, summed."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.out = nn.Linear(16, 10)
        self.acts = [nn.ReLU(), nn.Sigmoid(), nn.Tanh(), nn.LeakyReLU(0.1), nn.ELU(), nn.SELU(), nn.CELU(),
                     nn.Hardsigmoid(), nn.Hardswish(), nn.Softplus(), nn.GELU(), nn.SiLU(), nn.ReLU6(),
                     nn.Hardtanh(-0.5, 0.5)]

    def forward(self, x):
        h = self.fc(x)
        return self.out(sum(a(h) for a in self.acts))


class Unary2(nn.Module):
    """Math: exp, log, neg, sqrt, erf, pow, abs, sin, cos, reciprocal, a cast round trip."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.out = nn.Linear(16, 10)

    def forward(self, x):
        h = self.fc(x)
        p = torch.sigmoid(h) + 1.0
        y = torch.exp(h) + torch.log(p) - torch.sqrt(p) + torch.erf(h) + torch.pow(h, 3.0)
        y = y + torch.abs(h) * torch.sin(h) + torch.cos(h) + torch.reciprocal(p) + (-h)
        y = y + h.double().float()
        return self.out(y)


class Broadcast(nn.Module):
    """Add/Sub/Mul/Div/Where/Pow with parameters in broadcast positions (Pow's exponent)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.a = nn.Parameter(torch.randn(16))
        self.b = nn.Parameter(torch.randn(1, 16))
        self.c = nn.Parameter(torch.randn(4, 1))
        self.d = nn.Parameter(torch.randn(16))
        self.e = nn.Parameter(torch.ones(16))
        self.out = nn.Linear(16, 10)

    def forward(self, x):
        h = self.fc(x)
        y = (h + self.a) * self.b - self.c
        y = y / (self.b.abs() + 1.0) + torch.where(h > 0, y, self.d)
        y = y + torch.pow(torch.sigmoid(h) + 1.0, self.e)
        return self.out(y)


class ConvNet(nn.Module):
    """Conv (bias), ConvTranspose, BatchNorm, pools, Pad, Concat, Split, Dropout, Flatten, Gemm."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.ct = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.c2 = nn.Conv2d(4, 8, 3, stride=2, padding=0, bias=False)
        self.scale = nn.Parameter(torch.ones(1, 8, 1, 1))
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        h = F.relu(self.bn(self.c1(x)))
        h = F.max_pool2d(h, 2)
        u = self.ct(h)
        u = F.pad(u, (1, 1, 1, 1))
        v = self.c2(u) * self.scale
        a, b = torch.split(v, 4, dim=1)
        v = torch.cat([F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)], dim=1)
        v = torch.cat([F.adaptive_avg_pool2d(v, 1), F.adaptive_avg_pool2d(v * v, 1)], dim=1)
        return self.fc(self.drop(torch.flatten(v, 1)))


class Attention(nn.Module):
    """Embedding (Gather), LayerNorm, MatMul with a transposed weight and batched, Softmax,
    heads split by Reshape/Transpose, Slice, Unsqueeze/Squeeze, Expand and Tile of a
    parameter, ReduceMean/ReduceSum, GatherElements, LogSoftmax."""

    def __init__(self, V=32, H=16):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.pos = nn.Parameter(torch.randn(1, 1, H))
        self.bias2 = nn.Parameter(torch.randn(1, H // 2))
        self.ln = nn.LayerNorm(H)
        self.qkv = nn.Parameter(torch.randn(3 * H, H))
        self.proj = nn.Linear(H, H)
        self.head = nn.Parameter(torch.randn(V, H))
        self.H = H

    def forward(self, ids):
        B, S = ids.shape
        h = self.emb(ids) + self.pos.expand(B, S, self.H)
        h = self.ln(h)
        q, k, v = torch.matmul(h, self.qkv.t()).split(self.H, dim=-1)
        q = q.reshape(B, S, 2, self.H // 2).transpose(1, 2)
        k = k.reshape(B, S, 2, self.H // 2).transpose(1, 2)
        v = v.reshape(B, S, 2, self.H // 2).transpose(1, 2)
        a = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / 4.0, dim=-1)
        c = torch.matmul(a, v).transpose(1, 2).reshape(B, S, self.H)
        c = c + self.bias2.repeat(1, 2).unsqueeze(0)
        c = c + c.mean(dim=-1, keepdim=True) + c.sum(dim=1, keepdim=True).squeeze(1).unsqueeze(1)
        c = torch.cat([c[:, :1], c[:, 1:] * 2.0], dim=1)
        idx = torch.zeros(B, S, self.H, dtype=torch.long)
        c = c + torch.gather(c, 2, idx)
        c = torch.log_softmax(self.proj(c), dim=-1)
        return torch.matmul(c, self.head.t())  # logits [B, S, V]


class OwnLossCE(nn.Module):
    """The model computes its loss: SoftmaxCrossEntropyLoss (F.cross_entropy)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 10)

    def forward(self, x, target):
        return F.cross_entropy(self.fc(x), target)


class OwnLossNLL(nn.Module):
    """NegativeLogLikelihoodLoss on Log(Softmax) (torch.onnx fuses F.log_softmax + nll_loss
    into SoftmaxCrossEntropyLoss, this form it keeps apart)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 10)

    def forward(self, x, target):
        return F.nll_loss(torch.log(torch.softmax(self.fc(x), dim=1)), target)


def insert_identity(model):
    """torch.onnx drops nn.Identity; put an ONNX Identity after the first node, as other
    exporters write them (the module is unchanged: identity is identity)."""
    g = model.graph
    first = g.node[0]
    old = first.output[0]
    first.output[0] = old + "_pre_identity"
    g.node.insert(1, onnx.helper.make_node("Identity", [first.output[0]], [old], name="identity"))


class DropoutP0(nn.Module):
    """nn.Dropout(0.0) in training mode (all of torchvision's ViT dropouts): PyTorch returns
    the input itself, so the derived step must too: a view, no mask, the gradient passed on."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.drop = nn.Dropout(0.0)
        self.out = nn.Linear(16, 10)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.fc(x))))


def dropout_is_view(derived):
    """Every Dropout of the derived step is alias [0, ...] inplace 0 with no backward op."""
    bad = []
    for n in derived.graph.node:
        if n.op_type == "Dropout":
            al = {a.name: a for a in n.attribute}
            if "alias" not in al or list(al["alias"].ints)[:1] != [0] or al["inplace"].i != 0:
                bad.append("Dropout %s is not a view of its input" % n.name)
        if n.op_type == "native_dropout_backward":
            bad.append("a p=0 Dropout got native_dropout_backward")
    return bad


class BnDropout(nn.Module):
    """Linear, BatchNorm1d, ReLU, Dropout(0.3), Linear: exported in training mode, then turned
    into the inference form an eval-mode exporter writes (to_inference_form), which roamc must
    plan in training mode again (frontend/train/train_export.c): the gradients autograd gives
    in training mode, BatchNorm updating its running stats in place, Dropout's mask saved."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(16, 10)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.bn(self.fc(x)))))


def to_inference_form(model):
    """BatchNormalization: training_mode 0, one output; Dropout: training_mode a false
    initializer, no mask output."""
    g = model.graph
    for n in g.node:
        if n.op_type == "BatchNormalization":
            for a in n.attribute:
                if a.name == "training_mode":
                    a.i = 0
            del n.output[1:]
        elif n.op_type == "Dropout":
            name = n.name + ".training_mode_false"
            g.initializer.append(onnx.helper.make_tensor(name, onnx.TensorProto.BOOL, [], [False]))
            n.input[2] = name
            del n.output[1:]
    del g.value_info[:]


def trained_in_training_mode(derived):
    bad = []
    by = {n.op_type: n for n in derived.graph.node}
    bn, dr = by.get("BatchNormalization"), by.get("Dropout")
    at = {a.name: a for a in bn.attribute} if bn else {}
    if not bn or len(bn.output) != 3 or at["training_mode"].i != 1 or list(at["alias"].ints) != [-1, 3, 4]:
        bad.append("BatchNormalization is not in training mode with its stats updated in place")
    nb = by.get("native_dropout_backward")
    if not dr or len(dr.output) != 2 or nb is None or dr.output[1] not in nb.input:
        bad.append("Dropout has no mask that native_dropout_backward reads")
    return bad


class CausalMask(nn.Module):
    """GPT-2's mask: a bool buffer sliced and cast to bool before torch.where.  In PyTorch
    both are views (the slice of a buffer, .to() of the same dtype), so the derived step's
    Slice and Cast must be views too, or Where's backward keeps a mask copy per layer."""

    def __init__(self, n=8):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, n, n))
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 10)

    def forward(self, x):  # x [B, 6, 6]
        h = self.fc(x)
        s = x.shape[1]
        mask = self.bias[:, :s, :s].to(torch.bool)
        h = torch.where(mask, h, torch.tensor(-1e4))
        return self.out(h.softmax(-1).sum(1))


def mask_is_view(derived):
    bad = []
    for n in derived.graph.node:
        if n.op_type in ("Slice", "Cast") and any("bias" in x or "Slice" in x for x in n.input[:1]):
            al = {a.name: a for a in n.attribute}
            if "alias" not in al or list(al["alias"].ints)[:1] != [0]:
                bad.append("%s %s of the mask buffer is not a view" % (n.op_type, n.name))
    return bad


class Regression(nn.Module):
    """mse against a label shaped like the output; a frozen-free MLP with Gemm and Tanh."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def _x(*s):
    return torch.randn(*s)


CASES = {  # name: (module, example inputs, roamc --loss, torch loss of (output, inputs)
          #        [, edit of the forward file[, extra check of the derived file]])
    "unary_activations": (Unary1, lambda: (_x(4, 12),), None, "ce"),
    "unary_math": (Unary2, lambda: (_x(4, 12),), None, "ce"),
    "broadcast": (Broadcast, lambda: (_x(4, 12),), None, "ce"),
    "conv": (ConvNet, lambda: (_x(2, 3, 8, 8),), None, "ce"),
    "attention": (Attention, lambda: (torch.randint(0, 32, (2, 5)),), None, "ce3"),
    "own_loss_ce": (OwnLossCE, lambda: (_x(4, 12), torch.randint(0, 10, (4,))), "none", "own"),
    "own_loss_nll": (OwnLossNLL, lambda: (_x(4, 12), torch.randint(0, 10, (4,))), "none", "own", insert_identity),
    "regression_mse": (Regression, lambda: (_x(4, 12),), "mse", "mse"),
    "dropout_p0": (DropoutP0, lambda: (_x(4, 12),), None, "ce", None, dropout_is_view),
    "causal_mask": (CausalMask, lambda: (_x(2, 6, 6),), None, "ce", None, mask_is_view),
    "eval_bn_dropout": (BnDropout, lambda: (_x(4, 12),), None, "ce", to_inference_form, trained_in_training_mode),
}


def torch_grads(mod, inputs, kind):
    out = mod(*inputs)
    if kind == "ce":
        loss = F.cross_entropy(out, torch.zeros(out.shape[0], dtype=torch.long))
    elif kind == "ce3":
        loss = F.cross_entropy(out.flatten(0, 1), torch.zeros(out.shape[0] * out.shape[1], dtype=torch.long))
    elif kind == "mse":
        loss = F.mse_loss(out, torch.zeros_like(out))
    else:
        loss = out
    loss.backward()
    return {n: (tuple(p.grad.shape), p.grad.dtype) for n, p in mod.named_parameters() if p.grad is not None}


ONNX_FLOAT = {onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.DOUBLE: torch.float64,
              onnx.TensorProto.FLOAT16: torch.float16}


def derived_grads(path):
    m = onnx.load(path)
    meta = {p.key: p.value for p in m.metadata_props}
    g = m.graph
    vi = {v.name: v.type.tensor_type for v in list(g.input) + list(g.output) + list(g.value_info)}
    params = [x for x in meta.get("roamc.parameters", "").split(",") if x]
    grads = meta.get("roamc.gradients", "").split(",")
    out = {}
    for p, gname in zip(params, grads):
        if not gname:
            out[p] = None
            continue
        t = vi[gname]
        out[p] = (tuple(d.dim_value for d in t.shape.dim), ONNX_FLOAT.get(t.elem_type, t.elem_type))
    return out, len(params) == len(grads)


def gradient_path_ops(fwd_path, derived_path):
    """Forward op types whose node got a backward: an op is on a gradient path when one
    of its outputs has a gradient in the derived graph (a value named in a backward op's
    inputs besides forward values is hard to tell; use the forward nodes whose outputs are
    read by a non-forward node or whose inputs include a parameter)."""
    f = onnx.load(fwd_path)
    d = onnx.load(derived_path)
    n_fwd = len(f.graph.node)
    meta = {p.key: p.value for p in d.metadata_props}
    params = set(x for x in meta.get("roamc.parameters", "").split(",") if x)
    # values that require grad, forward: parameters and what differentiable ops make from them
    req = set(params)
    ops = set()
    for n in d.graph.node[:n_fwd]:
        if any(i in req for i in n.input):
            ops.add(n.op_type)
            req.update(o for o in n.output if o)
    return ops


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    roamc, check_plan, outdir = sys.argv[1:4]
    only = sys.argv[4:]
    os.makedirs(outdir, exist_ok=True)
    cp = None
    if os.path.isfile(check_plan):
        spec = importlib.util.spec_from_file_location("check_plan", check_plan)
        cp = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cp)
    else:
        print("note: %s not found; plans checked by roamc check only" % check_plan)
    torch.manual_seed(0)
    fails = 0
    covered = set()
    t0 = time.time()
    for name, (cls, mk, loss, kind, *edit) in CASES.items():
        if only and name not in only:
            continue
        mod = cls().train()
        inputs = mk()
        fwd = os.path.join(outdir, name + ".onnx")
        der = os.path.join(outdir, name + ".derived.onnx")
        plan = os.path.join(outdir, name + ".plan.json")
        names = ["input%d" % i for i in range(len(inputs))]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            torch.onnx.export(mod, inputs, fwd, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=names, output_names=["out"])
        if edit and edit[0]:
            m = onnx.load(fwd)
            edit[0](m)
            onnx.save(m, fwd)
        cmd = [roamc, fwd, "--train", "--emit-train", der, "-q", "-o", plan] + (["--loss", loss] if loss else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print("FAIL %s: %s: %s" % (name, " ".join(cmd), r.stderr.strip()))
            fails += 1
            continue
        problems = []
        want = torch_grads(mod, inputs, kind)
        got, aligned = derived_grads(der)
        if not aligned:
            problems.append("roamc.parameters and roamc.gradients differ in length")
        for p in sorted(set(want) | set(got)):
            if p not in got:
                problems.append("autograd gives %s a gradient %s; the derived step does not train it" % (p, want[p][0]))
            elif p not in want:
                problems.append("the derived step trains %s; autograd gives it no gradient" % p)
            elif got[p] != want[p]:
                problems.append("gradient of %s: derived %s, autograd %s" % (p, got[p], want[p]))
        r = subprocess.run([roamc, "check", der, plan], capture_output=True, text=True)
        if r.returncode:
            problems.append("roamc check: %s" % (r.stdout + r.stderr).strip().split("\n")[-1])
        if cp is not None:
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf):
                    cp.main(["check_plan.py", der, plan])
            except SystemExit as e:
                if e.code:
                    problems.append("check_plan.py: %s" % buf.getvalue().strip().split("\n")[0])
        if len(edit) > 1:
            problems += edit[1](onnx.load(der))
        ops = gradient_path_ops(fwd, der)
        covered |= ops
        for p in problems:
            print("FAIL %s: %s" % (name, p))
        fails += bool(problems)
        if not problems:
            print("ok   %s: %d parameters, gradient shapes equal autograd's; plan valid; ops on the gradient "
                  "path: %s" % (name, len(want), " ".join(sorted(ops))))
    if not only:
        missing = [o for o in RULE_OPS if o not in covered]
        if missing:
            print("FAIL coverage: rules not exercised on a gradient path: %s" % " ".join(missing))
            fails += 1
        else:
            print("ok   coverage: all %d rule operators were on a gradient path" % len(RULE_OPS))
    print("%s (%.1f s)" % ("FAILED" if fails else "PASS", time.time() - t0))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
