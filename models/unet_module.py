"""A small U-Net (Ronneberger et al. 2015, with BatchNorm as most PyTorch U-Nets have it)
for `models/export.py --module models/unet_module.py:make` and for
models/eval_export_compare.py: 4 levels of conv-bn-relu x2, max pooling down,
ConvTranspose up, skip connections by concatenation, a 1x1 conv to per-pixel
class logits [N, classes, H, W] with cross-entropy against [N, H, W] labels.

    /usr/bin/python3 models/export.py --module models/unet_module.py:make --batch 4 -o unet_b4.onnx
"""
import torch
import torch.nn as nn


def _double_conv(cin, cout, device):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False, device=device),
        nn.BatchNorm2d(cout, device=device), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False, device=device),
        nn.BatchNorm2d(cout, device=device), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, in_ch=3, classes=2, width=16, levels=4, device=None):
        super().__init__()
        chans = [width * 2 ** k for k in range(levels)]
        self.down = nn.ModuleList()
        c = in_ch
        for ch in chans:
            self.down.append(_double_conv(c, ch, device))
            c = ch
        self.pool = nn.MaxPool2d(2)
        self.bottom = _double_conv(c, 2 * c, device)
        c = 2 * c
        self.up = nn.ModuleList()
        self.upconv = nn.ModuleList()
        for ch in reversed(chans):
            self.upconv.append(nn.ConvTranspose2d(c, ch, 2, stride=2, device=device))
            self.up.append(_double_conv(2 * ch, ch, device))
            c = ch
        self.head = nn.Conv2d(c, classes, 1, device=device)

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for upc, up, s in zip(self.upconv, self.up, reversed(skips)):
            x = up(torch.cat([upc(x), s], 1))
        return self.head(x)


def make(batch=4, device="cpu", image_size=128, classes=2):
    model = UNet(classes=classes, device=device)
    images = torch.randn(batch, 3, image_size, image_size, device=device)
    labels = torch.randint(0, classes, (batch, image_size, image_size), device=device)
    return dict(model=model, inputs={"images": images}, loss_fn=nn.CrossEntropyLoss(),
                targets={"labels": labels})
