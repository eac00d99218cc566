"""Example for `models/export.py --module FILE.py:FUNC`: your own nn.Module.

    /usr/bin/python3 models/export.py --module models/example_module.py:make --batch 16 -o cnn_b16.onnx
    /usr/bin/python3 models/export.py --module models/example_module.py:make_lm --symbolic-batch -o lm.onnx
    build/roamc cnn_b16.onnx -o plan.json

FUNC may take `batch` (set by --batch N; --symbolic-batch calls it at batches 2, 3 and 4)
and `device` (the exporter passes "meta": build the model and the inputs on it and
nothing is allocated or initialised; a FUNC without `device` builds on the CPU and the
exporter moves everything to meta, tied parameters kept tied).  It returns

    (model, inputs, loss_fn)  or  (model, inputs, loss_fn, targets)
    or a dict with the keys model, inputs, loss_fn, targets (the last two optional)

and the exporter traces one training step:

    loss = loss_fn(model(*inputs), *targets)     # or model(*inputs) when loss_fn is None
    loss.backward(); optimizer.step()

inputs and targets are a tensor, a tuple/list of tensors, or a dict name -> tensor (the
names become the graph input names; otherwise input/input0.., target/target0..).  Only
shapes and dtypes matter: values are never read.  The model must make the tensors it
creates in forward on its inputs' device (x.device), as any model that runs on a GPU does.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    """conv-bn-relu x2, max pool, residual 1x1 conv, global average pool, linear."""

    def __init__(self, classes=10, width=32, device=None):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False, device=device)
        self.bn1 = nn.BatchNorm2d(width, device=device)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False, device=device)
        self.bn2 = nn.BatchNorm2d(width, device=device)
        self.proj = nn.Conv2d(width, 2 * width, 1, device=device)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(2 * width, classes, device=device)

    def forward(self, images):
        x = F.relu(self.bn1(self.conv1(images)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))) + x, 2)
        x = F.relu(self.proj(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(self.drop(x))


def make(batch=16, device="cpu", image_size=32):
    """An image classifier with cross-entropy: inputs and targets named by dicts."""
    model = SmallCNN(device=device)
    images = torch.randn(batch, 3, image_size, image_size, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    return dict(model=model, inputs={"images": images}, loss_fn=nn.CrossEntropyLoss(),
                targets={"labels": labels})


class TinyLM(nn.Module):
    """A 2-layer transformer language model that computes its own loss (loss_fn None);
    the output projection is tied to the embedding."""

    def __init__(self, vocab=1000, dim=128, heads=4, layers=2, seq=64, device=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, device=device)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim, device=device))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True,
                                           norm_first=True, device=device)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(dim, device=device)
        self.head = nn.Linear(dim, vocab, bias=False, device=device)
        self.head.weight = self.embed.weight

    def forward(self, tokens, labels):
        h = self.embed(tokens) + self.pos[:, :tokens.shape[1]]
        logits = self.head(self.norm(self.blocks(h)))
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def make_lm(batch=4, device="cpu", seq=64):
    """The model is its own loss: loss_fn None, the labels are a second model input."""
    tokens = torch.randint(0, 1000, (batch, seq), device=device)
    labels = torch.randint(0, 1000, (batch, seq), device=device)
    return TinyLM(seq=seq, device=device), (tokens, labels), None
