"""YOLOv8 (Ultralytics, 2023) from its published architecture, for the zoo: random weights, no NMS.

Backbone: strided 3x3 conv stages with C2f blocks (split in two, a chain of bottlenecks on one half, every
intermediate concatenated, a 1x1 fuse) and an SPPF (three chained 5x5 max pools, concatenated). Neck: a
top-down then bottom-up path (nearest 2x upsampling + concat, strided conv + concat) to strides 8, 16, 32.
Head: per level a box branch (4 x 16-bin distributions, decoded by a softmax-weighted bin sum: DFL) and a
class branch (sigmoid), boxes decoded against the grid of anchor points to xywh in pixels. The output is
(batch, 4 + classes, anchors), what an exported detector hands to NMS.

Needs torch; imported only by the zoo's builders.
"""

from __future__ import annotations

import torch
from torch import nn


class ConvBnAct(nn.Module):
    def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool):
        super().__init__()
        self.cv1, self.cv2 = ConvBnAct(c, c, 3), ConvBnAct(c, c, 3)
        self.add = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, cin: int, cout: int, n: int, shortcut: bool):
        super().__init__()
        self.c = cout // 2
        self.cv1 = ConvBnAct(cin, 2 * self.c)
        self.cv2 = ConvBnAct((2 + n) * self.c, cout)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ys = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            ys.append(m(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class SPPF(nn.Module):
    def __init__(self, cin: int, cout: int, k: int = 5):
        super().__init__()
        self.cv1 = ConvBnAct(cin, cin // 2)
        self.cv2 = ConvBnAct(cin // 2 * 4, cout)
        self.pool = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ys = [self.cv1(x)]
        for _ in range(3):
            ys.append(self.pool(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class Detect(nn.Module):
    def __init__(self, classes: int, chans: tuple[int, ...], strides=(8, 16, 32), bins: int = 16):
        super().__init__()
        self.classes, self.bins, self.strides = classes, bins, strides
        cb, cc = max(16, chans[0] // 4, 4 * bins), max(chans[0], min(classes, 100))
        self.box = nn.ModuleList(nn.Sequential(ConvBnAct(c, cb, 3), ConvBnAct(cb, cb, 3), nn.Conv2d(cb, 4 * bins, 1))
                                 for c in chans)
        self.cls = nn.ModuleList(nn.Sequential(ConvBnAct(c, cc, 3), ConvBnAct(cc, cc, 3), nn.Conv2d(cc, classes, 1))
                                 for c in chans)
        self.register_buffer("bin_index", torch.arange(bins, dtype=torch.float32).view(1, bins, 1, 1))

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        b = feats[0].shape[0]
        outs, anchors, scale = [], [], []
        for i, f in enumerate(feats):
            outs.append(torch.cat((self.box[i](f), self.cls[i](f)), 1).flatten(2))
            h, w = f.shape[2], f.shape[3]
            ys = torch.arange(h, dtype=torch.float32) + 0.5
            xs = torch.arange(w, dtype=torch.float32) + 0.5
            gy, gx = torch.meshgrid(ys, xs, indexing="ij")
            anchors.append(torch.stack((gx, gy), 0).flatten(1))
            scale.append(torch.full((1, h * w), float(self.strides[i])))
        y = torch.cat(outs, 2)
        box, cls = y.split((4 * self.bins, self.classes), 1)
        n = box.shape[2]
        # DFL: each side's distance is the expectation of its 16-bin distribution.
        dist = box.view(b, 4, self.bins, n).transpose(2, 1).softmax(1)
        dist = nn.functional.conv2d(dist, self.bin_index).view(b, 4, n)
        anchor, stride = torch.cat(anchors, 1).unsqueeze(0), torch.cat(scale, 1).unsqueeze(0)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = anchor - lt, anchor + rb
        xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride
        return torch.cat((xywh, cls.sigmoid()), 1)


class YOLOv8(nn.Module):
    """`width`/`depth` multiply the base channels (64..1024, capped at `max_channels`) and C2f repeats."""

    def __init__(self, width: float = 0.25, depth: float = 0.33, max_channels: int = 1024, classes: int = 80):
        super().__init__()

        def c(v: int) -> int:
            return int(min(v, max_channels) * width + 7) // 8 * 8

        def d(v: int) -> int:
            return max(round(v * depth), 1)

        self.stem = nn.Sequential(ConvBnAct(3, c(64), 3, 2), ConvBnAct(c(64), c(128), 3, 2),
                                  C2f(c(128), c(128), d(3), True))
        self.p3 = nn.Sequential(ConvBnAct(c(128), c(256), 3, 2), C2f(c(256), c(256), d(6), True))
        self.p4 = nn.Sequential(ConvBnAct(c(256), c(512), 3, 2), C2f(c(512), c(512), d(6), True))
        self.p5 = nn.Sequential(ConvBnAct(c(512), c(1024), 3, 2), C2f(c(1024), c(1024), d(3), True),
                                SPPF(c(1024), c(1024)))
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.td4 = C2f(c(1024) + c(512), c(512), d(3), False)
        self.td3 = C2f(c(512) + c(256), c(256), d(3), False)
        self.down3 = ConvBnAct(c(256), c(256), 3, 2)
        self.bu4 = C2f(c(256) + c(512), c(512), d(3), False)
        self.down4 = ConvBnAct(c(512), c(512), 3, 2)
        self.bu5 = C2f(c(512) + c(1024), c(1024), d(3), False)
        self.detect = Detect(classes, (c(256), c(512), c(1024)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x3 = self.p3(self.stem(x))
        x4 = self.p4(x3)
        x5 = self.p5(x4)
        t4 = self.td4(torch.cat((self.up(x5), x4), 1))
        o3 = self.td3(torch.cat((self.up(t4), x3), 1))
        o4 = self.bu4(torch.cat((self.down3(o3), t4), 1))
        o5 = self.bu5(torch.cat((self.down4(o4), x5), 1))
        return self.detect([o3, o4, o5])
