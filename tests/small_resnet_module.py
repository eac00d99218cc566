"""ResNet-18's shape at a small width, for models/export.py --module, used by
tests/test_run_plan_streams.sh: torchvision's BasicBlock, two per stage, four
stages (8, 16, 32, 64 channels), 1x1 downsampling convolutions with batch
norm, max pool, average pool, a linear head.  The same operators and the
same skip connections as resnet18, with 1/64 of its parameters, so that
fifty interleavings of a step run in seconds on a CPU."""
import torch
import torch.nn as nn
from torchvision.models.resnet import BasicBlock


class SmallResNet18(nn.Module):
    def __init__(self, widths=(8, 16, 32, 64), classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, inplanes = [], widths[0]
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            down = None
            if stride != 1 or inplanes != w:
                down = nn.Sequential(nn.Conv2d(inplanes, w, 1, stride, bias=False), nn.BatchNorm2d(w))
            layers.append(nn.Sequential(BasicBlock(inplanes, w, stride, down), BasicBlock(w, w)))
            inplanes = w
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.avgpool(self.layers(x))
        return self.fc(torch.flatten(x, 1))


def make(batch=4, device="cpu"):
    x = torch.randn(batch, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    return dict(model=SmallResNet18().to(device), inputs={"input": x}, loss_fn=nn.CrossEntropyLoss(),
                targets={"target": y})
