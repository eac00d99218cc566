#!/usr/bin/python3
"""Export one whole PyTorch training step as a roamc training-graph ONNX file.

usage:
  models/export.py --model NAME [--batch N | --symbolic-batch] [--image-size S]
                   [--seq-len L] [--optimizer adam|adamw|sgd] [--layers N] [-o OUT.onnx]
  models/export.py --module FILE.py:FUNC [--batch N | --symbolic-batch] [-o OUT.onnx]
                                      # your own nn.Module (see models/example_module.py)
  models/export.py --all DIR          # the evaluation set (see models/README.md)
  models/export.py --list             # the model names this exporter knows

Runs with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision
0.14, python3-onnx) and needs no network and no weights.

How it works: the model, its parameters, buffers, optimizer state and the data
inputs live on the `meta` device (shapes only, no memory), and one training
step -- forward, cross-entropy loss, loss.backward(), optimizer.step() -- runs
eagerly under a TorchDispatchMode that records every ATen operator PyTorch
dispatches, in the order it dispatches them (the autograd engine's order for
the backward pass).  Each recorded call becomes one ONNX node in the domain
`org.pytorch.aten`; tensor arguments are node inputs, other arguments are node
attributes.  Aliasing comes from the operator schemas (returns `Tensor(a)` /
`Tensor(a!)`, mutable arguments), cross-checked against the storages the meta
tensors really share.  Every node output gets a fresh SSA name, in-place
outputs included, so the data flow stays a DAG.  See models/README.md for the
convention details.
"""
import argparse
import math
import os
import re
import sys
import time

EXPORTER_VERSION = "1.0"
ATEN_DOMAIN = "org.pytorch.aten"

# The evaluation set of the ROAM paper (section V): (model, batch, extra options)
EVAL_SET = (
    [(m, b) for m in ("alexnet", "vgg16", "mnasnet1_0", "mobilenet_v2", "efficientnet_b0",
                      "vit_b_16", "bert-base") for b in (1, 32)]
    + [("gpt2-xl", b) for b in (1, 2, 4)]
)


def die(msg, code=2):
    sys.stderr.write("export.py: error: %s\n" % msg)
    sys.exit(code)


DEBIAN_PYTHON = "/usr/bin/python3"


def die_missing(module, e):
    """torch, torchvision and onnx are Debian's packages, so only Debian's own interpreter
    has them; the python3 first on PATH (a venv, pyenv, conda) is often another one."""
    here = sys.executable or "this interpreter"
    if os.path.realpath(here) == os.path.realpath(DEBIAN_PYTHON) and os.path.exists(DEBIAN_PYTHON):
        fix = "install them: apt-get install python3-torch python3-torchvision python3-onnx"
    else:
        fix = "run it with Debian's %s, which has them (python3-torch, python3-torchvision, " \
              "python3-onnx): %s %s ..." % (DEBIAN_PYTHON, DEBIAN_PYTHON, sys.argv[0] or "models/export.py")
    die("cannot import %s (%s) in %s; %s" % (module, e, here, fix), 3)


try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError as e:  # pragma: no cover - reported to the user
    die_missing("torch", e)


# ---------------------------------------------------------------------------
# Models written as plain torch modules from their published configurations.
# They follow the HuggingFace `transformers` implementations operator for
# operator (BertForMaskedLM, GPT2LMHeadModel) so that the recorded ATen graph
# is what those models execute, without depending on transformers.
# ---------------------------------------------------------------------------

BERT_CONFIGS = {
    "bert-base": dict(layers=12, hidden=768, heads=12, intermediate=3072),
    "bert-large": dict(layers=24, hidden=1024, heads=16, intermediate=4096),
}
BERT_COMMON = dict(vocab=30522, max_positions=512, type_vocab=2, eps=1e-12, dropout=0.1)

GPT2_CONFIGS = {
    "gpt2": dict(layers=12, hidden=768, heads=12),
    "gpt2-medium": dict(layers=24, hidden=1024, heads=16),
    "gpt2-large": dict(layers=36, hidden=1280, heads=20),
    "gpt2-xl": dict(layers=48, hidden=1600, heads=25),
    # a 2-layer transformer small enough for tests and the CPU harness (models/dist_harness.py)
    "gpt2-tiny": dict(layers=2, hidden=128, heads=4, vocab=2048, max_positions=256, seq_len=64),
}
GPT2_COMMON = dict(vocab=50257, max_positions=1024, eps=1e-5, dropout=0.1)

# LLaMA (Touvron et al. 2023) as transformers 4.28's LlamaForCausalLM: RMSNorm, rotary
# position embeddings, SwiGLU MLP, no biases, no dropout, an untied LM head.
LLAMA_CONFIGS = {
    "llama-7b": dict(layers=32, hidden=4096, heads=32, intermediate=11008),
    # a 2-layer LLaMA small enough for tests
    "llama-tiny": dict(layers=2, hidden=128, heads=4, intermediate=344, vocab=2048,
                       max_positions=256, seq_len=64),
}
LLAMA_COMMON = dict(vocab=32000, max_positions=2048, seq_len=2048, eps=1e-6, rope_base=10000.0)


class BertEmbeddings(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab"], c["hidden"], padding_idx=0, device=device)
        self.position_embeddings = nn.Embedding(c["max_positions"], c["hidden"], device=device)
        self.token_type_embeddings = nn.Embedding(c["type_vocab"], c["hidden"], device=device)
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=c["eps"], device=device)
        self.dropout = nn.Dropout(c["dropout"])
        self.register_buffer("position_ids",
                             torch.arange(c["max_positions"], device=device).expand((1, -1)))
        self.register_buffer("token_type_ids",
                             torch.zeros((1, c["max_positions"]), dtype=torch.long, device=device))

    def forward(self, input_ids):
        batch, seq = input_ids.size()
        position_ids = self.position_ids[:, :seq]
        token_type_ids = self.token_type_ids[:, :seq].expand(batch, seq)
        emb = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        emb += self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(emb))


class BertSelfAttention(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.heads = c["heads"]
        self.head_size = c["hidden"] // c["heads"]
        self.query = nn.Linear(c["hidden"], c["hidden"], device=device)
        self.key = nn.Linear(c["hidden"], c["hidden"], device=device)
        self.value = nn.Linear(c["hidden"], c["hidden"], device=device)
        self.dropout = nn.Dropout(c["dropout"])

    def split_heads(self, x):
        return x.view(x.size()[:-1] + (self.heads, self.head_size)).permute(0, 2, 1, 3)

    def forward(self, h, mask):
        q = self.split_heads(self.query(h))
        k = self.split_heads(self.key(h))
        v = self.split_heads(self.value(h))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)
        scores = scores + mask
        probs = self.dropout(F.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.heads * self.head_size,))


class BertLayer(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        H, I = c["hidden"], c["intermediate"]
        self.attention = BertSelfAttention(c, device)
        self.attention_output = nn.Linear(H, H, device=device)
        self.attention_dropout = nn.Dropout(c["dropout"])
        self.attention_norm = nn.LayerNorm(H, eps=c["eps"], device=device)
        self.intermediate = nn.Linear(H, I, device=device)
        self.output = nn.Linear(I, H, device=device)
        self.output_dropout = nn.Dropout(c["dropout"])
        self.output_norm = nn.LayerNorm(H, eps=c["eps"], device=device)

    def forward(self, h, mask):
        a = self.attention(h, mask)
        a = self.attention_norm(self.attention_dropout(self.attention_output(a)) + h)
        i = F.gelu(self.intermediate(a))
        return self.output_norm(self.output_dropout(self.output(i)) + a)


class BertForMaskedLM(nn.Module):
    """BERT encoder + masked-LM head (decoder tied to the word embeddings), no pooler."""

    def __init__(self, cfg, device):
        super().__init__()
        c = dict(BERT_COMMON, **cfg)
        self.vocab = c["vocab"]
        self.embeddings = BertEmbeddings(c, device)
        self.layers = nn.ModuleList([BertLayer(c, device) for _ in range(c["layers"])])
        self.head_dense = nn.Linear(c["hidden"], c["hidden"], device=device)
        self.head_norm = nn.LayerNorm(c["hidden"], eps=c["eps"], device=device)
        self.decoder = nn.Linear(c["hidden"], c["vocab"], device=device)
        self.decoder.weight = self.embeddings.word_embeddings.weight  # tied, as in BERT

    def forward(self, input_ids, labels):
        batch, seq = input_ids.size()
        # BertModel without an attention_mask argument: all ones, extended to [B,1,1,S]
        attention_mask = torch.ones((batch, seq), device=input_ids.device)
        mask = attention_mask[:, None, None, :].to(dtype=torch.float32)
        mask = (1.0 - mask) * torch.finfo(torch.float32).min
        h = self.embeddings(input_ids)
        for layer in self.layers:
            h = layer(h, mask)
        h = self.head_norm(F.gelu(self.head_dense(h)))
        scores = self.decoder(h)
        return F.cross_entropy(scores.view(-1, self.vocab), labels.view(-1))


class GPT2Conv1D(nn.Module):
    """GPT-2's Conv1D: a linear layer with the weight stored [in, out] (addmm)."""

    def __init__(self, nf, nx, device):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(nn.init.normal_(torch.empty(nx, nf, device=device), std=0.02))
        self.bias = nn.Parameter(torch.zeros(nf, device=device))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        H, P = c["hidden"], c["max_positions"]
        self.heads, self.head_dim, self.hidden = c["heads"], H // c["heads"], H
        # causal mask buffer, bool [1,1,P,P] as in transformers' GPT2Attention
        self.register_buffer("bias", torch.tril(torch.ones((P, P), dtype=torch.bool, device=device))
                             .view(1, 1, P, P))
        self.c_attn = GPT2Conv1D(3 * H, H, device)
        self.c_proj = GPT2Conv1D(H, H, device)
        self.attn_dropout = nn.Dropout(c["dropout"])
        self.resid_dropout = nn.Dropout(c["dropout"])

    def split_heads(self, x):
        return x.view(x.size()[:-1] + (self.heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, h):
        q, k, v = self.c_attn(h).split(self.hidden, dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        ql, kl = q.size(-2), k.size(-2)
        causal = self.bias[:, :, kl - ql:kl, :kl].to(torch.bool)
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype).to(w.device)
        w = torch.where(causal, w, mask_value)
        w = F.softmax(w, dim=-1)
        w = self.attn_dropout(w.type(v.dtype))
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        a = a.view(a.size()[:-2] + (self.heads * self.head_dim,))
        return self.resid_dropout(self.c_proj(a))


class GPT2Block(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        H = c["hidden"]
        self.ln_1 = nn.LayerNorm(H, eps=c["eps"], device=device)
        self.attn = GPT2Attention(c, device)
        self.ln_2 = nn.LayerNorm(H, eps=c["eps"], device=device)
        self.c_fc = GPT2Conv1D(4 * H, H, device)
        self.c_proj = GPT2Conv1D(H, 4 * H, device)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, h):
        h = self.attn(self.ln_1(h)) + h
        m = self.dropout(self.c_proj(gelu_new(self.c_fc(self.ln_2(h)))))
        return h + m


class GPT2LMHeadModel(nn.Module):
    """GPT-2 with the LM head tied to the token embeddings and shifted cross-entropy."""

    def __init__(self, cfg, device):
        super().__init__()
        c = dict(GPT2_COMMON, **cfg)
        self.vocab = c["vocab"]
        self.wte = nn.Embedding(c["vocab"], c["hidden"], device=device)
        self.wpe = nn.Embedding(c["max_positions"], c["hidden"], device=device)
        self.drop = nn.Dropout(c["dropout"])
        self.h = nn.ModuleList([GPT2Block(c, device) for _ in range(c["layers"])])
        self.ln_f = nn.LayerNorm(c["hidden"], eps=c["eps"], device=device)
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False, device=device)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, labels):
        seq = input_ids.size(-1)
        position_ids = torch.arange(0, seq, dtype=torch.long, device=input_ids.device)
        position_ids = position_ids.unsqueeze(0).view(-1, seq)
        h = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        for block in self.h:
            h = block(h)
        h = self.ln_f(h)
        logits = self.lm_head(h)
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden, eps, device):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden, device=device))
        self.variance_epsilon = eps

    def forward(self, h):
        variance = h.to(torch.float32).pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            h = h.to(self.weight.dtype)
        return self.weight * h


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_positions, base, device):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, device=device).float() / dim))
        t = torch.arange(max_positions, device=device, dtype=inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, x, seq_len):
        return (self.cos_cached[:, :, :seq_len, ...].to(dtype=x.dtype),
                self.sin_cached[:, :, :seq_len, ...].to(dtype=x.dtype))


def llama_rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def llama_apply_rotary(q, k, cos, sin, position_ids):
    cos = cos.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)  # [batch, 1, seq, dim]
    sin = sin.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)
    return (q * cos) + (llama_rotate_half(q) * sin), (k * cos) + (llama_rotate_half(k) * sin)


class LlamaAttention(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        H = c["hidden"]
        self.heads, self.head_dim, self.hidden = c["heads"], H // c["heads"], H
        self.q_proj = nn.Linear(H, H, bias=False, device=device)
        self.k_proj = nn.Linear(H, H, bias=False, device=device)
        self.v_proj = nn.Linear(H, H, bias=False, device=device)
        self.o_proj = nn.Linear(H, H, bias=False, device=device)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, c["max_positions"], c["rope_base"],
                                               device)

    def forward(self, h, mask, position_ids):
        b, s, _ = h.size()
        q = self.q_proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, seq_len=s)
        q, k = llama_apply_rotary(q, k, cos, sin, position_ids)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        w = w + mask
        w = torch.max(w, torch.tensor(torch.finfo(w.dtype).min, device=w.device))
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).reshape(b, s, self.hidden)
        return self.o_proj(a)


class LlamaMLP(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        H, I = c["hidden"], c["intermediate"]
        self.gate_proj = nn.Linear(H, I, bias=False, device=device)
        self.down_proj = nn.Linear(I, H, bias=False, device=device)
        self.up_proj = nn.Linear(H, I, bias=False, device=device)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.self_attn = LlamaAttention(c, device)
        self.mlp = LlamaMLP(c, device)
        self.input_layernorm = LlamaRMSNorm(c["hidden"], c["eps"], device)
        self.post_attention_layernorm = LlamaRMSNorm(c["hidden"], c["eps"], device)

    def forward(self, h, mask, position_ids):
        h = h + self.self_attn(self.input_layernorm(h), mask, position_ids)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"], padding_idx=0, device=device)
        self.layers = nn.ModuleList([LlamaDecoderLayer(c, device) for _ in range(c["layers"])])
        self.norm = LlamaRMSNorm(c["hidden"], c["eps"], device)

    def forward(self, input_ids):
        b, s = input_ids.size()
        position_ids = torch.arange(0, s, dtype=torch.long, device=input_ids.device)
        position_ids = position_ids.unsqueeze(0).view(-1, s)
        h = self.embed_tokens(input_ids)
        # transformers' _make_causal_mask: finfo.min above the diagonal, in the embedding's dtype
        mask = torch.full((s, s), torch.tensor(torch.finfo(h.dtype).min), device=h.device)
        cond = torch.arange(mask.size(-1), device=h.device)
        mask.masked_fill_(cond < (cond + 1).view(mask.size(-1), 1), 0)
        mask = mask.to(h.dtype)[None, None, :, :].expand(b, 1, s, s)
        for layer in self.layers:
            h = layer(h, mask, position_ids)
        return self.norm(h)


class LlamaForCausalLM(nn.Module):
    """LLaMA with shifted cross-entropy (transformers 4.28's LlamaForCausalLM)."""

    def __init__(self, cfg, device):
        super().__init__()
        c = dict(LLAMA_COMMON, **cfg)
        self.vocab = c["vocab"]
        self.model = LlamaModel(c, device)
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False, device=device)

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.model(input_ids))
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(shift_logits.view(-1, self.vocab), shift_labels.view(-1))


class MLP3(nn.Module):
    """Toy 3-layer MLP for tests: 784 -> 256 -> 128 -> 10."""

    def __init__(self, device):
        super().__init__()
        self.fc1 = nn.Linear(784, 256, device=device)
        self.fc2 = nn.Linear(256, 128, device=device)
        self.fc3 = nn.Linear(128, 10, device=device)

    def forward(self, x, target):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return F.cross_entropy(self.fc3(x), target)


class VisionClassifier(nn.Module):
    """A torchvision classification model + cross-entropy (aux outputs summed in)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, images, target):
        out = self.net(images)
        if isinstance(out, torch.Tensor):
            return F.cross_entropy(out, target)
        # inception_v3 / googlenet return (logits, aux...) in training mode
        outs = [o for o in out if isinstance(o, torch.Tensor)]
        loss = F.cross_entropy(outs[0], target)
        for o in outs[1:]:
            loss = loss + 0.3 * F.cross_entropy(o, target)
        return loss


def torchvision_names():
    import torchvision
    if hasattr(torchvision.models, "list_models"):
        return sorted(torchvision.models.list_models(module=torchvision.models))
    return sorted(n for n, f in vars(torchvision.models).items()
                  if callable(f) and n[0].islower() and not n.startswith("_"))


def known_models():
    return (["mlp3"] + sorted(BERT_CONFIGS) + sorted(GPT2_CONFIGS) + sorted(LLAMA_CONFIGS)
            + torchvision_names())


def _ids(shape, high, device):
    if device.type == "meta":
        return torch.empty(shape, dtype=torch.long, device=device)
    return torch.randint(0, high, shape, device=device)


def build(name, batch, image_size, seq_len, device="meta"):
    """Returns (module, [(input name, tensor)], description) on `device` (meta: shapes only,
    no initialisation; cpu: a real, randomly initialised model and random data)."""
    meta = torch.device(device)
    if isinstance(name, UserModule):
        return name.build(batch, meta)
    if name == "mlp3":
        return MLP3(meta), [("input", torch.randn(batch, 784, device=meta)),
                            ("target", _ids((batch,), 10, meta))], {}
    if name in BERT_CONFIGS:
        seq = seq_len or 128
        if seq > BERT_COMMON["max_positions"]:
            die("--seq-len %d exceeds BERT's %d positions" % (seq, BERT_COMMON["max_positions"]))
        return BertForMaskedLM(BERT_CONFIGS[name], meta), [
            ("input_ids", _ids((batch, seq), BERT_COMMON["vocab"], meta)),
            ("labels", _ids((batch, seq), BERT_COMMON["vocab"], meta))], {"seq_len": seq}
    if name in GPT2_CONFIGS:
        c = dict(GPT2_COMMON, **GPT2_CONFIGS[name])
        seq = seq_len or c.get("seq_len", 1024)
        if seq > c["max_positions"]:
            die("--seq-len %d exceeds %s's %d positions" % (seq, name, c["max_positions"]))
        return GPT2LMHeadModel(GPT2_CONFIGS[name], meta), [
            ("input_ids", _ids((batch, seq), c["vocab"], meta)),
            ("labels", _ids((batch, seq), c["vocab"], meta))], {"seq_len": seq}
    if name in LLAMA_CONFIGS:
        c = dict(LLAMA_COMMON, **LLAMA_CONFIGS[name])
        seq = seq_len or c["seq_len"]
        if seq > c["max_positions"]:
            die("--seq-len %d exceeds %s's %d positions" % (seq, name, c["max_positions"]))
        return LlamaForCausalLM(LLAMA_CONFIGS[name], meta), [
            ("input_ids", _ids((batch, seq), c["vocab"], meta)),
            ("labels", _ids((batch, seq), c["vocab"], meta))], {"seq_len": seq}
    import torchvision
    if name not in torchvision_names():
        die("unknown model %r (known: mlp3, %s, %s, %s, or a torchvision.models classifier "
            "such as resnet50; --list prints them all)"
            % (name, ", ".join(sorted(BERT_CONFIGS)), ", ".join(sorted(GPT2_CONFIGS)),
               ", ".join(sorted(LLAMA_CONFIGS))))
    ctor = getattr(torchvision.models, name)
    kwargs = {}
    if name.startswith("vit_"):
        kwargs["image_size"] = image_size
    if name in ("inception_v3", "googlenet"):
        kwargs["init_weights"] = False
    if meta.type == "meta":
        with skip_init():
            net = ctor(weights=None, **kwargs)
    else:
        net = ctor(weights=None, **kwargs)
    net = net.to(meta)
    return VisionClassifier(net), [
        ("input", torch.randn(batch, 3, image_size, image_size, device=meta)),
        ("target", _ids((batch,), 1000, meta))], {"image_size": image_size}


# ---------------------------------------------------------------------------
# People's own modules: --module FILE.py:FUNC (models/README.md, "Your own model").
# ---------------------------------------------------------------------------

def _user_frame(tb, path):
    """'FILE.py line N' of the innermost traceback frame inside the user's file, or ''."""
    import traceback
    where = ""
    for fr in traceback.extract_tb(tb):
        if os.path.abspath(fr.filename) == path:
            where = " (%s line %d)" % (os.path.basename(path), fr.lineno)
    return where


def _one_line(e):
    msg = str(e).strip().split("\n")[0]
    return "%s: %s" % (type(e).__name__, msg) if msg else type(e).__name__


class UserModule:
    """A model from the user's own code: FILE.py:FUNC, where FUNC(batch=, device=) returns
    the model, its example inputs and the loss function (see models/README.md).  Builds
    everything on the meta device (shapes only), keeping tied parameters tied."""

    def __init__(self, spec):
        path, sep, func = spec.rpartition(":")
        if not sep or not path or not func:
            die("--module %r: want FILE.py:FUNC" % spec)
        self.spec = "%s:%s" % (os.path.basename(path), func)
        self.path = os.path.abspath(path)
        self.func_name = func
        if not os.path.isfile(self.path):
            die("--module %s: no such file%s" % (path, " (it is a directory)" if os.path.isdir(path) else ""))
        import importlib.util
        modname = "roamc_user_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        try:
            ld = importlib.util.spec_from_file_location(modname, self.path)
            if ld is None:
                die("--module %s: not a Python file that can be imported" % path)
            mod = importlib.util.module_from_spec(ld)
            sys.path.insert(0, os.path.dirname(self.path))  # so the file can import its neighbours
            try:
                ld.loader.exec_module(mod)
            finally:
                sys.path.pop(0)
        except SyntaxError as e:
            die("--module %s: cannot import it: SyntaxError: %s (line %s)" % (path, e.msg, e.lineno))
        except Exception as e:
            die("--module %s: cannot import it: %s%s" % (path, _one_line(e), _user_frame(e.__traceback__, self.path)))
        self.func = getattr(mod, func, None)
        if not callable(self.func):
            die("--module %s: %s %r" % (path, "no function" if self.func is None else "not callable:", func))
        import inspect
        try:
            params = inspect.signature(self.func).parameters
        except (TypeError, ValueError):
            params = {}
        anykw = any(p.kind == p.VAR_KEYWORD for p in params.values())
        self.takes = {k for k in ("batch", "device") if k in params or anykw}

    def __str__(self):
        return self.spec

    def call(self, batch, device):
        kw = {}
        if "device" in self.takes:
            kw["device"] = device
        if batch is not None:
            if "batch" not in self.takes:
                die("%s takes no 'batch' argument, so --batch/--symbolic-batch cannot set the batch"
                    % self.spec)
            kw["batch"] = batch
        try:
            if device.type == "meta" and "device" not in self.takes:
                with skip_init():  # built on the CPU, then moved: do not spend time initialising
                    return self.func(**kw)
            return self.func(**kw)
        except SystemExit:
            raise
        except Exception as e:
            die("%s raised %s%s" % (self.spec, _one_line(e), _user_frame(e.__traceback__, self.path)))

    def build(self, batch, device):
        r = self.call(batch, device)
        what = ("%s must return (model, inputs, loss_fn[, targets]) or a dict with keys "
                "model, inputs[, loss_fn, targets]" % self.spec)
        if isinstance(r, dict):
            unknown = set(r) - {"model", "inputs", "loss_fn", "targets"}
            if unknown or "model" not in r or "inputs" not in r:
                die("%s; got a dict with keys %s" % (what, ", ".join(sorted(r))))
            model, inputs, loss_fn, targets = r["model"], r["inputs"], r.get("loss_fn"), r.get("targets")
        elif isinstance(r, (tuple, list)) and len(r) in (3, 4):
            model, inputs, loss_fn = r[:3]
            targets = r[3] if len(r) == 4 else None
        else:
            die("%s; got %s" % (what, type(r).__name__))
        if not isinstance(model, nn.Module):
            die("%s: the model is of type %s, not a torch.nn.Module" % (self.spec, type(model).__name__))
        if loss_fn is not None and not callable(loss_fn):
            die("%s: loss_fn is a %s, not callable (or None when the model returns its loss)"
                % (self.spec, type(loss_fn).__name__))
        data = self._named(inputs, "input", "inputs") + self._named(targets, "target", "targets")
        names = [n for n, _ in data]
        if len(set(names)) != len(names):
            die("%s: input names repeat: %s" % (self.spec, ", ".join(names)))
        meta = torch.device("meta")
        model = _module_to_meta(model)
        if isinstance(loss_fn, nn.Module):
            loss_fn = _module_to_meta(loss_fn)
        seen = set()
        for i, (n, t) in enumerate(data):
            if t.device.type != "meta" or id(t) in seen:
                # a CPU tensor is moved; the same tensor given twice becomes two graph inputs
                data[i] = (n, torch.empty(t.shape, dtype=t.dtype, device=meta))
            seen.add(id(t))
        step = UserStep(model, loss_fn, len(self._named(inputs, "input", "inputs")))
        taken = {n for n, _ in step.named_parameters()} | {n for n, _ in step.named_buffers()}
        clash = [n for n, _ in data if n in taken]
        if clash:
            die("%s: input name %r is also a parameter or buffer name" % (self.spec, clash[0]))
        return step, data, {}

    def _named(self, x, stem, what):
        if x is None:
            return []
        if isinstance(x, torch.Tensor):
            items = [(stem, x)]
        elif isinstance(x, dict):
            items = list(x.items())
        elif isinstance(x, (tuple, list)):
            items = [("%s%d" % (stem, i) if len(x) > 1 else stem, t) for i, t in enumerate(x)]
        else:
            die("%s: %s must be a tensor, a tuple/list of tensors or a dict name -> tensor, not %s"
                % (self.spec, what, type(x).__name__))
        for n, t in items:
            if not isinstance(t, torch.Tensor):
                die("%s: %s %r is a %s, not a tensor" % (self.spec, what, n, type(t).__name__))
            if not isinstance(n, str) or not re.match(r"^[A-Za-z_][\w.]*$", n):
                die("%s: %s name %r is not an identifier" % (self.spec, what, n))
        return items


def _module_to_meta(module):
    """module.to('meta') that keeps shared (tied) parameters and buffers shared: Module.to
    replaces each parameter of each submodule by a new Parameter when the device changes,
    which would untie BERT-style tied weights."""
    memo = {}
    for m in module.modules():
        for k, p in list(m._parameters.items()):
            if p is None or p.device.type == "meta":
                continue
            if id(p) not in memo:
                memo[id(p)] = nn.Parameter(torch.empty(p.shape, dtype=p.dtype, device="meta"),
                                           requires_grad=p.requires_grad)
            m._parameters[k] = memo[id(p)]
        for k, b in list(m._buffers.items()):
            if b is None or b.device.type == "meta":
                continue
            if id(b) not in memo:
                memo[id(b)] = torch.empty(b.shape, dtype=b.dtype, device="meta")
            m._buffers[k] = memo[id(b)]
    return module


class UserStep(nn.Module):
    """loss = loss_fn(model(*inputs), *targets), or model(*inputs) when loss_fn is None.
    Parameter and buffer names are the model's own (the loss function's, if it has any,
    under 'loss_fn.')."""

    def __init__(self, model, loss_fn, n_inputs):
        super().__init__()
        self.model, self.loss_fn, self.n_inputs = model, loss_fn, n_inputs

    def named_parameters(self, prefix="", recurse=True, **kw):
        yield from self.model.named_parameters(prefix=prefix, recurse=recurse)
        if isinstance(self.loss_fn, nn.Module):
            yield from self.loss_fn.named_parameters(prefix=prefix + "loss_fn", recurse=recurse)

    def named_buffers(self, prefix="", recurse=True, **kw):
        yield from self.model.named_buffers(prefix=prefix, recurse=recurse)
        if isinstance(self.loss_fn, nn.Module):
            yield from self.loss_fn.named_buffers(prefix=prefix + "loss_fn", recurse=recurse)

    def forward(self, *data):
        out = self.model(*data[:self.n_inputs])
        loss = out if self.loss_fn is None else self.loss_fn(out, *data[self.n_inputs:])
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.dtype.is_floating_point:
            raise ValueError("the loss must be a float tensor with one element, got %s"
                             % (("%s %s" % (loss.dtype, list(loss.shape)))
                                if isinstance(loss, torch.Tensor) else type(loss).__name__))
        if not loss.requires_grad:
            raise ValueError("the loss does not depend on any trainable parameter")
        return loss


class skip_init:
    """Makes torchvision constructors skip weight initialisation (the values never matter)."""
    NAMES = ("normal_", "uniform_", "trunc_normal_", "kaiming_normal_", "kaiming_uniform_",
             "xavier_uniform_", "xavier_normal_", "constant_", "zeros_", "ones_", "orthogonal_")

    def __enter__(self):
        self.saved = {n: getattr(nn.init, n) for n in self.NAMES if hasattr(nn.init, n)}
        for n in self.saved:
            setattr(nn.init, n, lambda t, *a, **k: t)
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(nn.init, n, f)


# ---------------------------------------------------------------------------
# Dispatch choices that differ between the CPU/meta build here and CUDA.
# ---------------------------------------------------------------------------

class cuda_like_dropout:
    """On CUDA, at::dropout calls the fused native_dropout (bool mask); on CPU and
    meta it calls bernoulli_ + div_ + mul (float mask).  We model a CUDA run, so
    F.dropout takes the fused path whenever CUDA would (training, 0 < p < 1)."""

    def __enter__(self):
        self.saved = F.dropout

        def dropout(input, p=0.5, training=True, inplace=False):
            if training and 0.0 < p < 1.0 and not inplace and input.numel() > 0:
                return torch.native_dropout(input, p, True)[0]
            return self.saved(input, p, training, inplace)
        F.dropout = dropout
        return self

    def __exit__(self, *exc):
        F.dropout = self.saved


class no_record_function:
    """Optimizer.step runs inside autograd.profiler.record_function, which creates a
    torch.zeros(1) handle tensor and calls profiler:: ops: profiler bookkeeping that
    is not part of the computation (and is a no-op when no profiler runs), so it is
    switched off while tracing."""

    class _Null:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def __enter__(self):
        import torch.autograd.profiler as prof
        self.saved = prof.record_function
        prof.record_function = self._Null
        return self

    def __exit__(self, *exc):
        import torch.autograd.profiler as prof
        prof.record_function = self.saved


# ---------------------------------------------------------------------------
# Optimizers: torch.optim with foreach=False (per-parameter ATen ops, the 1.13
# default) and capturable=False; the state exists before the step (a
# steady-state step), so it is a set of graph inputs.
# ---------------------------------------------------------------------------

def make_optimizer(kind, params):
    """Returns (optimizer, [(state name suffix, tensor) per param])."""
    if kind == "adam":
        opt = torch.optim.Adam(params, lr=1e-3, foreach=False, capturable=False)
    elif kind == "adamw":
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2, foreach=False, capturable=False)
    elif kind == "sgd":
        opt = torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=False)
    else:
        die("unknown optimizer %r (adam, adamw or sgd)" % kind)
    states = []
    for p in params:
        st = opt.state[p]
        if kind in ("adam", "adamw"):
            # exactly what Adam's lazy initialisation creates: a CPU float scalar
            # step counter (capturable=False) and two moments shaped like p
            st["step"] = torch.tensor(0.0)
            st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            states.append([("step", st["step"]), ("exp_avg", st["exp_avg"]),
                           ("exp_avg_sq", st["exp_avg_sq"])])
        else:
            st["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            states.append([("momentum_buffer", st["momentum_buffer"])])
    return opt, states

# ---------------------------------------------------------------------------
# Mixed precision (--amp bf16) and gradient accumulation (--grad-accum K).
# ---------------------------------------------------------------------------

class MetaOnCpu(torch.Tensor):
    """A tensor that says it is on the CPU but holds only a meta tensor (`elem`: shapes,
    no memory).  torch 1.13's autocast casts only tensors whose device it serves
    (AutocastCPU: `is_cpu()`), so plain meta tensors pass through torch.autocast
    untouched; this shell makes the real torch.autocast("cpu", bfloat16) -- its own
    casting lists, its cast cache -- act on a shapes-only trace.  Every operator runs on
    `elem` (with run_meta's fallbacks); a device argument "cpu" becomes "meta"; an
    in-place result is the input shell itself, every other result a new shell.  The
    autograd engine treats the shells as CPU tensors, as it would in a real CPU run."""

    log = {}  # run_meta's fallback notes (the Recorder's log while tracing)

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device="cpu", requires_grad=False)

    def __init__(self, elem):
        self.elem = elem

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from torch.utils._pytree import tree_map
        shells = {}

        def unwrap(x):
            if isinstance(x, MetaOnCpu):
                shells[id(x.elem)] = x
                return x.elem
            if isinstance(x, torch.Tensor) and x.device.type == "cpu":
                # a real CPU tensor met with shells (GPT-2's torch.full([], min) mask value,
                # made without a device): its meta twin
                return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
            if isinstance(x, torch.device) and x.type == "cpu":
                return torch.device("meta")
            if isinstance(x, str) and x == "cpu":
                return "meta"
            return x

        def wrap(x):
            if isinstance(x, torch.Tensor) and not isinstance(x, MetaOnCpu) and x.device.type == "meta":
                s = shells.get(id(x))
                return s if s is not None else MetaOnCpu(x)
            return x
        out = run_meta(func, tree_map(unwrap, list(args)), tree_map(unwrap, dict(kwargs or {})), cls.log)
        return tree_map(wrap, out)

    def __repr__(self):
        return "MetaOnCpu(%s, %s)" % (self.dtype, list(self.shape))


def shell_module(module):
    """Puts every parameter and buffer of a meta module into a MetaOnCpu shell (tied
    parameters stay tied: one shell per tensor)."""
    memo = {}
    for m in module.modules():
        for k, p in list(m._parameters.items()):
            if p is not None:
                if id(p) not in memo:
                    memo[id(p)] = nn.Parameter(MetaOnCpu(p.detach()), requires_grad=p.requires_grad)
                m._parameters[k] = memo[id(p)]
        for k, b in list(m._buffers.items()):
            if b is not None:
                if id(b) not in memo:
                    memo[id(b)] = MetaOnCpu(b)
                m._buffers[k] = memo[id(b)]
    return module


AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
AMP_IMPL = {"bf16": "torch.autocast('cpu', bfloat16) of torch %s over forward and loss: CPU "
                    "autocast's lists (conv, linear, matmul, bmm, addmm, baddbmm in bf16; "
                    "nll_loss and the other fp32-list ops in fp32; the rest in their inputs' "
                    "dtype), parameters, gradients and optimizer state in fp32, the bf16 "
                    "copies (_to_copy) where autocast makes them" % torch.__version__.split("+")[0]}


def autocast(amp):
    """The autocast region of a step: torch.autocast("cpu", bfloat16) for bf16 (torch
    1.13's CPU autocast, the only dtype it takes), nothing for fp32."""
    import contextlib
    if amp is None:
        return contextlib.nullcontext()
    if amp == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    raise ValueError("--amp %s: %s" % (amp, AMP_FP16_REFUSAL))


AMP_FP16_REFUSAL = (
    "fp16 autocast cannot be traced with torch 1.13 here: CPU autocast takes only bfloat16 "
    "('AutocastCPU only support Bfloat16'), CUDA autocast casts only tensors that are on a CUDA "
    "device, and a backward pass over tensors that claim a CUDA device needs CUDA's device guard, "
    "which this CPU-only build does not have; use --amp bf16")


def training_step(model, data, opt, amp=None, grad_accum=1):
    """One training step as a user writes it (grads start as None: zero_grad(set_to_none=True)).
    With grad_accum K > 1, `data` is a list of K microbatches (each a list of inputs):
    K forward+backward passes, the loss of each divided by K (as Hugging Face's Trainer and
    most loops do) and the gradients accumulated into .grad by autograd itself (the first
    backward creates .grad, the later ones add in place), then one optimizer step.  With
    amp, the forward and the loss run under autocast, backward and step outside it (as
    torch.autocast's documentation prescribes)."""
    micro = data if grad_accum > 1 else [data]
    loss = None
    for d in micro:
        with autocast(amp):
            loss = model(*d)
            if grad_accum > 1:
                loss = loss / grad_accum
        loss.backward()
    opt.step()
    return loss


def microbatch_names(names, grad_accum):
    """Graph input names of the data inputs: as they are for one batch, 'mb<k>.<name>'
    for microbatch k of a --grad-accum K > 1 step."""
    if grad_accum <= 1:
        return list(names)
    return ["mb%d.%s" % (k, n) for k in range(grad_accum) for n in names]


# ---------------------------------------------------------------------------
# The recorder.
# ---------------------------------------------------------------------------

def _storage_id(t):
    if isinstance(t, MetaOnCpu):
        t = t.elem
    try:
        if t.numel() == 0:
            return None
        s = t.storage()
        return s._cdata if hasattr(s, "_cdata") else s._storage._cdata
    except Exception:
        return None


# ATen schemas of torch 1.13 that do not annotate what the kernel does:
# arguments written although the schema has no `(a!)` ...
UNANNOTATED_WRITES = {
    "native_batch_norm": ("running_mean", "running_var"),
    "cudnn_batch_norm": ("running_mean", "running_var"),
    "miopen_batch_norm": ("running_mean", "running_var"),
}
# ... and outputs that share the input's storage although the schema has no `(a)`
UNANNOTATED_VIEWS = {"_unsafe_view": "self", "unsafe_split": "self", "unsafe_chunk": "self",
                     "unsafe_split_with_sizes": "self"}

_RET_SPLIT = re.compile(r"\s*,\s*(?![^()]*\))")


def return_alias_sets(schema):
    """Alias set name per return (or None) and whether it is written; handles Tensor(a)[]."""
    text = str(schema)
    rets = text[text.rindex("->") + 2:].strip()
    if rets.startswith("(") and rets.endswith(")"):
        rets = rets[1:-1]
    parts = [p for p in _RET_SPLIT.split(rets) if p] if rets else []
    out = []
    for i, r in enumerate(schema.returns):
        ai = r.alias_info
        if ai is not None and ai.before_set:
            out.append((sorted(ai.before_set)[0], ai.is_write))
            continue
        m = re.match(r"Tensor\((\w+)(!?)\)", parts[i].strip()) if i < len(parts) else None
        out.append((m.group(1), m.group(2) == "!") if m else (None, False))
    return out


def _is_tensor_type(arg):
    return "Tensor" in str(arg.type)


class _Fallback(TorchDispatchMode):
    """Runs operators on meta tensors, falling back where torch 1.13 has no meta kernel."""

    def __init__(self, log):
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return run_meta(func, args, kwargs or {}, self.log)


def run_meta(func, args, kwargs, log):
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        pass
    name = func.overloadpacket.__name__
    from torch._decomp import decomposition_table
    if func in decomposition_table:
        log.setdefault("decomposed", set()).add(name)
        with _Fallback(log):
            return decomposition_table[func](*args, **kwargs)
    rule = SHAPE_RULES.get(name)
    if rule is not None:
        log.setdefault("shape_rule", set()).add(name)
        return rule(*args, **kwargs)
    # Last resort: run the CPU kernel on zeros of the same shapes and keep the metadata.
    log.setdefault("cpu_fallback", set()).add(name)

    def to_cpu(x):
        if isinstance(x, torch.Tensor) and x.device.type == "meta":
            return torch.zeros(x.shape, dtype=x.dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(to_cpu(y) for y in x)
        return x
    r = func(*to_cpu(list(args)), **{k: to_cpu(v) for k, v in kwargs.items()})

    def to_meta(x):
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        if isinstance(x, (list, tuple)):
            return type(x)(to_meta(y) for y in x)
        return x
    return to_meta(r)


def _like(t):
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _conv_backward(grad, input, weight, bias_sizes, *args, **kwargs):
    mask = kwargs.get("output_mask", args[-1] if args else [True, True, True])
    return (_like(input) if mask[0] else None, _like(weight) if mask[1] else None,
            torch.empty(list(bias_sizes), dtype=grad.dtype, device="meta")
            if mask[2] and bias_sizes is not None else None)


SHAPE_RULES = {
    "convolution_backward": _conv_backward,
    # backward kernels without a meta implementation in torch 1.13: grad_input is shaped like self
    "_adaptive_avg_pool2d_backward": lambda grad, self: _like(self),
    "max_pool2d_with_indices_backward": lambda grad, self, *a, **k: _like(self),
    "avg_pool2d_backward": lambda grad, self, *a, **k: _like(self),
    "adaptive_max_pool2d_backward": lambda grad, self, *a, **k: _like(self),
    "hardsigmoid_backward": lambda grad, self: _like(self),
    "hardswish_backward": lambda grad, self: _like(self),
}


class Recorder(TorchDispatchMode):
    """Records every ATen call as a node.  Holds no tensor references (only the
    integer TensorImpl addresses), so reference-count driven choices inside
    autograd (stealing a gradient vs cloning it) are the same as in a plain run."""

    def __init__(self):
        self.names = {}         # TensorImpl address -> current SSA name
        self.info = {}          # name -> (dtype, shape)
        self.nodes = []         # dicts
        self.inputs = []        # graph input names in order
        self.initializers = []  # names of constant tensors created outside the step
        self.log = {}
        self.skipped = {}
        self.special = {}
        self.folded = 0

    # -- names --------------------------------------------------------------
    def add_input(self, name, t):
        assert t._cdata not in self.names, name
        self.names[t._cdata] = name
        self.info[name] = (t.dtype, tuple(t.shape))
        self.inputs.append(name)

    def name_of(self, t):
        n = self.names.get(t._cdata)
        if n is not None and self.info[n] == (t.dtype, tuple(t.shape)):
            return n
        # a tensor that no recorded operator produced: a constant made outside the step
        n = "const_%d" % len(self.initializers)
        self.names[t._cdata] = n
        self.info[n] = (t.dtype, tuple(t.shape))
        self.initializers.append(n)
        return n

    def fresh(self, op, t, k, nout):
        n = "%s_%d" % (op, len(self.nodes)) if nout == 1 else "%s_%d_%d" % (op, len(self.nodes), k)
        self.names[t._cdata] = n
        self.info[n] = (t.dtype, tuple(t.shape))
        return n

    # -- dispatch -----------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        op = func.overloadpacket.__name__
        if not schema.name.startswith("aten::"):
            # profiler::_record_function_* and friends: bookkeeping, not computation
            self.skipped[schema.name] = self.skipped.get(schema.name, 0) + 1
            return func(*args, **kwargs)
        if op == "detach" and len(args) == 1 and not kwargs:
            # Folded into its input (see README: under a dispatch mode torch 1.13 turns every
            # internal shallow copy -- saving a tensor for backward, unpacking it -- into an
            # aten.detach call that eager PyTorch never dispatches; all are metadata-only views).
            src = self.name_of(args[0])
            out = func(*args)
            self.names[out._cdata] = src
            self.folded += 1
            return out
        # normalise the call to schema order
        vals = []
        for i, a in enumerate(schema.arguments):
            if i < len(args) and not a.kwarg_only:
                vals.append(args[i])
            elif a.name in kwargs:
                vals.append(kwargs[a.name])
            elif a.has_default_value():
                vals.append(a.default_value)
            else:
                vals.append(None)
        out = run_meta(func, args, kwargs, self.log)

        # tensor inputs (node inputs) and attributes
        inputs, attrs, pos_of_arg, in_storages = [], [], {}, {}
        for a, v in zip(schema.arguments, vals):
            if _is_tensor_type(a):
                pos, scalars = [], []
                for t in (v if isinstance(v, (list, tuple)) else [v]):
                    if isinstance(t, torch.Tensor):
                        pos.append(len(inputs))
                        sid = _storage_id(t)
                        if sid is not None:
                            in_storages.setdefault(sid, len(inputs))
                        inputs.append(self.name_of(t))
                    elif t is None:
                        pos.append(len(inputs))
                        inputs.append("")       # absent optional tensor keeps its slot
                    else:
                        scalars.append(t)       # a Python number passed for a Tensor
                if scalars:
                    attrs.append((a.name, scalars if isinstance(v, (list, tuple)) else scalars[0]))
                pos_of_arg[a.name] = pos
            else:
                attrs.append((a.name, v))
        while inputs and inputs[-1] == "":
            inputs.pop()

        # tensor outputs, with their alias set
        ret_sets = return_alias_sets(schema)
        flat = []  # (tensor or None, alias set, is_write)
        if schema.returns:
            rets = out if len(schema.returns) > 1 else (out,)
            for (aset, w), ret, r in zip(ret_sets, schema.returns, rets):
                if isinstance(r, (list, tuple)):          # Tensor[] return
                    flat.extend((x, aset, w) for x in r)
                elif isinstance(r, torch.Tensor):
                    flat.append((r, aset, w))
                elif r is None and "Tensor" in str(ret.type):
                    flat.append((None, aset, w))      # undefined tensor (output_mask false)
                # non-tensor returns (Scalar, int, bool, ...) carry no memory
        arg_of_set = {}
        for a in schema.arguments:
            if a.alias_info is not None and a.alias_info.before_set:
                for s in a.alias_info.before_set:
                    arg_of_set.setdefault(s, a.name)

        outputs, alias, inplace = [], [], 0
        out_tensors = [t for t, _, _ in flat]
        for k, (t, aset, w) in enumerate(flat):
            if t is None:
                alias.append(-1)
                continue
            j = -1
            if aset is not None and aset in arg_of_set and pos_of_arg.get(arg_of_set[aset]):
                j = pos_of_arg[arg_of_set[aset]][0]
                if w:
                    inplace = 1
            elif op in UNANNOTATED_VIEWS:
                j = pos_of_arg[UNANNOTATED_VIEWS[op]][0]
                self.special.setdefault("unannotated view", set()).add(op)
            else:
                sid = _storage_id(t)
                if sid is not None and sid in in_storages:
                    # the kernel returned storage it was given, without saying so in the schema
                    j = in_storages[sid]
                    self.special.setdefault("runtime-detected view", set()).add(op)
            alias.append(j)
        nout = len(flat)
        # arguments written in place but not returned (BN running stats, out-less mutations)
        written = []
        ret_set_names = {s for s, _ in ret_sets if s}
        for a, v in zip(schema.arguments, vals):
            ai = a.alias_info
            mut = ai is not None and ai.is_write and not (set(ai.before_set) & ret_set_names)
            if not mut and a.name in UNANNOTATED_WRITES.get(op, ()):
                training = dict(attrs).get("training", True)
                mut = v is not None and bool(training)
                if mut:
                    self.special.setdefault("unannotated write", set()).add(op)
            if mut:
                items = v if isinstance(v, (list, tuple)) else [v]
                for t, p in zip(items, pos_of_arg.get(a.name, [])):
                    if isinstance(t, torch.Tensor):
                        written.append((t, p))
        nout += len(written)
        if nout == 0:
            self.skipped[op] = self.skipped.get(op, 0) + 1
            return out
        for k, t in enumerate(out_tensors):
            outputs.append(self.fresh(op, t, k, nout) if t is not None else "")
        for k, (t, p) in enumerate(written):
            outputs.append(self.fresh(op, t, len(out_tensors) + k, nout))
            alias.append(p)
            inplace = 1
        self.nodes.append(dict(op=op, overload=func._overloadname, inputs=inputs,
                               outputs=outputs, attrs=attrs, alias=alias, inplace=inplace))
        return out


# ---------------------------------------------------------------------------
# ONNX writing
# ---------------------------------------------------------------------------

def onnx_dtype(dt):
    from onnx import TensorProto
    table = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16,
             torch.bfloat16: TensorProto.BFLOAT16, torch.float64: TensorProto.DOUBLE,
             torch.int64: TensorProto.INT64, torch.int32: TensorProto.INT32,
             torch.int16: TensorProto.INT16, torch.int8: TensorProto.INT8,
             torch.uint8: TensorProto.UINT8, torch.bool: TensorProto.BOOL,
             torch.complex64: TensorProto.COMPLEX64, torch.complex128: TensorProto.COMPLEX128}
    return table[dt]


def make_attr(name, v):
    """An AttributeProto for a non-tensor argument, or None when it has no useful form."""
    from onnx import AttributeProto
    a = AttributeProto()
    a.name = name
    if isinstance(v, bool):
        a.type, a.i = AttributeProto.INT, int(v)
    elif isinstance(v, int):
        a.type, a.i = AttributeProto.INT, v
    elif isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            a.type, a.s = AttributeProto.STRING, repr(v).encode()
        else:
            a.type, a.f = AttributeProto.FLOAT, v
    elif isinstance(v, str):
        a.type, a.s = AttributeProto.STRING, v.encode()
    elif isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
        a.type, a.s = AttributeProto.STRING, str(v).replace("torch.", "").encode()
    elif isinstance(v, (list, tuple)):
        if all(isinstance(x, bool) for x in v) or all(isinstance(x, int) and not isinstance(x, bool)
                                                     for x in v):
            a.type = AttributeProto.INTS
            a.ints.extend(int(x) for x in v)
        elif all(isinstance(x, (int, float)) for x in v):
            a.type = AttributeProto.FLOATS
            a.floats.extend(float(x) for x in v)
        else:
            return None
    else:
        return None  # None, devices, generators, ...
    return a


def to_onnx(rec, meta, loss_name, outputs, producer_note):
    try:
        import onnx
    except ImportError as e:
        die_missing("onnx", e)
    from onnx import helper, TensorProto, AttributeProto

    def vinfo(name):
        dt, shape = rec.info[name]
        return helper.make_tensor_value_info(name, onnx_dtype(dt), list(shape))

    nodes = []
    for i, nd in enumerate(rec.nodes):
        n = onnx.NodeProto()
        n.op_type = nd["op"]
        n.domain = ATEN_DOMAIN
        n.name = "n%d" % i
        n.input.extend(nd["inputs"])
        n.output.extend(nd["outputs"])
        for k, v in nd["attrs"]:
            if k in ("alias", "inplace", "overload"):
                k = "arg_" + k
            a = make_attr(k, v)
            if a is not None:
                n.attribute.append(a)
        if nd["overload"]:
            n.attribute.append(helper.make_attribute("overload", nd["overload"]))
        if any(j >= 0 for j in nd["alias"]) or nd["op"].endswith("_") or \
                nd["op"] in CHECKER_VIEW_NAMES:
            # also written (as all -1) where a name-based reader would guess aliasing
            a = AttributeProto()
            a.name, a.type = "alias", AttributeProto.INTS
            a.ints.extend(nd["alias"])
            n.attribute.append(a)
            n.attribute.append(helper.make_attribute("inplace", int(nd["inplace"])))
        nodes.append(n)

    graph_outputs, out_set = [], set()
    for o in [loss_name] + list(outputs):
        if o not in out_set:
            graph_outputs.append(o)
            out_set.add(o)
    value_info = []
    for nd in rec.nodes:
        for o in nd["outputs"]:
            if o and o not in out_set:
                value_info.append(vinfo(o))
    inits = []
    for name in rec.initializers:
        dt, shape = rec.info[name]
        t = TensorProto()
        t.name = name
        t.data_type = onnx_dtype(dt)
        t.dims.extend(shape)
        inits.append(t)
    graph = helper.make_graph(nodes, "training_step", [vinfo(n) for n in rec.inputs],
                              [vinfo(n) for n in graph_outputs], initializer=inits,
                              value_info=value_info)
    model = helper.make_model(graph, producer_name="roamc-export", producer_version=EXPORTER_VERSION,
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid(ATEN_DOMAIN, 1)])
    model.doc_string = producer_note
    for k, v in meta:
        e = model.metadata_props.add()
        e.key, e.value = k, str(v)
    return model


# names tools/check_plan.py treats as views when a node has no `alias` attribute
CHECKER_VIEW_NAMES = {"view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose",
                      "permute", "expand", "detach", "alias", "squeeze", "unsqueeze", "slice",
                      "select", "as_strided", "split", "split_with_sizes", "unbind", "narrow",
                      "diagonal", "unfold", "view_as", "expand_as", "numpy_T", "chunk",
                      "tensor_split", "movedim", "flatten", "unflatten"}


def export(name, batch=1, image_size=224, seq_len=None, optimizer="adam", quiet=False,
           amp=None, grad_accum=1):
    """Traces one training step; returns (onnx ModelProto, stats dict).  amp: None (fp32) or
    "bf16" (torch.autocast("cpu", bfloat16) over the forward and the loss); grad_accum K:
    K microbatches of `batch` each, then one optimizer step (training_step)."""
    t0 = time.time()
    torch.manual_seed(0)
    if amp is not None and amp not in AMP_DTYPES:
        raise ValueError("unknown --amp %r (bf16 or fp16)" % amp)
    if amp == "fp16":
        die("--amp fp16: " + AMP_FP16_REFUSAL)
    model, data, desc = build(name, batch, image_size, seq_len)
    for cfgs in (BERT_CONFIGS, GPT2_CONFIGS, LLAMA_CONFIGS):  # --layers: the depth traced
        if cfgs.get(name, {}).get("layers_set"):
            desc["layers"] = cfgs[name]["layers"]
    if grad_accum > 1:
        # one set of data inputs per microbatch, shaped like the first
        data = [(mb, torch.empty(t.shape, dtype=t.dtype, device=t.device))
                for mb, (_, t) in zip(microbatch_names([n for n, _ in data], grad_accum),
                                      data * grad_accum)]
    if amp is not None:
        model = shell_module(model)
        data = [(n, MetaOnCpu(t)) for n, t in data]
    model.train()
    params = [p for _, p in model.named_parameters()]
    pnames = [n for n, _ in model.named_parameters()]
    opt, states = make_optimizer(optimizer, params)

    rec = Recorder()
    for n, t in data:
        rec.add_input(n, t)
    for n, p in zip(pnames, params):
        rec.add_input(n, p)
    bnames = []
    for n, b in model.named_buffers():
        rec.add_input(n, b)
        bnames.append(n)
    snames = []
    for n, st in zip(pnames, states):
        for suffix, t in st:
            rec.add_input("%s.%s" % (n, suffix), t)
            snames.append("%s.%s" % (n, suffix))

    try:
        MetaOnCpu.log = rec.log
        tensors = [t for _, t in data]
        if grad_accum > 1:
            per = len(tensors) // grad_accum
            tensors = [tensors[k * per:(k + 1) * per] for k in range(grad_accum)]
        with cuda_like_dropout(), no_record_function(), rec:
            loss = training_step(model, tensors, opt, amp, grad_accum)
    except Exception as e:
        # an impossible geometry (an image too small for the pooling, a sequence longer
        # than the positions), a model/input mismatch, a loss that is not a scalar...
        where = _user_frame(e.__traceback__, name.path) if isinstance(name, UserModule) else ""
        die("%s: the training step failed%s: %s%s"
            % (name, "" if batch is None else " at batch %d" % batch, _one_line(e), where))
    loss_name = rec.names[loss._cdata]
    no_grad = [n for n, p in zip(pnames, params) if p.grad is None]
    # the value each parameter's .grad holds after backward (what the optimizer reads)
    gnames = [rec.names.get(p.grad._cdata, "") if p.grad is not None else "" for p in params]
    # final SSA versions of the persistent tensors (the input itself where the step does not
    # write it): as graph outputs they live for the whole step by DESIGN.md's rules alone
    persistent = [t for t in params] + [b for _, b in model.named_buffers()] + \
        [t for st in states for _, t in st]
    finals = [rec.names[t._cdata] for t in persistent if t._cdata in rec.names]
    del loss
    trace_s = time.time() - t0

    meta = [
        ("roamc.loss", loss_name),
        ("roamc.parameters", ",".join(pnames)),
        ("roamc.optimizer_state", ",".join(snames)),
        ("roamc.data_inputs", ",".join(n for n, _ in data)),
        ("roamc.buffers", ",".join(bnames)),
        ("roamc.gradients", ",".join(gnames)),
        ("roamc.optimizer", optimizer),
        ("roamc.model", name),
        ("roamc.batch", batch if batch is not None else data[0][1].shape[0] if data[0][1].dim() else 1),
    ]
    if amp:  # fp32 files carry no roamc.precision: the committed evaluation set stays byte-equal
        meta.append(("roamc.precision", "amp-%s" % amp))
        meta.append(("roamc.amp_impl", AMP_IMPL[amp]))
    if grad_accum > 1:
        meta.append(("roamc.grad_accum", grad_accum))
        meta.append(("roamc.grad_accum_impl", "%d microbatches of roamc.batch each (data inputs "
                     "mb<k>.<name>), loss/%d, gradients accumulated into .grad by autograd, "
                     "one optimizer step" % (grad_accum, grad_accum)))
    for k, v in sorted(desc.items()):
        meta.append(("roamc." + k, v))
    meta += [
        ("roamc.exporter", "models/export.py %s" % EXPORTER_VERSION),
        ("roamc.torch", torch.__version__.split("+")[0]),
        ("roamc.device_model", "cuda (dropout=native_dropout, batch_norm=native_batch_norm)"),
        ("roamc.optimizer_impl", "torch.optim foreach=False capturable=False, steady-state, "
                                 "grads start as None"),
        ("roamc.skipped_ops", ",".join("%s:%d" % kv for kv in sorted(rec.skipped.items()))),
    ]
    note = ("One training step of %s (batch %s, %s) traced by roamc models/export.py from "
            "PyTorch %s." % (name, batch if batch is not None else "given by FUNC", optimizer,
                             torch.__version__))
    onx = to_onnx(rec, meta, loss_name, finals, note)
    stats = dict(nodes=len(rec.nodes), trace_s=trace_s, no_grad=no_grad,
                 log={k: sorted(v) for k, v in rec.log.items()},
                 special={k: sorted(v) for k, v in rec.special.items()},
                 skipped=dict(rec.skipped), initializers=len(rec.initializers),
                 n_params=len(params))
    return onx, stats


SYMBOLIC_BATCHES = (2, 3, 4)


def symbolic_batch(models, symbol="batch"):
    """One batch-symbolic training graph from the same step traced at the
    batches SYMBOLIC_BATCHES (2, 3, 4): every dim that changes with the batch
    is affine in it, and becomes a dim_param "batch", "K*batch" or
    "K*batch+C" (the expressions roamc's frontend evaluates under --dim
    batch=N); a dim that does not change stays a number.  The first two
    traces give the line, the third checks it.  Node attributes (view sizes
    and the like) keep the values of the first trace: the file is for
    planning, not for running.  Raises ValueError when the operators or the
    dims do not follow the batch that way."""
    b = SYMBOLIC_BATCHES
    ref = models[0]
    for m, bb in zip(models[1:], b[1:]):
        if len(m.graph.node) != len(ref.graph.node):
            raise ValueError("the step has %d operators at batch %d but %d at batch %d"
                             % (len(ref.graph.node), b[0], len(m.graph.node), bb))
        for i, (x, y) in enumerate(zip(ref.graph.node, m.graph.node)):
            if (x.op_type, list(x.input), list(x.output)) != (y.op_type, list(y.input), list(y.output)):
                raise ValueError("operator %d is %s at batch %d but %s at batch %d"
                                 % (i, x.op_type, b[0], y.op_type, bb))

    def infos(m):
        g = m.graph
        return {vi.name: vi for vi in list(g.input) + list(g.output) + list(g.value_info)}

    others = [infos(m) for m in models[1:]]
    for t in ref.graph.initializer:
        for m in models[1:]:
            u = next(x for x in m.graph.initializer if x.name == t.name)
            if list(u.dims) != list(t.dims):
                raise ValueError("constant '%s' changes with the batch" % t.name)
    for name, vi in infos(ref).items():
        dims = [vi.type.tensor_type.shape.dim] + [o[name].type.tensor_type.shape.dim for o in others]
        for k, d in enumerate(dims[0]):
            d2, d3, d4 = d.dim_value, dims[1][k].dim_value, dims[2][k].dim_value
            step = d3 - d2
            base = d2 - b[0] * step
            if d4 != base + b[2] * step or step < 0 or base < 0:
                raise ValueError("value '%s' dim %d is %d, %d, %d at batches %s: not K*batch+C"
                                 % (name, k, d2, d3, d4, ", ".join(map(str, b))))
            if step == 0:
                continue
            expr = symbol if step == 1 else "%d*%s" % (step, symbol)
            if base:
                expr += "+%d" % base
            d.Clear()
            d.dim_param = expr
    for e in ref.metadata_props:
        if e.key == "roamc.batch":
            e.value = symbol
    ref.doc_string = ref.doc_string.replace("(batch %d," % b[0], "(batch symbolic '%s'," % symbol)
    return ref


def setup_suffix(amp, grad_accum):
    """The default output name's set-up part: _amp-bf16, _ga4."""
    return ("_amp-%s" % amp if amp else "") + ("_ga%d" % grad_accum if grad_accum > 1 else "")


def check_output(path):
    """Refuses an output path that cannot be written, before any tracing."""
    if os.path.isdir(path):
        die("output %s is a directory; give a file name (-o DIR/NAME.onnx)" % path)
    d = os.path.dirname(os.path.abspath(path))
    if os.path.exists(d) and not os.path.isdir(d):
        die("output %s: %s is not a directory" % (path, d))


def write(onx, path):
    """Writes atomically (a temporary beside the file, renamed); nothing is left on failure."""
    check_output(path)
    data = onx.SerializeToString(deterministic=True) if _has_det() else onx.SerializeToString()
    d = os.path.dirname(os.path.abspath(path))
    tmp = path + ".tmp"
    try:
        os.makedirs(d, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        die("cannot write %s: %s" % (path, e.strerror or e))
    return len(data)


def _has_det():
    from onnx import ModelProto
    try:
        ModelProto().SerializeToString(deterministic=True)
        return True
    except TypeError:
        return False


def run_one(name, batch, image_size, seq_len, optimizer, out, quiet=False, amp=None, grad_accum=1,
            verbose=False):
    """Exports one step to out; batch None: batch-symbolic (symbolic_batch); "func": the
    batch of a --module FUNC that takes none; amp, grad_accum: as export()."""
    check_output(out)
    t0 = time.time()
    if batch is None:
        traces = [export(name, bb, image_size, seq_len, optimizer, amp=amp, grad_accum=grad_accum)
                  for bb in SYMBOLIC_BATCHES]
        try:
            onx = symbolic_batch([t[0] for t in traces])
        except ValueError as e:
            die("%s: cannot write a batch-symbolic graph: %s; export fixed batches with --batch N" % (name, e))
        st = traces[0][1]
    else:
        onx, st = export(name, None if batch == "func" else batch, image_size, seq_len, optimizer,
                         amp=amp, grad_accum=grad_accum)
    size = write(onx, out)
    total = time.time() - t0
    if not quiet:
        msg = "%s: %s batch %s, %d operators, %d bytes, trace %.1fs, total %.1fs" % (
            out, name, "symbolic" if batch is None else "given by FUNC" if batch == "func" else batch, st["nodes"], size, st["trace_s"], total)
        print(msg)
        for k, v in sorted(st["log"].items()):
            print("  note: no meta kernel, used %s for: %s" % (k, ", ".join(v)))
        # how the tracer classified aliasing ops: for whoever works on the
        # exporter (--verbose), nothing a user acts on
        for k, v in sorted(st["special"].items()) if verbose else ():
            print("  note: %s: %s" % (k, ", ".join(v)))
        if st["no_grad"]:
            print("  warning: parameters without a gradient: %s" % ", ".join(st["no_grad"]))
        if st["initializers"]:
            print("  note: %d constant tensors from outside the step became initializers"
                  % st["initializers"])
    return st, total


class _Parser(argparse.ArgumentParser):
    """Bad arguments as one line, like every other error here (not usage + error)."""

    def error(self, message):
        die("%s (see export.py --help)" % message)


def main(argv=None):
    ap = _Parser(description=__doc__.split("\n")[0],
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="mlp3, bert-base, bert-large, gpt2, gpt2-medium, gpt2-large, "
                                    "gpt2-xl, llama-7b, or any torchvision.models classifier "
                                    "(resnet50, ...)")
    ap.add_argument("--module", metavar="FILE.py:FUNC",
                    help="your own model: FUNC(batch=, device=) returns (model, inputs, loss_fn"
                         "[, targets]); see models/README.md")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default 1; with --module "
                                                              "passed to FUNC, which otherwise chooses)")
    ap.add_argument("--symbolic-batch", action="store_true",
                    help="write the batch as the symbolic dim 'batch' (bind it with roamc --dim batch=N; "
                         "roamc --max-batch searches it)")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--seq-len", type=int, default=None,
                    help="sequence length (default 128 for BERT, 1024 for GPT-2, 2048 for LLaMA)")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
    ap.add_argument("--layers", type=int, default=None,
                    help="BERT/GPT-2/LLaMA: this many transformer layers instead of the "
                         "configuration's "
                         "(bigger graphs of the same structure, for scale tests)")
    ap.add_argument("--amp", choices=["bf16", "fp16"], default=None,
                    help="mixed precision: trace the forward and the loss under "
                         "torch.autocast('cpu', bfloat16) (fp32 master weights, gradients and "
                         "optimizer state; bf16 copies where autocast makes them); fp16 is refused "
                         "(see models/README.md)")
    ap.add_argument("--grad-accum", type=int, default=1, metavar="K",
                    help="gradient accumulation: K microbatches of --batch each (forward + "
                         "backward, .grad accumulated in place), then one optimizer step "
                         "(default 1)")
    ap.add_argument("-o", "--output", help="output file (default MODEL_bBATCH[_amp-bf16][_gaK].onnx)")
    ap.add_argument("--all", metavar="DIR", help="export the evaluation set into DIR")
    ap.add_argument("--only", help="with --all: comma-separated file stems to export")
    ap.add_argument("--list", action="store_true", help="list the known model names")
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also print how the tracer classified aliasing ops (unannotated views "
                    "and writes)")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(known_models()))
        return 0
    if a.batch is not None and a.batch < 1:
        die("--batch must be >= 1")
    if a.grad_accum < 1:
        die("--grad-accum must be >= 1")
    if a.amp == "fp16":
        die("--amp fp16: " + AMP_FP16_REFUSAL)
    if a.all and (a.amp or a.grad_accum > 1):
        die("--all writes the fp32 evaluation set; --amp/--grad-accum go with --model or --module")
    if a.image_size < 1 or (a.seq_len is not None and a.seq_len < 1):
        die("--image-size and --seq-len must be >= 1")
    if a.module:
        if a.model or a.all or a.layers is not None:
            die("--module replaces --model/--all/--layers: give one")
        if a.output:
            check_output(a.output)
        um = UserModule(a.module)
        out = a.output or "%s_%s.onnx" % (os.path.splitext(os.path.basename(um.path))[0], um.func_name)
        batch = None if a.symbolic_batch else "func" if a.batch is None else a.batch
        if batch is None and "batch" not in um.takes:
            die("%s takes no 'batch' argument, so --symbolic-batch cannot vary the batch" % um)
        run_one(um, batch, a.image_size, a.seq_len, a.optimizer, out, a.quiet, a.amp, a.grad_accum,
                a.verbose)
        return 0
    if a.batch is None:
        a.batch = 1
    if a.all:
        only = set(a.only.split(",")) if a.only else None
        for m, b in EVAL_SET:
            stem = "%s_b%d" % (m, b)
            if only and stem not in only:
                continue
            run_one(m, b, 224, None, "adam", os.path.join(a.all, stem + ".onnx"), a.quiet,
                    verbose=a.verbose)
        return 0
    if not a.model:
        die("give --model NAME (or --all DIR, --list)")
    if a.layers is not None:
        cfgs = next((c for c in (BERT_CONFIGS, GPT2_CONFIGS, LLAMA_CONFIGS) if a.model in c), None)
        if cfgs is None:
            die("--layers applies only to the BERT, GPT-2 and LLaMA configurations, not to %r"
                % a.model)
        if a.layers < 1:
            die("--layers must be >= 1")
        # the module constructors read the depth from the configuration dict
        cfgs[a.model] = dict(cfgs[a.model], layers=a.layers, layers_set=True)
    if a.symbolic_batch:
        out = a.output or "%s_bsym%s.onnx" % (a.model, setup_suffix(a.amp, a.grad_accum))
        run_one(a.model, None, a.image_size, a.seq_len, a.optimizer, out, a.quiet, a.amp, a.grad_accum,
                a.verbose)
        return 0
    out = a.output or "%s_b%d%s.onnx" % (a.model, a.batch, setup_suffix(a.amp, a.grad_accum))
    run_one(a.model, a.batch, a.image_size, a.seq_len, a.optimizer, out, a.quiet, a.amp, a.grad_accum,
            a.verbose)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        die("interrupted", 130)
    except Exception as e:  # a failure nothing above caught: one line, never a traceback
        die("%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "failed"))
