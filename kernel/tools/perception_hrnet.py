"""HRNet-W48 segmentation network as the benchmark's low-resolution building model.

Not a registering module: ``perception_models`` builds it for ``seg_building_lowres.safetensors``.
torch is imported inside :func:`build_hrnet`, so importing this module costs nothing.

The benchmark's ``HRNetSeg`` (``dora/tools/segmentation/hrnet.py``: the SpaceNet-7 winner's
PaddleSeg HRNet converted to timm's ``hrnet_w48`` modules) is, written here from those facts and
timm's HRNet configuration (Wang et al., "Deep High-Resolution Representation Learning", 2019):

* stem: conv3×3 stride 2 (3→64) BN ReLU, conv3×3 stride 2 (64→64) BN ReLU;
* ``layer1``: four Bottleneck blocks (width 64, expansion 4: 1×1, 3×3, 1×1 convs, the first with
  a 1×1 conv + BN shortcut), 256 channels at 1/4;
* stages 2/3/4 of 1/4/3 modules with 2/3/4 branches of 48/96/192/384 channels, four BasicBlocks
  (two 3×3 conv + BN, residual, ReLU) per branch, then the fuse: branch ``j`` into branch ``i`` is
  a 1×1 conv + BN + nearest upsampling ×2^(j-i) for j > i, the identity for j = i, and (i - j)
  3×3 stride-2 conv + BN steps (ReLU between them, not after the last) for j < i; the sum is
  ReLU'd. Every module of the last stage keeps all four outputs;
* transitions: a branch whose width changes gets conv3×3 + BN + ReLU, a new branch is made from
  the lowest-resolution one by conv3×3 stride 2 + BN + ReLU; ``transition{k}.{i}`` for an
  unchanged branch is an identity (no tensors);
* head (``seg_head``): the four outputs upsampled bilinearly with ``align_corners=True`` to 1/4,
  concatenated (720 channels), conv1×1 (no bias) + BN + ReLU, conv1×1 (no bias) to the classes,
  upsampled bilinearly with ``align_corners=True`` to the input size. BatchNorm eps 1e-5.

Tensor names are the benchmark's (``HRNetSeg.state_dict()``: ``conv1``, ``bn1``, ``conv2``,
``bn2``, ``layer1.{0-3}.{conv1-3,bn1-3,downsample.0/1}``, ``transition1.{0,1}.0/1``,
``transition2.2.0.0/1``, ``transition3.3.0.0/1``, ``stage{2-4}.{m}.branches.{b}.{k}.{conv,bn}{1,2}``,
``stage{2-4}.{m}.fuse_layers.{i}.{j}...``, ``seg_head.{0,1,3}``), so the name map is the identity.
"""
from __future__ import annotations

__all__ = ["HRNET_W48", "build_hrnet"]

#: hrnet_w48 (timm ``cfg_cls['hrnet_w48']``): modules per stage and branch widths
HRNET_W48 = {"stem": 64, "layer1_blocks": 4, "modules": (1, 4, 3), "widths": (48, 96, 192, 384),
             "blocks": 4}


def build_hrnet(in_channels: int = 3, num_classes: int = 2):
    """A fresh HRNet-W48 segmentation ``torch.nn.Module`` with the benchmark's tensor names;
    ``forward`` maps (N, 3, H, W) float32 to (N, num_classes, H, W) raw logits."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def conv_bn(cin, cout, k, stride=1, relu=True):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*(layers + [nn.ReLU()] if relu else layers))

    class Bottleneck(nn.Module):
        def __init__(self, cin, width):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(width * 4)
            self.downsample = (conv_bn(cin, width * 4, 1, relu=False) if cin != width * 4 else None)

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = F.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return F.relu(y + (self.downsample(x) if self.downsample is not None else x))

    class BasicBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(y)) + x)

    class Upsample(nn.Module):  # no tensors; keeps the fuse layers' indices
        def __init__(self, factor):
            super().__init__()
            self.factor = factor

        def forward(self, x):
            return F.interpolate(x, scale_factor=self.factor, mode="nearest")

    class HRModule(nn.Module):
        def __init__(self, widths):
            super().__init__()
            n = len(widths)
            self.branches = nn.ModuleList(
                nn.Sequential(*[BasicBlock(c) for _ in range(HRNET_W48["blocks"])]) for c in widths)
            fuse = []
            for i in range(n):
                row = []
                for j in range(n):
                    if j > i:
                        row.append(nn.Sequential(nn.Conv2d(widths[j], widths[i], 1, bias=False),
                                                 nn.BatchNorm2d(widths[i]), Upsample(2 ** (j - i))))
                    elif j == i:
                        row.append(nn.Identity())
                    else:
                        steps = [conv_bn(widths[j], widths[i] if k == i - j - 1 else widths[j], 3, 2,
                                         relu=k < i - j - 1) for k in range(i - j)]
                        row.append(nn.Sequential(*steps))
                fuse.append(nn.ModuleList(row))
            self.fuse_layers = nn.ModuleList(fuse)

        def forward(self, xs):
            xs = [b(x) for b, x in zip(self.branches, xs)]
            out = []
            for row in self.fuse_layers:
                y = None
                for f, x in zip(row, xs):
                    y = f(x) if y is None else y + f(x)
                out.append(F.relu(y))
            return out

    def transition(pre, cur):
        layers = []
        for i, c in enumerate(cur):
            if i < len(pre):
                layers.append(conv_bn(pre[i], c, 3) if c != pre[i] else nn.Identity())
            else:  # timm: i + 1 - len(pre) steps; one for HRNet's one-new-branch transitions
                layers.append(nn.Sequential(*[conv_bn(pre[-1], c if k == i - len(pre) else pre[-1], 3, 2)
                                              for k in range(i + 1 - len(pre))]))
        return nn.ModuleList(layers)

    widths = HRNET_W48["widths"]

    class HRNetSeg(nn.Module):
        """HRNet-W48 with the benchmark's tensor names (see the module docstring)."""

        def __init__(self):
            super().__init__()
            stem = HRNET_W48["stem"]
            self.conv1 = nn.Conv2d(in_channels, stem, 3, 2, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(stem)
            self.conv2 = nn.Conv2d(stem, 64, 3, 2, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(64)
            self.layer1 = nn.Sequential(*[Bottleneck(64 if k == 0 else 256, 64)
                                          for k in range(HRNET_W48["layer1_blocks"])])
            self.transition1 = transition([256], widths[:2])
            self.stage2 = nn.Sequential(*[HRModule(widths[:2]) for _ in range(HRNET_W48["modules"][0])])
            self.transition2 = transition(widths[:2], widths[:3])
            self.stage3 = nn.Sequential(*[HRModule(widths[:3]) for _ in range(HRNET_W48["modules"][1])])
            self.transition3 = transition(widths[:3], widths[:4])
            self.stage4 = nn.Sequential(*[HRModule(widths) for _ in range(HRNET_W48["modules"][2])])
            self.seg_head = nn.Sequential(nn.Conv2d(sum(widths), sum(widths), 1, bias=False),
                                          nn.BatchNorm2d(sum(widths)), nn.ReLU(),
                                          nn.Conv2d(sum(widths), num_classes, 1, bias=False))

        @staticmethod
        def _transition(xs, layers):
            return [xs[i] if isinstance(t, nn.Identity) else t(xs[-1]) for i, t in enumerate(layers)]

        def forward(self, x):
            h, w = x.shape[2:]
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.bn2(self.conv2(x)))
            xs = [self.layer1(x)]
            for trans, stage in ((self.transition1, self.stage2), (self.transition2, self.stage3),
                                 (self.transition3, self.stage4)):
                xs = self._transition(xs, trans)
                for module in stage:
                    xs = module(xs)
            size = xs[0].shape[2:]
            feats = [xs[0]] + [F.interpolate(f, size=size, mode="bilinear", align_corners=True)
                               for f in xs[1:]]
            out = self.seg_head(torch.cat(feats, dim=1))
            return F.interpolate(out, size=(h, w), mode="bilinear", align_corners=True)

    return HRNetSeg()
