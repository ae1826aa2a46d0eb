"""A model zoo of the convolutional families: tiny configs of transformers' vision and audio models, a
diffusion UNet block and a VAE decoder block written here, and torchvision's resnet and mobilenet where
torchvision installs; each exported with a dynamic batch, loaded by nbxtensor.graph, run for two batch sizes
and compared with torch in float32 on the CPU (random weights seeded).

Tolerance: atol and rtol 1e-4, as tests/test_zoo.py's and for the same reasons: 2 layers, hidden sizes 8 to
32, the deepest float32 sum a convolution over at most 16 * 3 * 3 (or a 400-sample wav2vec2 window of 10
taps) terms, norms keeping activations near unit size; the differences seen are about 1e-6, a wrong op is
off by far more."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import torch.nn as nn  # noqa: E402

from nbxtensor import graph  # noqa: E402
from nbxtensor.export import export  # noqa: E402

from .conftest import cpu_kernels, matches_module  # noqa: E402

pytestmark = cpu_kernels
TOLERANCE = 1e-4
BATCHES = (2, 3)
T = transformers


def _image(size=32):
    return lambda batch: torch.randn(batch, 3, size, size)


VISION_AND_AUDIO = {
    "resnet": (lambda: T.ResNetModel(T.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16],
                                                    depths=[1, 1], layer_type="basic")),
               _image(16), "pooler_output"),
    "resnet_bottleneck": (lambda: T.ResNetModel(T.ResNetConfig(num_channels=3, embedding_size=8,
                                                               hidden_sizes=[16, 32], depths=[1, 1],
                                                               layer_type="bottleneck", downsample_in_first_stage=True)),
                          _image(16), "last_hidden_state"),
    # its 7x7 depthwise convolutions are the slowest kernels the interpreter runs: few channels, 16x16
    "convnext": (lambda: T.ConvNextModel(T.ConvNextConfig(num_channels=3, hidden_sizes=[4, 8], depths=[1, 1],
                                                          num_stages=2, patch_size=4)),
                 _image(16), "last_hidden_state"),
    "vit": (lambda: T.ViTModel(T.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                           intermediate_size=64, image_size=32, patch_size=8)),
            _image(), "last_hidden_state"),
    "clip_vision": (lambda: T.CLIPVisionModel(T.CLIPVisionConfig(hidden_size=32, num_hidden_layers=2,
                                                                 num_attention_heads=4, intermediate_size=64,
                                                                 image_size=32, patch_size=8)),
                    _image(), "last_hidden_state"),
    # the encoder takes 2 * max_source_positions frames of num_mel_bins
    "whisper_encoder": (lambda: T.WhisperModel(T.WhisperConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=16, vocab_size=100,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)).get_encoder(),
        lambda batch: torch.randn(batch, 16, 32), "last_hidden_state"),
    "wav2vec2": (lambda: T.Wav2Vec2Model(T.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
        lambda batch: torch.randn(batch, 400), "last_hidden_state"),
}


class Field(nn.Module):
    """One field of a transformers model's output."""

    def __init__(self, model, field):
        super().__init__()
        self.model, self.field = model, field

    def forward(self, x):
        return getattr(self.model(x), self.field)


class ResnetBlock(nn.Module):
    """A diffusion ResNet block: group norm, SiLU and 3x3 convolutions, a 1x1 shortcut where channels change."""

    def __init__(self, cin, cout, groups=4):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(groups, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(groups, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, shift=None):
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        if shift is not None:
            h = h + shift[:, :, None, None]
        h = self.conv2(nn.functional.silu(self.norm2(h)))
        return self.shortcut(x) + h


class SpatialAttention(nn.Module):
    """Single-head self-attention over the pixels, after a group norm, added back (as the SD VAE's mid block)."""

    def __init__(self, channels, groups=4):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        self.qkv, self.out = nn.Linear(channels, 3 * channels), nn.Linear(channels, channels)

    def forward(self, x):
        b, c, h, w = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)
        q, k, v = self.qkv(tokens).chunk(3, dim=-1)
        attended = nn.functional.scaled_dot_product_attention(q, k, v)
        return x + self.out(attended).transpose(1, 2).reshape(b, c, h, w)


class UNetUpBlock(nn.Module):
    """A UNet up block: a time-conditioned ResNet block, attention, nearest 2x upsampling and a convolution."""

    def __init__(self):
        super().__init__()
        self.time = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 16))
        self.resnet = ResnetBlock(8, 16)
        self.attention = SpatialAttention(16)
        self.up = nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x, t):
        h = self.attention(self.resnet(x, self.time(t)))
        return self.up(nn.functional.interpolate(h, scale_factor=2.0, mode="nearest"))


class VAEDecoderBlock(nn.Module):
    """A VAE decoder: latents in, a mid ResNet block and attention, one upsampling stage, RGB out."""

    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(4, 16, 3, padding=1)
        self.mid = nn.ModuleList([ResnetBlock(16, 16), SpatialAttention(16), ResnetBlock(16, 16)])
        self.up = nn.ModuleList([ResnetBlock(16, 8), nn.Upsample(scale_factor=2, mode="nearest"),
                                 nn.Conv2d(8, 8, 3, padding=1)])
        self.norm_out, self.conv_out = nn.GroupNorm(4, 8), nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, z):
        h = self.conv_in(z)
        for layer in (*self.mid, *self.up):
            h = layer(h)
        return self.conv_out(nn.functional.silu(self.norm_out(h)))


def _seeded(make):
    torch.manual_seed(0)
    return make().eval()


def _check(module, make_inputs, tmp_path):
    batch = torch.export.Dim("batch", min=1, max=8)
    example = make_inputs(BATCHES[0])
    export(module, example, tmp_path, dynamic_shapes=tuple({0: batch} for _ in example))
    model = graph.load(tmp_path)
    for size in BATCHES:
        matches_module(model, module, make_inputs(size), TOLERANCE)


@pytest.mark.parametrize("name", sorted(VISION_AND_AUDIO))
def test_vision_and_audio_architecture(name, tmp_path):
    make, make_input, field = VISION_AND_AUDIO[name]
    module = Field(_seeded(make), field).eval()
    _check(module, lambda batch: (make_input(batch),), tmp_path)


def test_diffusion_unet_block(tmp_path):
    _check(_seeded(UNetUpBlock), lambda batch: (torch.randn(batch, 8, 8, 8), torch.randn(batch, 8)), tmp_path)


def test_vae_decoder_block(tmp_path):
    _check(_seeded(VAEDecoderBlock), lambda batch: (torch.randn(batch, 4, 8, 8),), tmp_path)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "mobilenet_v3_small"])
def test_torchvision(name, tmp_path):
    models = pytest.importorskip("torchvision.models")
    # the smallest width torchvision builds; 32x32 images keep every stage's spatial size at least 1
    kwargs = dict(num_classes=10) if name == "resnet18" else dict(num_classes=10, width_mult=0.25)
    module = _seeded(lambda: getattr(models, name)(**kwargs))
    _check(module, lambda batch: (torch.randn(batch, 3, 32, 32),), tmp_path)
