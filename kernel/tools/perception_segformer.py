"""SegFormer (MiT-B0 encoder + all-MLP decoder) as the benchmark's 14-band perception models.

Not a registering module: ``perception_models`` builds it for the ``landslide_ms`` and
``reservoir`` checkpoints (``seg_landslide_ms.safetensors``, ``seg_reservoir.safetensors``).
torch is imported inside :func:`build_segformer`, so importing this module costs nothing.

The network (Xie et al., "SegFormer", NeurIPS 2021; the benchmark wraps NVlabs' code as
``WeTr(backbone="mit_b0", num_classes=2, in_channels=14)`` in
``dora/tools/segmentation/segformer/``), written here from those facts:

* encoder ``mit_b0``: four stages of widths 32, 64, 160, 256, two blocks each, 1/2/5/8 heads,
  MLP ratio 4, spatial-reduction ratios 8/4/2/1, q/kv biases. Stage ``i`` embeds its input with
  an overlapping conv (7×7 stride 4 padding 3 for stage 1, 3×3 stride 2 padding 1 after), a
  block is ``x + attn(norm1(x))`` then ``x + mlp(norm2(x))`` with ``mlp = fc2(GELU(dwconv3×3(
  fc1(x))))``, and each stage ends with a LayerNorm;
* **mixed LayerNorm epsilons** (they decide near-tie labels): the blocks' ``norm1``/``norm2`` and
  the stage norms ``norm1..4`` use 1e-6 (``mit_b0``'s ``norm_layer``), the patch embeddings'
  ``norm`` and the attention's spatial-reduction ``norm`` use torch's default 1e-5;
* decoder ``SegFormerHead`` (embedding 256): a linear per stage, the four maps upsampled
  bilinearly (``align_corners=False``) to stage 1's size, concatenated as [c4, c3, c2, c1],
  1×1 conv (no bias) + BatchNorm + ReLU, dropout (identity at inference), 1×1 conv to the
  classes; the logits upsampled bilinearly to the input size;
* ``classifier`` (a 1×1 conv 256 → classes, no bias): the training-time auxiliary head, unused at
  inference but a tensor of the checkpoint, so the strict load needs it.

Tensor names are the benchmark's own (``WeTr.state_dict()``), so the name map is the identity;
:data:`HF_NAME_MAP` relates them to transformers' ``SegformerForSemanticSegmentation`` for
reference (not used: transformers is not a dependency, and its stage norms use eps 1e-5 where the
benchmark's use 1e-6, which changes labels).
"""
from __future__ import annotations

__all__ = ["MIT_B0", "build_segformer", "HF_NAME_MAP"]

#: mit_b0 hyper-parameters (``mix_transformer.mit_b0``)
MIT_B0 = {"embed_dims": (32, 64, 160, 256), "num_heads": (1, 2, 5, 8), "mlp_ratio": 4,
          "depths": (2, 2, 2, 2), "sr_ratios": (8, 4, 2, 1), "decoder_dim": 256}

#: the benchmark's tensor-name patterns → transformers' Segformer names (i: stage 1-4, j: block)
HF_NAME_MAP = {
    "encoder.patch_embed{i}.proj": "segformer.encoder.patch_embeddings.{i-1}.proj",
    "encoder.patch_embed{i}.norm": "segformer.encoder.patch_embeddings.{i-1}.layer_norm",
    "encoder.block{i}.{j}.norm1": "segformer.encoder.block.{i-1}.{j}.layer_norm_1",
    "encoder.block{i}.{j}.attn.q": "segformer.encoder.block.{i-1}.{j}.attention.self.query",
    "encoder.block{i}.{j}.attn.kv": "…attention.self.key and …value (the kv rows split in halves)",
    "encoder.block{i}.{j}.attn.sr": "segformer.encoder.block.{i-1}.{j}.attention.self.sr",
    "encoder.block{i}.{j}.attn.norm": "segformer.encoder.block.{i-1}.{j}.attention.self.layer_norm",
    "encoder.block{i}.{j}.attn.proj": "segformer.encoder.block.{i-1}.{j}.attention.output.dense",
    "encoder.block{i}.{j}.norm2": "segformer.encoder.block.{i-1}.{j}.layer_norm_2",
    "encoder.block{i}.{j}.mlp.fc1": "segformer.encoder.block.{i-1}.{j}.mlp.dense1",
    "encoder.block{i}.{j}.mlp.dwconv.dwconv": "segformer.encoder.block.{i-1}.{j}.mlp.dwconv.dwconv",
    "encoder.block{i}.{j}.mlp.fc2": "segformer.encoder.block.{i-1}.{j}.mlp.dense2",
    "encoder.norm{i}": "segformer.encoder.layer_norm.{i-1}",
    "decoder.linear_c{i}.proj": "decode_head.linear_c.{i-1}.proj",
    "decoder.linear_fuse.0": "decode_head.linear_fuse",
    "decoder.linear_fuse.1": "decode_head.batch_norm",
    "decoder.linear_pred": "decode_head.classifier",
    "classifier": "(none: the benchmark's auxiliary CAM head)",
}


def build_segformer(in_channels: int = 14, num_classes: int = 2):
    """A fresh (uninitialised values) SegFormer mit_b0 ``torch.nn.Module`` whose
    ``state_dict()`` names and shapes are the benchmark's ``WeTr`` ones; ``forward`` maps
    (N, in_channels, H, W) float32 to (N, num_classes, H, W) raw logits."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    dims, heads, depths, srs = (MIT_B0["embed_dims"], MIT_B0["num_heads"], MIT_B0["depths"],
                                MIT_B0["sr_ratios"])
    ratio, emb = MIT_B0["mlp_ratio"], MIT_B0["decoder_dim"]

    class PatchEmbed(nn.Module):
        def __init__(self, cin, cout, k, s):
            super().__init__()
            self.proj = nn.Conv2d(cin, cout, k, stride=s, padding=k // 2)
            self.norm = nn.LayerNorm(cout)  # eps 1e-5 (torch default), as the benchmark's

        def forward(self, x):
            x = self.proj(x)
            h, w = x.shape[2:]
            return self.norm(x.flatten(2).transpose(1, 2)), h, w

    class DWConv(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.dwconv = nn.Conv2d(d, d, 3, 1, 1, groups=d)

        def forward(self, x, h, w):
            b, n, c = x.shape
            return self.dwconv(x.transpose(1, 2).reshape(b, c, h, w)).flatten(2).transpose(1, 2)

    class Mlp(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc1 = nn.Linear(d, d * ratio)
            self.dwconv = DWConv(d * ratio)
            self.fc2 = nn.Linear(d * ratio, d)

        def forward(self, x, h, w):
            return self.fc2(F.gelu(self.dwconv(self.fc1(x), h, w)))

    class Attention(nn.Module):
        def __init__(self, d, n_heads, sr):
            super().__init__()
            self.n_heads, self.sr_ratio, self.scale = n_heads, sr, (d // n_heads) ** -0.5
            self.q = nn.Linear(d, d)
            self.kv = nn.Linear(d, 2 * d)
            self.proj = nn.Linear(d, d)
            if sr > 1:
                self.sr = nn.Conv2d(d, d, sr, stride=sr)
                self.norm = nn.LayerNorm(d)  # eps 1e-5, as the benchmark's

        def forward(self, x, h, w):
            b, n, c = x.shape
            hd = c // self.n_heads
            q = self.q(x).reshape(b, n, self.n_heads, hd).permute(0, 2, 1, 3)
            src = x
            if self.sr_ratio > 1:
                src = self.sr(x.transpose(1, 2).reshape(b, c, h, w)).reshape(b, c, -1).transpose(1, 2)
                src = self.norm(src)
            kv = self.kv(src).reshape(b, -1, 2, self.n_heads, hd).permute(2, 0, 3, 1, 4)
            attn = ((q @ kv[0].transpose(-2, -1)) * self.scale).softmax(dim=-1)
            return self.proj((attn @ kv[1]).transpose(1, 2).reshape(b, n, c))

    class Block(nn.Module):
        def __init__(self, d, n_heads, sr):
            super().__init__()
            self.norm1 = nn.LayerNorm(d, eps=1e-6)
            self.attn = Attention(d, n_heads, sr)
            self.norm2 = nn.LayerNorm(d, eps=1e-6)
            self.mlp = Mlp(d)

        def forward(self, x, h, w):
            x = x + self.attn(self.norm1(x), h, w)
            return x + self.mlp(self.norm2(x), h, w)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            cins = (in_channels,) + tuple(dims[:-1])
            for i in range(4):
                k, s = (7, 4) if i == 0 else (3, 2)
                setattr(self, f"patch_embed{i + 1}", PatchEmbed(cins[i], dims[i], k, s))
                setattr(self, f"block{i + 1}", nn.ModuleList(
                    Block(dims[i], heads[i], srs[i]) for _ in range(depths[i])))
                setattr(self, f"norm{i + 1}", nn.LayerNorm(dims[i], eps=1e-6))

        def forward(self, x):
            outs = []
            for i in range(1, 5):
                x, h, w = getattr(self, f"patch_embed{i}")(x)
                for blk in getattr(self, f"block{i}"):
                    x = blk(x, h, w)
                x = getattr(self, f"norm{i}")(x)
                x = x.reshape(x.shape[0], h, w, -1).permute(0, 3, 1, 2).contiguous()
                outs.append(x)
            return outs

    class LinearEmbed(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.proj = nn.Linear(cin, emb)

        def forward(self, x):
            n, _, h, w = x.shape
            return self.proj(x.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(n, -1, h, w)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            for i in range(4):
                setattr(self, f"linear_c{i + 1}", LinearEmbed(dims[i]))
            self.linear_fuse = nn.Sequential(nn.Conv2d(4 * emb, emb, 1, bias=False),
                                             nn.BatchNorm2d(emb), nn.ReLU())
            self.linear_pred = nn.Conv2d(emb, num_classes, 1)

        def forward(self, feats):
            size = feats[0].shape[2:]
            maps = []
            for i in (4, 3, 2, 1):
                m = getattr(self, f"linear_c{i}")(feats[i - 1])
                if i > 1:
                    m = F.interpolate(m, size=size, mode="bilinear", align_corners=False)
                maps.append(m)
            return self.linear_pred(self.linear_fuse(torch.cat(maps, dim=1)))

    class SegFormer(nn.Module):
        """SegFormer mit_b0 with the benchmark's tensor names (see the module docstring)."""

        def __init__(self):
            super().__init__()
            self.encoder = Encoder()
            self.decoder = Decoder()
            self.classifier = nn.Conv2d(dims[-1], num_classes, 1, bias=False)  # unused

        def forward(self, x):
            out = self.decoder(self.encoder(x))
            return F.interpolate(out, size=x.shape[2:], mode="bilinear", align_corners=False)

    return SegFormer()
