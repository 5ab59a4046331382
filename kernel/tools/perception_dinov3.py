"""DINOv3 ViT-L/16 + DPT heads as the benchmark's DPT perception models.

Not a registering module: ``perception_models`` builds these networks for the DPT checkpoints
(``seg_isaid``, ``seg_landcover``, ``seg_water``, ``seg_aerial``: ``DPT``; ``seg_building_damage``,
``seg_building_damage_opt_sar``, ``seg_road_damage``, ``seg_lava``,
``seg_reconstruction_building``: ``BitemporalDPT``). torch is imported inside the builders, so
importing this module costs nothing.

The benchmark's networks (``dora/tools/segmentation/dpt.py`` on its vendored copy of Meta's
DINOv3 ``vit_large``, ``dora/tools/segmentation/dinov3/``; Siméoni et al., "DINOv3", 2025; Ranftl
et al., "Vision Transformers for Dense Prediction", ICCV 2021), written here from those facts:

* encoder ``encoder`` (ViT-L/16): patch embedding conv 16×16 stride 16 (3→1024, bias; a window
  of 518 px gives 32 × 32 tokens, the last 6 px rows/columns are not seen), no norm; a class
  token (``cls_token + 0 * mask_token``) in front, no register tokens, no absolute position
  embedding; 24 blocks ``x + ls1 * attn(norm1(x))`` then ``x + ls2 * mlp(norm2(x))``, LayerNorm
  eps 1e-6, LayerScale ``gamma``, MLP 1024→4096→1024 with exact GELU; attention with 16 heads of
  64, ``qkv`` bias multiplied by the stored ``bias_mask`` (``mask_k_bias``), torch's
  ``scaled_dot_product_attention`` (scale 1/8), ``proj``;
* **rotary position embedding in bfloat16** (the benchmark's ``pos_embed_rope_dtype="bf16"``):
  the patch coordinates ``(arange(0.5, n) / n) * 2 - 1`` per axis (``normalize_coords=
  "separate"``), angles ``2π · coord / periods`` for the 16 stored ``periods`` per axis ([rows,
  columns] concatenated, then tiled twice), ``sin``/``cos``, all computed in bfloat16; in each
  attention q and k are cast to bfloat16 (the class token's too, which the rotation skips),
  rotated as ``q·cos + rotate_half(q)·sin`` in bfloat16, and cast back to float32. Those
  roundings decide labels, so they are reproduced operation by operation;
* the outputs of blocks 5, 11, 17, 23 (0-based) go through the encoder's final ``norm``, the
  class token kept in front;
* ``DPT`` (single image): ``neck_fuse_list`` Linear 1024→512 + LayerNorm (eps 1e-5) + ReLU per
  level; ``BitemporalDPT`` (6 channels = pre RGB then post RGB): both images through the encoder
  as one batch (pre, post of each window in turn), per level ``temporal_fuse_list`` Linear
  4096→1024 + LayerNorm (eps 1e-5) + ReLU of ``[|pre − post|, pre · post, pre, post]``;
* decoder ``decoder.feature_processor``: per level the class token is read out into every patch
  token (Linear 2C→C + exact GELU of ``[token, cls]``), the tokens are reshaped to a **square**
  grid of side ``isqrt(tokens)`` (the benchmark asserts that the count is a perfect square: a
  non-square window fails there, a non-square one whose count happens to be square is reshaped
  to the square anyway, as here), conv1×1 to 96/192/384/768 channels, then resized by a 4×4
  stride-4 and a 2×2 stride-2 transposed conv, the identity, a 3×3 stride-2 conv;
* ``decoder.dpt`` (the DPT head, 256 features): ``scratch.layer{1-4}_rn`` conv3×3 without bias;
  ``refinenet4`` .. ``refinenet1`` (fusion blocks: the deeper path bilinearly resized with
  ``align_corners=True`` to the lateral's size when they differ, added to ``resConfUnit1`` of the
  lateral, ``resConfUnit2``, upsampled ×2 bilinearly with ``align_corners=True``, ``out_conv``
  1×1; a residual unit is ``x + conv2(relu(conv1(relu(x))))``); ``output_conv``: conv3×3 (no
  bias) + BatchNorm + ReLU + dropout (identity) + conv1×1 to the classes + ×2 bilinear
  (``align_corners=True``); ``refinenet4.resConfUnit1`` is in the checkpoint but unused;
* the logits are resized bilinearly (``align_corners=True``) to the window and **softmax**ed:
  the network returns probabilities, which the tools average over windows.

Tensor names are the benchmark's (``DPT.state_dict()`` / ``BitemporalDPT.state_dict()``, 457
tensors each), so the name map is the identity. ``encoder.rope_embed.periods`` is stored in
bfloat16; ``encoder.blocks.{i}.attn.qkv.bias_mask`` is a float32 buffer of the file (the
benchmark builds it as NaN and relies on the checkpoint).
"""
from __future__ import annotations

import math

__all__ = ["VIT_L16", "DPT_CHANNELS", "build_dpt", "build_bitemporal_dpt", "fixed_tensor"]

#: DINOv3 ViT-L/16 as the benchmark builds it (``vit_large(img_size=518, patch_size=16,
#: layerscale_init=1e-5, mask_k_bias=True, norm_layer="layernorm", ffn_layer="mlp")``)
VIT_L16 = {"embed_dim": 1024, "depth": 24, "heads": 16, "patch": 16, "ffn_ratio": 4,
           "rope_base": 100.0, "ln_eps": 1e-6, "out_blocks": (5, 11, 17, 23)}
#: DPT reassemble widths per level, the head's feature width and the single-image neck width
DPT_CHANNELS = (96, 192, 384, 768)
DPT_FEATURES, DPT_NECK = 256, 512


def fixed_tensor(name: str, shape: tuple):
    """The value a seeded test checkpoint holds for a tensor that is not a learnt weight, or
    ``None``: ``...rope_embed.periods`` as DINOv3 computes it (``100 ** (2 i / 32)``, i < 16, in
    bfloat16), ``...attn.qkv.bias_mask`` 1 for the q and v thirds and 0 for the k third (what
    ``mask_k_bias`` stands for: DINOv3's key projection has no bias)."""
    import torch

    if name.endswith("rope_embed.periods"):
        d_head = VIT_L16["embed_dim"] // VIT_L16["heads"]
        return VIT_L16["rope_base"] ** (
            2 * torch.arange(d_head // 4, dtype=torch.bfloat16) / (d_head // 2))
    if name.endswith("attn.qkv.bias_mask"):
        mask = torch.ones(shape, dtype=torch.float32)
        third = shape[0] // 3
        mask[third:2 * third] = 0
        return mask
    return None


def _modules():
    """The torch modules shared by both builders (defined once per call, torch imported here)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    dim, heads = VIT_L16["embed_dim"], VIT_L16["heads"]
    hd = dim // heads
    bf16 = torch.bfloat16

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            p = VIT_L16["patch"]
            self.proj = nn.Conv2d(3, dim, p, p)

        def forward(self, x):
            x = self.proj(x)
            h, w = x.shape[2:]
            return x.flatten(2).transpose(1, 2), h, w

    class Rope(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("periods", torch.empty(hd // 4, dtype=bf16))

        def forward(self, h: int, w: int):
            dev = self.periods.device
            ch = torch.arange(0.5, h, device=dev, dtype=bf16) / h
            cw = torch.arange(0.5, w, device=dev, dtype=bf16) / w
            coords = torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1)
            coords = 2.0 * coords - 1.0
            angles = 2 * math.pi * coords[:, :, None] / self.periods[None, None, :]
            angles = angles.flatten(1, 2).tile(2)
            return torch.sin(angles), torch.cos(angles)

    def rotate(x, sin, cos):
        x1, x2 = x.chunk(2, dim=-1)
        return (x * cos) + (torch.cat([-x2, x1], dim=-1) * sin)

    class QKV(nn.Linear):
        def __init__(self):
            super().__init__(dim, 3 * dim)
            self.register_buffer("bias_mask", torch.empty(3 * dim))

        def forward(self, x):
            return F.linear(x, self.weight, self.bias * self.bias_mask.to(self.bias.dtype))

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = QKV()
            self.proj = nn.Linear(dim, dim)

        def forward(self, x, sin, cos):
            b, n, _ = x.shape
            q, k, v = torch.unbind(self.qkv(x).reshape(b, n, 3, heads, hd), 2)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            # the rotation in bfloat16, every token cast (see the module docstring)
            qb, kb = q.to(bf16), k.to(bf16)
            pre = n - sin.shape[-2]
            qb = torch.cat((qb[:, :, :pre], rotate(qb[:, :, pre:], sin, cos)), dim=-2)
            kb = torch.cat((kb[:, :, :pre], rotate(kb[:, :, pre:], sin, cos)), dim=-2)
            out = F.scaled_dot_product_attention(qb.to(q.dtype), kb.to(k.dtype), v)
            return self.proj(out.transpose(1, 2).reshape(b, n, dim))

    class LayerScale(nn.Module):
        def __init__(self):
            super().__init__()
            self.gamma = nn.Parameter(torch.empty(dim))

        def forward(self, x):
            return x * self.gamma

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(dim, dim * VIT_L16["ffn_ratio"])
            self.fc2 = nn.Linear(dim * VIT_L16["ffn_ratio"], dim)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=VIT_L16["ln_eps"])
            self.attn = Attention()
            self.ls1 = LayerScale()
            self.norm2 = nn.LayerNorm(dim, eps=VIT_L16["ln_eps"])
            self.mlp = Mlp()
            self.ls2 = LayerScale()

        def forward(self, x, sin, cos):
            x = x + self.ls1(self.attn(self.norm1(x), sin, cos))
            return x + self.ls2(self.mlp(self.norm2(x)))

    class Encoder(nn.Module):
        """DINOv3 ViT-L/16 with the benchmark's tensor names (``encoder.``)."""

        def __init__(self):
            super().__init__()
            self.cls_token = nn.Parameter(torch.empty(1, 1, dim))
            self.mask_token = nn.Parameter(torch.empty(1, dim))
            self.patch_embed = PatchEmbed()
            self.rope_embed = Rope()
            self.blocks = nn.ModuleList(Block() for _ in range(VIT_L16["depth"]))
            self.norm = nn.LayerNorm(dim, eps=VIT_L16["ln_eps"])

        def levels(self, x):
            """The normed tokens ([cls, patches], (N, 1 + h·w, 1024)) after the four blocks."""
            t, h, w = self.patch_embed(x)
            cls = (self.cls_token + 0 * self.mask_token).expand(t.shape[0], -1, -1)
            t = torch.cat([cls, t], dim=1)
            sin, cos = self.rope_embed(h, w)
            out = []
            for i, blk in enumerate(self.blocks):
                t = blk(t, sin, cos)
                if i in VIT_L16["out_blocks"]:
                    out.append(self.norm(t))
            return out

    def fuse(cin, cout):
        return nn.Sequential(nn.Linear(cin, cout), nn.LayerNorm(cout), nn.ReLU())

    class Readout(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.project = nn.Sequential(nn.Linear(2 * c, c), nn.GELU())

        def forward(self, x):
            cls = x[:, 0].unsqueeze(1).expand_as(x[:, 1:])
            return self.project(torch.cat((x[:, 1:], cls), dim=-1))

    class Reassemble(nn.Module):
        def __init__(self, c, cout, scale):
            super().__init__()
            self.readout_oper = Readout(c)
            self.conv_project = nn.Conv2d(c, cout, 1)
            self.resize = {4: lambda: nn.ConvTranspose2d(cout, cout, 4, 4),
                           2: lambda: nn.ConvTranspose2d(cout, cout, 2, 2),
                           1: nn.Identity,
                           0.5: lambda: nn.Conv2d(cout, cout, 3, 2, 1)}[scale]()

        def forward(self, x):
            x = self.readout_oper(x).transpose(1, 2)
            b, c, n = x.shape
            side = math.isqrt(n)
            if side * side != n:
                raise ValueError(f"the DPT decoder needs a square grid of tokens, got {n}: a "
                                 f"window smaller than 518 px must be square (the benchmark's "
                                 f"ReassembleLayer refuses it too)")
            return self.resize(self.conv_project(x.reshape(b, c, side, side)))

    class FeatureProcessor(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.reassemble_layers = nn.ModuleList(
                Reassemble(c, cout, s) for cout, s in zip(DPT_CHANNELS, (4, 2, 1, 0.5)))

    class RCU(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(DPT_FEATURES, DPT_FEATURES, 3, 1, 1)
            self.conv2 = nn.Conv2d(DPT_FEATURES, DPT_FEATURES, 3, 1, 1)

        def forward(self, x):
            return self.conv2(F.relu(self.conv1(F.relu(x)))) + x

    class Fusion(nn.Module):
        def __init__(self):
            super().__init__()
            self.out_conv = nn.Conv2d(DPT_FEATURES, DPT_FEATURES, 1)
            self.resConfUnit1 = RCU()
            self.resConfUnit2 = RCU()

        def forward(self, x, lateral=None):
            if lateral is not None:
                res = self.resConfUnit1(lateral)
                if x.shape[-2:] != res.shape[-2:]:
                    x = F.interpolate(x, size=res.shape[-2:], mode="bilinear", align_corners=True)
                x = x + res
            x = F.interpolate(self.resConfUnit2(x), scale_factor=2, mode="bilinear",
                              align_corners=True)
            return self.out_conv(x)

    class Up2(nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)

    class Head(nn.Module):
        def __init__(self, num_classes):
            super().__init__()
            for i in range(1, 5):
                setattr(self, f"refinenet{i}", Fusion())
            self.output_conv = nn.Sequential(
                nn.Conv2d(DPT_FEATURES, DPT_FEATURES, 3, padding=1, bias=False),
                nn.BatchNorm2d(DPT_FEATURES), nn.ReLU(), nn.Identity(),
                nn.Conv2d(DPT_FEATURES, num_classes, 1), Up2())
            self.scratch = nn.Module()
            for i, c in enumerate(DPT_CHANNELS, start=1):
                setattr(self.scratch, f"layer{i}_rn", nn.Conv2d(c, DPT_FEATURES, 3, 1, 1, bias=False))

        def forward(self, feats):
            l1, l2, l3, l4 = (getattr(self.scratch, f"layer{i}_rn")(f)
                              for i, f in enumerate(feats, start=1))
            p = self.refinenet4(l4)
            p = self.refinenet3(p, l3)
            p = self.refinenet2(p, l2)
            return self.output_conv(self.refinenet1(p, l1))

    class Decoder(nn.Module):
        def __init__(self, c, num_classes):
            super().__init__()
            self.feature_processor = FeatureProcessor(c)
            self.dpt = Head(num_classes)

        def forward(self, levels):
            return self.dpt([layer(t) for layer, t in
                             zip(self.feature_processor.reassemble_layers, levels)])

    def probabilities(logits, h, w):
        return F.interpolate(logits, size=(h, w), mode="bilinear", align_corners=True).softmax(dim=1)

    return {"Encoder": Encoder, "Decoder": Decoder, "fuse": fuse, "probabilities": probabilities,
            "nn": nn, "torch": torch}


def build_dpt(in_channels: int = 3, num_classes: int = 2):
    """A fresh single-image DPT ``torch.nn.Module`` with the benchmark's tensor names;
    ``forward`` maps (N, 3, H, W) float32 to (N, num_classes, H, W) softmax probabilities."""
    m = _modules()
    nn = m["nn"]
    if in_channels != 3:
        raise ValueError(f"the benchmark's DPT takes 3 channels, not {in_channels}")
    dim = VIT_L16["embed_dim"]

    class DPT(nn.Module):
        """DINOv3 ViT-L/16 + DPT, single image (see the module docstring)."""

        def __init__(self):
            super().__init__()
            self.encoder = m["Encoder"]()
            self.decoder = m["Decoder"](DPT_NECK, num_classes)
            self.neck_fuse_list = nn.ModuleList(m["fuse"](dim, DPT_NECK) for _ in range(4))

        def forward(self, x):
            h, w = x.shape[-2:]
            levels = [f(t) for f, t in zip(self.neck_fuse_list, self.encoder.levels(x))]
            return m["probabilities"](self.decoder(levels), h, w)

    return DPT()


def build_bitemporal_dpt(in_channels: int = 6, num_classes: int = 4):
    """A fresh bi-temporal DPT ``torch.nn.Module`` with the benchmark's tensor names;
    ``forward`` maps (N, 6, H, W) float32 (pre RGB, post RGB) to (N, num_classes, H, W)
    softmax probabilities."""
    m = _modules()
    nn, torch = m["nn"], m["torch"]
    if in_channels != 6:
        raise ValueError(f"the benchmark's BitemporalDPT takes 6 channels, not {in_channels}")
    dim = VIT_L16["embed_dim"]

    class BitemporalDPT(nn.Module):
        """DINOv3 ViT-L/16 + DPT on pre and post images (see the module docstring)."""

        def __init__(self):
            super().__init__()
            self.encoder = m["Encoder"]()
            self.decoder = m["Decoder"](dim, num_classes)
            self.temporal_fuse_list = nn.ModuleList(m["fuse"](4 * dim, dim) for _ in range(4))

        def forward(self, x):
            n, _, h, w = x.shape
            # (N, 6, H, W) -> (2N, 3, H, W): pre and post of each window in turn
            levels = self.encoder.levels(x.reshape(n * 2, 3, h, w))
            fused = []
            for f, t in zip(self.temporal_fuse_list, levels):
                t = t.reshape(n, 2, *t.shape[1:])
                pre, post = t[:, 0], t[:, 1]
                fused.append(f(torch.cat([torch.abs(pre - post), pre * post, pre, post], dim=2)))
            return m["probabilities"](self.decoder(fused), h, w)

    return BitemporalDPT()
