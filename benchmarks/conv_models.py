"""Convolutional models written with plain torch modules, sized by their arguments: full size for
benchmarks/gpu_conv_models.py, tiny for tests/test_conv_models.py (which loads this file by path).
- ``ResNet``: torchvision's ResNet-50 design (7x7 stem, max pool, bottleneck stages with a strided 3x3 and
  a 1x1 projection shortcut, average pool, classifier), where torchvision is not installed;
- ``UNetDownUp``: a Stable Diffusion UNet's first two levels, down and back up: ResNet blocks (group
  norm, SiLU, 3x3 convolutions, the time embedding added), transformer blocks (self-attention,
  cross-attention over a text context, GEGLU feed-forward), a strided 3x3 downsample, nearest upsampling,
  skip connections concatenated;
- ``VAEDecoderBlock``: the Stable Diffusion VAE decoder's start: latents in, the mid block (ResNet blocks
  around single-head attention over the pixels), the first up block (three ResNet blocks, nearest 2x
  upsampling and a 3x3 convolution)."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    """ResNet-50 at ``ResNet()``; ``widths`` and ``depths`` per stage, the stem ``widths[0]`` wide."""

    def __init__(self, widths=(64, 128, 256, 512), depths=(3, 4, 6, 3), num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], widths[0]
        for stage, (width, depth) in enumerate(zip(widths, depths)):
            for index in range(depth):
                blocks.append(Bottleneck(cin, width, 2 if stage and not index else 1))
                cin = width * Bottleneck.expansion
        self.stages = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def features(self, x):
        return self.stages(self.stem(x))

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class Features(nn.Module):
    """A ResNet's last feature map: an output whose memory format the convolutions decide."""

    def __init__(self, resnet):
        super().__init__()
        self.resnet = resnet

    def forward(self, x):
        return self.resnet.features(x)


def randomize_batch_norms(module, seed=0):
    """Running statistics and affine parameters away from their identity defaults, so that a batch norm
    computed wrong shows (fresh ones are an identity up to eps)."""
    generator = torch.Generator().manual_seed(seed)
    for norm in module.modules():
        if isinstance(norm, nn.BatchNorm2d):
            c = norm.num_features
            norm.running_mean.copy_(torch.randn(c, generator=generator) * 0.1)
            norm.running_var.copy_(torch.rand(c, generator=generator) + 0.5)
            norm.weight.data.copy_(torch.randn(c, generator=generator) * 0.1 + 1)
            norm.bias.data.copy_(torch.randn(c, generator=generator) * 0.1)
    return module


class ResnetBlock(nn.Module):
    """Group norm, SiLU and 3x3 convolutions; the time embedding (if any) projected and added between
    them; a 1x1 shortcut where the channels change."""

    def __init__(self, cin, cout, temb_channels=None, groups=32, eps=1e-5):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(groups, cin, eps), nn.Conv2d(cin, cout, 3, padding=1)
        self.time = nn.Linear(temb_channels, cout) if temb_channels else None
        self.norm2, self.conv2 = nn.GroupNorm(groups, cout, eps), nn.Conv2d(cout, cout, 3, padding=1)
        self.shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, temb=None):
        h = self.conv1(F.silu(self.norm1(x)))
        if self.time is not None:
            h = h + self.time(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return (x if self.shortcut is None else self.shortcut(x)) + h


class Attention(nn.Module):
    def __init__(self, dim, heads, context_dim=None):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim or dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim or dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, context=None):
        context = x if context is None else context
        b, n, d = x.shape

        def split(t):
            return t.reshape(b, -1, self.heads, d // self.heads).transpose(1, 2)
        attended = F.scaled_dot_product_attention(split(self.to_q(x)), split(self.to_k(context)),
                                                  split(self.to_v(context)))
        return self.to_out(attended.transpose(1, 2).reshape(b, n, d))


class GEGLU(nn.Module):
    def __init__(self, dim, inner):
        super().__init__()
        self.proj, self.out = nn.Linear(dim, 2 * inner), nn.Linear(inner, dim)

    def forward(self, x):
        h, gate = self.proj(x).chunk(2, dim=-1)
        return self.out(h * F.gelu(gate))


class Transformer2D(nn.Module):
    """Stable Diffusion's spatial transformer: group norm, a 1x1 projection to tokens, self-attention,
    cross-attention over ``context`` and a GEGLU feed-forward (each after a layer norm, added back), a 1x1
    projection back and the residual."""

    def __init__(self, channels, heads, context_dim, groups=32):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.proj_in, self.proj_out = nn.Conv2d(channels, channels, 1), nn.Conv2d(channels, channels, 1)
        self.norm1, self.attn1 = nn.LayerNorm(channels), Attention(channels, heads)
        self.norm2, self.attn2 = nn.LayerNorm(channels), Attention(channels, heads, context_dim)
        self.norm3, self.ff = nn.LayerNorm(channels), GEGLU(channels, 4 * channels)

    def forward(self, x, context):
        b, c, h, w = x.shape
        # pixels to tokens and back as diffusers writes it: a copy each way in NCHW, a view into tokens
        # where the projection's output is channels-last
        tokens = self.proj_in(self.norm(x)).permute(0, 2, 3, 1).reshape(b, h * w, c)
        tokens = tokens + self.attn1(self.norm1(tokens))
        tokens = tokens + self.attn2(self.norm2(tokens), context)
        tokens = tokens + self.ff(self.norm3(tokens))
        return x + self.proj_out(tokens.reshape(b, h, w, c).permute(0, 3, 1, 2).contiguous())


class UNetDownUp(nn.Module):
    """Latents (B, latent, H, W), a timestep's sinusoidal features (B, channels[0]) and a text context
    (B, tokens, context_dim) in; at full size Stable Diffusion 1.x's first two levels (320 and 640
    channels, 64x64 latents, 8 heads, a 768-wide context), joined by a ResNet block at the lower level."""

    def __init__(self, channels=(320, 640), latent=4, heads=8, context_dim=768, groups=32):
        super().__init__()
        c0, c1 = channels
        temb = 4 * c0
        self.time = nn.Sequential(nn.Linear(c0, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(latent, c0, 3, padding=1)
        self.down0 = ResnetBlock(c0, c0, temb, groups)
        self.attn_down0 = Transformer2D(c0, heads, context_dim, groups)
        self.downsample = nn.Conv2d(c0, c0, 3, stride=2, padding=1)
        self.down1 = ResnetBlock(c0, c1, temb, groups)
        self.attn_down1 = Transformer2D(c1, heads, context_dim, groups)
        self.mid = ResnetBlock(c1, c1, temb, groups)
        self.up1 = ResnetBlock(2 * c1, c1, temb, groups)
        self.attn_up1 = Transformer2D(c1, heads, context_dim, groups)
        self.upsample = nn.Conv2d(c1, c1, 3, padding=1)
        self.up0 = ResnetBlock(c1 + c0, c0, temb, groups)
        self.attn_up0 = Transformer2D(c0, heads, context_dim, groups)
        self.norm_out, self.conv_out = nn.GroupNorm(groups, c0), nn.Conv2d(c0, latent, 3, padding=1)

    def forward(self, latents, timestep_features, context):
        temb = self.time(timestep_features)
        h = self.conv_in(latents)
        skip0 = self.attn_down0(self.down0(h, temb), context)
        skip1 = self.attn_down1(self.down1(self.downsample(skip0), temb), context)
        h = self.attn_up1(self.up1(torch.cat([self.mid(skip1, temb), skip1], dim=1), temb), context)
        h = self.upsample(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = self.attn_up0(self.up0(torch.cat([h, skip0], dim=1), temb), context)
        return self.conv_out(F.silu(self.norm_out(h)))


class PixelAttention(nn.Module):
    """The VAE's single-head self-attention over the pixels, after a group norm, added back."""

    def __init__(self, channels, groups=32):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.to_q, self.to_k = nn.Linear(channels, channels), nn.Linear(channels, channels)
        self.to_v, self.to_out = nn.Linear(channels, channels), nn.Linear(channels, channels)

    def forward(self, x):
        b, c, h, w = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)
        attended = F.scaled_dot_product_attention(self.to_q(tokens)[:, None], self.to_k(tokens)[:, None],
                                                  self.to_v(tokens)[:, None])[:, 0]
        return x + self.to_out(attended).transpose(1, 2).reshape(b, c, h, w)


class VAEDecoderBlock(nn.Module):
    """Latents (B, latent, H, W) in, (B, channels, 2H, 2W) out; at full size the SD VAE's 512 channels."""

    def __init__(self, channels=512, latent=4, groups=32):
        super().__init__()
        self.conv_in = nn.Conv2d(latent, channels, 3, padding=1)
        self.mid = nn.ModuleList([ResnetBlock(channels, channels, None, groups, 1e-6), PixelAttention(channels, groups),
                                  ResnetBlock(channels, channels, None, groups, 1e-6)])
        self.up = nn.ModuleList([ResnetBlock(channels, channels, None, groups, 1e-6) for _ in range(3)])
        self.upsample = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, latents):
        h = self.conv_in(latents)
        for layer in (*self.mid, *self.up):
            h = layer(h)
        return self.upsample(F.interpolate(h, scale_factor=2.0, mode="nearest"))
