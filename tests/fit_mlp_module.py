"""A small MLP with dropout (p > 0) for models/export.py --module, used by
tests/test_run_plan_fit.sh: its forward keeps activations the backward reads
(relu outputs, dropout masks), the values a changed step recomputes or
offloads (tests/make_fit_step.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DropoutMLP(nn.Module):
    def __init__(self, width=64, device=None):
        super().__init__()
        self.fc1 = nn.Linear(32, width, device=device)
        self.fc2 = nn.Linear(width, width, device=device)
        self.fc3 = nn.Linear(width, 10, device=device)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        h = self.drop(F.relu(self.fc1(x)))
        h = self.drop(F.relu(self.fc2(h)))
        return self.fc3(h)


def make(batch=8, device="cpu"):
    x = torch.randn(batch, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    return dict(model=DropoutMLP(device=device), inputs={"input": x}, loss_fn=nn.CrossEntropyLoss(),
                targets={"target": y})
