"""Swin-T + UPerNet as the benchmark's bi-temporal landslide model.

Not a registering module: ``perception_models`` builds it for
``seg_landslide_bitemporal.safetensors``. torch is imported inside :func:`build_swin_upernet`.

The benchmark's ``SwinUperNet(in_channels=6, num_classes=2)``
(``dora/tools/segmentation/swin_upernet.py``) is torchvision's ``swin_t`` (Liu et al., "Swin
Transformer", ICCV 2021) with a 6-channel patch embedding and a UPerNet decoder (Xiao et al.,
2018). Written here from those facts:

* backbone ``backbone_model``: patch embedding conv 4×4 stride 4 (6→96, bias) + LayerNorm; four
  stages of 2/2/6/2 blocks, widths 96/192/384/768, 3/6/12/24 heads, window 7, MLP ratio 4 (exact
  GELU), LayerNorm eps 1e-5; a block is ``x + attn(norm1(x))`` then ``x + mlp(norm2(x))``; the
  attention pads the map to a multiple of 7 (bottom/right), rolls it by −shift for the odd
  blocks, attends within 7×7 windows with a learned relative position bias (``-100`` between
  tokens of different regions of a shifted window), rolls back and crops; patch merging between
  stages (zero-pads odd sizes; concatenates the (0,0), (1,0), (0,1), (1,1) pixels, LayerNorm,
  linear 4C→2C without bias). The backbone's final ``norm`` and ``head`` are in the checkpoint
  but unused;
* **shift quirk**: torchvision sets a block's shift to 0 *for good* (it writes into the module's
  list) the first time the padded map is no larger than the window in that dimension; the
  benchmark's constructor runs a 224 px sample, whose stage-4 map is 7 × 7, so stage 4 never
  shifts, and a call whose windows make a stage's map ≤ 7 px in a dimension turns that stage's
  shift off in that dimension (the model is rebuilt per call there, and all windows of a call
  have one size, so a per-forward rule gives the same result);
* features: each stage's output (before the final norm), NCHW;
* decoder: PPM on stage 4 (adaptive average pools 1, 2, 3, 6 → conv1×1 + BN + ReLU, upsampled
  bilinearly with ``align_corners=False``, concatenated with the input, conv3×3 + BN + ReLU);
  lateral conv1×1 + BN + ReLU per other stage; top-down: upsample, add, conv3×3 + BN + ReLU; all
  four upsampled to stage 1, concatenated, conv3×3 + BN + ReLU (``fusion``); ``classifier``:
  conv3×3 + BN + ReLU, conv1×1 (bias) to the classes; logits upsampled bilinearly to the input.

Tensor names are the benchmark's as ``safetensors.torch.save_model`` writes them: the backbone
once, under ``backbone_model.`` (its twin ``feature_extractor.swin_model.`` shares the tensors and
is accepted in its place when loading).
"""
from __future__ import annotations

__all__ = ["SWIN_T", "build_swin_upernet", "SHARED_PREFIXES"]

#: swin_t (torchvision ``swin_t``) and the UPerNet decoder of the benchmark
SWIN_T = {"embed_dim": 96, "depths": (2, 2, 6, 2), "num_heads": (3, 6, 12, 24), "window": 7,
          "fpn": 256, "pool_scales": (1, 2, 3, 6)}
#: the second name of the shared backbone tensors → the name the studio's module uses
SHARED_PREFIXES = {"feature_extractor.swin_model.": "backbone_model."}


def build_swin_upernet(in_channels: int = 6, num_classes: int = 2):
    """A fresh Swin-T UPerNet ``torch.nn.Module`` with the benchmark's tensor names; ``forward``
    maps (N, in_channels, H, W) float32 to (N, num_classes, H, W) raw logits."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    ws = SWIN_T["window"]

    def rel_index():
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += ws - 1
        rel[:, :, 1] += ws - 1
        rel[:, :, 0] *= 2 * ws - 1
        return rel.sum(-1).flatten()

    class WindowAttention(nn.Module):
        def __init__(self, dim, heads, shifted):
            super().__init__()
            self.heads, self.shifted = heads, shifted
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, heads))
            self.register_buffer("relative_position_index", rel_index())

        def forward(self, x):
            b, h, w, c = x.shape
            x = F.pad(x, (0, 0, 0, (ws - w % ws) % ws, 0, (ws - h % ws) % ws))
            ph, pw = x.shape[1:3]
            sh = ws // 2 if self.shifted and ph > ws else 0
            sw = ws // 2 if self.shifted and pw > ws else 0
            if sh or sw:
                x = torch.roll(x, shifts=(-sh, -sw), dims=(1, 2))
            nw = (ph // ws) * (pw // ws)
            t = x.view(b, ph // ws, ws, pw // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nw, ws * ws, c)
            qkv = self.qkv(t).reshape(t.size(0), t.size(1), 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0] * (c // self.heads) ** -0.5, qkv[1], qkv[2]
            bias = self.relative_position_bias_table[self.relative_position_index]
            attn = q.matmul(k.transpose(-2, -1)) + bias.view(ws * ws, ws * ws, -1).permute(2, 0, 1).unsqueeze(0)
            if sh or sw:
                region = x.new_zeros((ph, pw))
                n = 0
                for hs in ((0, -ws), (-ws, -sh), (-sh, None)):
                    for wsl in ((0, -ws), (-ws, -sw), (-sw, None)):
                        region[hs[0]:hs[1], wsl[0]:wsl[1]] = n
                        n += 1
                region = region.view(ph // ws, ws, pw // ws, ws).permute(0, 2, 1, 3).reshape(nw, ws * ws)
                mask = region.unsqueeze(1) - region.unsqueeze(2)
                mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
                attn = attn.view(b, nw, self.heads, ws * ws, ws * ws) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.heads, ws * ws, ws * ws)
            t = attn.softmax(dim=-1).matmul(v).transpose(1, 2).reshape(t.size(0), t.size(1), c)
            t = self.proj(t)
            x = t.view(b, ph // ws, pw // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, ph, pw, c)
            if sh or sw:
                x = torch.roll(x, shifts=(sh, sw), dims=(1, 2))
            return x[:, :h, :w, :].contiguous()

    class Block(nn.Module):
        def __init__(self, dim, heads, shifted):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = WindowAttention(dim, heads, shifted)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Identity(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class PatchMerging(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
            self.norm = nn.LayerNorm(4 * dim)

        def forward(self, x):
            h, w = x.shape[1:3]
            x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
            x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
            return self.reduction(self.norm(x))

    class ToNHWC(nn.Module):
        def forward(self, x):
            return x.permute(0, 2, 3, 1)

    class SwinT(nn.Module):
        def __init__(self):
            super().__init__()
            d = SWIN_T["embed_dim"]
            layers = [nn.Sequential(nn.Conv2d(in_channels, d, 4, 4), ToNHWC(), nn.LayerNorm(d))]
            for s, (depth, heads) in enumerate(zip(SWIN_T["depths"], SWIN_T["num_heads"])):
                dim = d * 2 ** s
                # stage 4 never shifts in the benchmark (see the module docstring)
                layers.append(nn.Sequential(*[Block(dim, heads, shifted=i % 2 == 1 and s < 3)
                                              for i in range(depth)]))
                if s < 3:
                    layers.append(PatchMerging(dim))
            self.features = nn.Sequential(*layers)
            self.norm = nn.LayerNorm(d * 8)  # in the checkpoint, unused
            self.head = nn.Linear(d * 8, 1000)  # in the checkpoint, unused

        def stages(self, x):
            out = []
            for i, layer in enumerate(self.features):
                x = layer(x)
                if i % 2 == 1:
                    out.append(x.permute(0, 3, 1, 2).contiguous())
            return out

    def cbr(cin, cout, k):
        return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    fpn, scales = SWIN_T["fpn"], SWIN_T["pool_scales"]
    widths = [SWIN_T["embed_dim"] * 2 ** s for s in range(4)]

    class PPM(nn.Module):
        def __init__(self):
            super().__init__()
            self.stages = nn.ModuleList(
                nn.Sequential(nn.AdaptiveAvgPool2d(s), nn.Conv2d(widths[-1], fpn, 1, bias=False),
                              nn.BatchNorm2d(fpn), nn.ReLU()) for s in scales)
            self.bottleneck = cbr(widths[-1] + len(scales) * fpn, fpn, 3)

        def forward(self, x):
            size = x.shape[2:]
            return self.bottleneck(torch.cat(
                [x] + [F.interpolate(st(x), size=size, mode="bilinear", align_corners=False)
                       for st in self.stages], dim=1))

    class UPerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.ppm = PPM()
            self.lateral_convs = nn.ModuleList(cbr(c, fpn, 1) for c in widths[:-1])
            self.fpn_convs = nn.ModuleList(cbr(fpn, fpn, 3) for _ in widths[:-1])
            self.fusion = cbr(4 * fpn, fpn, 3)

        def forward(self, feats):
            laterals = [conv(f) for conv, f in zip(self.lateral_convs, feats[:-1])]
            prev = self.ppm(feats[-1])
            outs = [prev]
            for lateral, conv in zip(reversed(laterals), reversed(self.fpn_convs)):
                prev = conv(lateral + F.interpolate(prev, size=lateral.shape[2:], mode="bilinear",
                                                    align_corners=False))
                outs.insert(0, prev)
            size = outs[0].shape[2:]
            return self.fusion(torch.cat([outs[0]] + [
                F.interpolate(o, size=size, mode="bilinear", align_corners=False) for o in outs[1:]], dim=1))

    class SwinUperNet(nn.Module):
        """Swin-T UPerNet with the benchmark's tensor names (see the module docstring)."""

        def __init__(self):
            super().__init__()
            self.backbone_model = SwinT()
            self.decoder = UPerNet()
            self.classifier = nn.Sequential(cbr(fpn, fpn, 3), nn.Conv2d(fpn, num_classes, 1))

        def forward(self, x):
            out = self.classifier(self.decoder(self.backbone_model.stages(x)))
            return F.interpolate(out, size=x.shape[2:], mode="bilinear", align_corners=False)

    return SwinUperNet()
