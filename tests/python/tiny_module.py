"""A tiny module for the Python tests: `models/export.py --module tests/python/tiny_module.py:make`
and roamc.torch.plan(*make()) must give the same step and plan."""
import torch
import torch.nn as nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)
        self.fc2.weight = nn.Parameter(torch.randn(10, 64))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def make(batch=8):
    torch.manual_seed(0)
    model = Tiny()
    return dict(model=model, inputs={"x": torch.randn(batch, 32)}, loss_fn=nn.CrossEntropyLoss(),
                targets={"y": torch.randint(0, 10, (batch,))})
