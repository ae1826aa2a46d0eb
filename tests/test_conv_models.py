"""Whole convolutional models through export, the graph runtime and its replay, at tiny sizes on the test device:
a ResNet-50-style bottleneck stack (batch norms, strided 3x3 and 1x1 projections, max and average pooling),
a Stable Diffusion UNet's two levels down and up (ResNet blocks with group norm, SiLU and the time
embedding, self- and cross-attention transformer blocks, nearest upsampling, skip connections) and a VAE
decoder block, the models of benchmarks/gpu_conv_models.py (their modules: benchmarks/conv_models.py), in
row-major and channels-last layouts. The row-major runs are strict about their memory plan: an op
allocating past its cost rule's workspace fails them.

Graphs load on ``TEST_DEVICE`` (``_load``) and torch's inputs reach them there with their strides
(``_as_nbx``); every tuned launch takes its first candidate (``first_candidate``), as under the interpreter,
so that a GPU does not compile and time every candidate of each key.

Tolerance: atol and rtol 1e-4 in float32 against torch's float32 run, as tests/test_zoo_vision.py's: the
deepest float32 sum is a 3x3 convolution over 32 channels (288 products) or an attention row of 64
pixels, each within a few float32 ulps (1e-7) per term of an activation of unit size (norms keep them
there), so differences stay near 1e-6; a wrong op is off by far more."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor import graph  # noqa: E402
from nbxtensor.export import export  # noqa: E402
from nbxtensor.graph import arena  # noqa: E402

from .conftest import TEST_DEVICE, run_in_census, to_nbx  # noqa: E402

pytestmark = pytest.mark.usefixtures("first_candidate")
TOLERANCE = 1e-4

_spec = importlib.util.spec_from_file_location("conv_models",
                                               Path(__file__).parents[1] / "benchmarks" / "conv_models.py")
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)


def _seeded(make):
    torch.manual_seed(0)
    with torch.no_grad():
        return make().eval()


def tiny_resnet():
    return models.randomize_batch_norms(models.ResNet(widths=(8, 4, 8), depths=(2, 1, 1), num_classes=10))


def tiny_unet():
    return models.UNetDownUp(channels=(8, 16), latent=4, heads=2, context_dim=12, groups=4)


def tiny_vae():
    return models.VAEDecoderBlock(channels=16, latent=4, groups=4)


MODELS = {
    "resnet": (lambda: models.Features(tiny_resnet()), lambda: (torch.randn(2, 3, 32, 32),)),
    "resnet_classifier": (tiny_resnet, lambda: (torch.randn(1, 3, 32, 32),)),
    "unet": (tiny_unet, lambda: (torch.randn(2, 4, 8, 8), torch.randn(2, 8), torch.randn(2, 5, 12))),
    "vae_decoder": (tiny_vae, lambda: (torch.randn(1, 4, 8, 8),)),
}


def _as_nbx(t):
    """``t`` (a CPU torch tensor) as a tensor on the test device with its values and its strides."""
    return nbx.from_dlpack(t).to(TEST_DEVICE)


def _load(directory, **options):
    """The exported graph in ``directory``, loaded onto the test device."""
    return graph.load(directory, device=TEST_DEVICE, **options)


def _channels_last(t):
    return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t


def _expect_like(got, want):
    """``got`` (ours) has ``want``'s (torch's) values, and its memory format: channels-last where torch's is."""
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=TOLERANCE, atol=TOLERANCE)
    if want.dim() == 4:
        assert got.is_contiguous(memory_format=nbx.channels_last) == want.is_contiguous(
            memory_format=torch.channels_last), f"ours {got.stride()}, torch's {tuple(want.stride())}"


def _exported(module, inputs, tmp_path):
    return _load(export(module, inputs, tmp_path))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_runs_and_replays_as_torch(name, tmp_path, monkeypatch):
    """The normal path (its launch keys those the census names) and the replay (captured, then verified
    against the normal path, then replayed on new inputs) both give torch's output, every allocation
    inside the memory plan. The UNet's layer norms read tokens transposed out of its feature maps (a view,
    as in diffusers) and copy them row by row first, as torch's do: a copy that a layout asks for, which
    cost rules (of shapes alone) do not plan."""
    monkeypatch.setattr(arena, "strict", name != "unet")
    make, make_inputs = MODELS[name]
    module, inputs = _seeded(make), make_inputs()
    model = _exported(module, inputs, tmp_path)
    if name.startswith("resnet"):  # every batch norm in its convolution's epilogue, and the ReLUs right after
        assert model.fusions["convolution_batch_norm"] == 16
        assert model.fusions["convolution_batch_norm_activation"] == 9
    with torch.no_grad():
        _expect_like(run_in_census(model, [t.numpy() for t in inputs]), module(*inputs))
        ours = [_as_nbx(t) for t in inputs]
        model.replay(*ours)
        model.replay(*ours)
        assert model._replayer.reason(*ours) is None
        fresh = make_inputs()
        _expect_like(model.replay(*[_as_nbx(t) for t in fresh]), module(*fresh))
    assert all("layer_norm" in step for step, _ in model.last_run.unplanned), model.last_run.unplanned


@pytest.mark.parametrize("model_channels_last, input_channels_last", [(True, True), (True, False), (False, True)])
def test_a_channels_last_resnet_keeps_torchs_memory_format(model_channels_last, input_channels_last, tmp_path):
    """A convolution's output is channels-last where its input or its weight is (torch's rule); a model
    converted with ``.to(memory_format=torch.channels_last)`` keeps its weights so through export, and its
    batch norms, activations, residual adds and pooling keep the layout they are given. The census lays
    the steps out alike (a row-major input: the census takes inputs row-major), naming the run's keys."""
    module = _seeded(lambda: models.Features(tiny_resnet()))
    if model_channels_last:
        module = module.to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 32, 32)
    if input_channels_last:
        x = _channels_last(x)
    model = _exported(module, (x,), tmp_path)
    with torch.no_grad():
        want = module(x)
        assert want.is_contiguous(memory_format=torch.channels_last)
        _expect_like(model(_as_nbx(x)) if input_channels_last else run_in_census(model, [x.numpy()]), want)
        model.replay(_as_nbx(x))
        _expect_like(model.replay(_as_nbx(x)), want)


def test_a_channels_last_depthwise_convolution_has_a_key_the_census_names(tmp_path):
    """A channels-last model's depthwise convolution (MobileNet's, ConvNeXt's) forms a key of its own
    (``depthwise_conv``: the channels-inner kernel's candidates), which the census names as the run forms it."""
    from nbxtensor import census
    from nbxtensor.device import backend_for
    module = _seeded(lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1),
                                                 torch.nn.Conv2d(32, 32, 3, padding=1, groups=32)))
    module = module.to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 6, 7)
    model = _exported(module, (x,), tmp_path)
    with torch.no_grad():
        _expect_like(run_in_census(model, [x.numpy()]), module(x))
    named = census.census(model, model.bind([tuple(x.shape)]), backend_for(nbx.device(TEST_DEVICE)).facts)
    assert sorted(key.split("|")[0] for key in named) == ["conv", "depthwise_conv"]


@pytest.mark.parametrize("facts_name", ["cpu", "hopper"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_folding_the_batch_norms_adds_no_launch_key(facts_name, channels_last, tmp_path):
    """A convolution with its batch norm and activation in the epilogue tunes under the convolution's keys:
    the fused ResNet's census is the unfused one's, step for step, on the CPU's facts and on a GPU class's
    (whose facts starve small outputs and move 1x1 convolutions off the product), so its first call tunes
    no key the unfused graph's does not."""
    from nbxtensor import census
    from nbxtensor.device import facts
    module = _seeded(lambda: models.Features(tiny_resnet()))
    x = torch.randn(2, 3, 32, 32)
    if channels_last:
        module, x = module.to(memory_format=torch.channels_last), _channels_last(x)
    directory = export(module, (x,), tmp_path)
    fused, unfused = _load(directory, weights=False), _load(directory, fuse=False, weights=False)
    assert fused.fusions["convolution_batch_norm"] == 16 and not unfused.fusions
    values = fused.bind([tuple(x.shape)])
    named = census.census(fused, values, facts.load(facts_name))
    assert named and named == census.census(unfused, values, facts.load(facts_name))


@pytest.mark.parametrize("name", ["unet", "vae_decoder"])
def test_channels_last_diffusion_blocks_run_as_torch(name, tmp_path):
    """The UNet and the VAE block converted to channels-last, on channels-last latents: torch's values,
    and its output's memory format (our group norms return row-major results where torch's CPU ones are
    channels-last: the convolutions' channels-last weights decide the output's format either way)."""
    make, make_inputs = MODELS[name]
    module = _seeded(make).to(memory_format=torch.channels_last)
    inputs = tuple(_channels_last(t) for t in make_inputs())
    model = _exported(module, inputs, tmp_path)
    with torch.no_grad():
        _expect_like(model(*[_as_nbx(t) for t in inputs]), module(*inputs))


def test_batch_norm_keeps_a_channels_last_input_channels_last(rng):
    """Inference batch norm reads a channels-last input in place and returns it channels-last (ATen's
    suggested format of its input), channel by channel as a row-major one (one float32 rounding of a
    per-channel affine map: 1e-6)."""
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    mean, var = rng.standard_normal(3), rng.random(3) + 0.5
    weight, bias = rng.standard_normal(3), rng.standard_normal(3)
    want = ((x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * weight[:, None, None]
            + bias[:, None, None])
    params = [to_nbx(p.astype(np.float32)) for p in (mean, var, weight, bias)]
    for layout in ("channels_last", "contiguous_format"):
        out = nbx.nn.functional.batch_norm(to_nbx(x).contiguous(memory_format=layout), *params)
        assert out.is_contiguous(memory_format=layout)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_a_weights_memory_format_is_checked_at_load(tmp_path):
    """A graph file's weight may be marked channels-last (the exporter marks a channels-last module's); a
    format of another rank, an unknown one, or one on a tensor not read from the weights is refused."""
    import json
    module = torch.nn.Conv2d(2, 3, 3).to(memory_format=torch.channels_last)
    export(module, (torch.randn(1, 2, 5, 5),), tmp_path)
    path = tmp_path / "graph.json"
    document = json.loads(path.read_text())
    assert document["tensors"]["param::weight"]["memory_format"] == "channels_last"
    assert "memory_format" not in document["tensors"]["param::bias"]
    assert _load(tmp_path).weights["param::weight"].is_contiguous(memory_format=nbx.channels_last)
    for tensor_id, value, message in [("param::weight", "channels_last_3d", "rank-4 weight"),
                                      ("param::weight", "sideways", "'sideways'"),
                                      ("input::input", "channels_last", "only a tensor read from the weights")]:
        changed = json.loads(json.dumps(document))
        changed["tensors"][tensor_id]["memory_format"] = value
        path.write_text(json.dumps(changed))
        with pytest.raises(graph.GraphError, match=message):
            _load(tmp_path)


class NormAndPool(torch.nn.Module):
    """A group norm and a max pool as torch.export writes them (native_group_norm, max_pool2d_with_indices:
    statistics and indices for training); ``indices`` returns the pool's indices too."""

    def __init__(self, indices=False):
        super().__init__()
        self.norm, self.indices = torch.nn.GroupNorm(2, 4), indices

    def forward(self, x):
        return torch.nn.functional.max_pool2d(self.norm(x), 3, 2, 1, return_indices=self.indices)


def test_outputs_nothing_reads_are_made_inside_the_plan(tmp_path, monkeypatch):
    """An op's outputs that the graph leaves unread (the statistics and indices above, as exported) are
    still made by the op: its step's workspace holds them, so a strict run passes."""
    monkeypatch.setattr(arena, "strict", True)
    x = torch.randn(2, 4, 6, 6)
    model = _load(export(_seeded(NormAndPool), (x,), tmp_path), fuse=False)
    assert [s.aten for s in model.steps] == ["aten::native_group_norm.default",
                                             "aten::max_pool2d_with_indices.default"]
    with torch.no_grad():
        _expect_like(model(x.numpy()), _seeded(NormAndPool)(x))
    assert not model.last_run.unplanned


def test_training_outputs_nothing_reads_are_not_computed(tmp_path):
    """Loading rewrites native_group_norm and max_pool2d_with_indices whose statistics or indices nothing
    reads into group_norm and max_pool2d (no statistics pass, no indices written); where the indices are
    read, the step stays."""
    x = torch.randn(2, 4, 6, 6)
    model = _exported(_seeded(NormAndPool), (x,), tmp_path / "values")
    assert model.fusions == {"group_norm": 1, "max_pool": 1}
    assert [s.aten for s in model.steps] == ["aten::group_norm.default", "aten::max_pool2d.default"]
    with torch.no_grad():
        _expect_like(model(x.numpy()), _seeded(NormAndPool)(x))
    module = _seeded(lambda: NormAndPool(indices=True))
    model = _exported(module, (x,), tmp_path / "indices")
    assert model.fusions == {"group_norm": 1}
    values, indices = model(x.numpy())
    with torch.no_grad():
        want_values, want_indices = module(x)
    _expect_like(values, want_values)
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())


def test_a_channels_last_1x1_convolution_keeps_its_layout(tmp_path):
    """A 1x1 convolution's weight is contiguous in both formats, yet torch's channels-last strides for it
    make the output channels-last from a row-major input: the export marks it, the loader lays it out so."""
    module = _seeded(lambda: torch.nn.Conv2d(4, 6, 1)).to(memory_format=torch.channels_last)
    x = torch.randn(2, 4, 3, 3)
    model = _exported(module, (x,), tmp_path)
    assert model.tensors["param::weight"]["memory_format"] == "channels_last"
    with torch.no_grad():
        _expect_like(model(_as_nbx(x)), module(x))


def _attention_reference(q, k, v, mask=None, causal=False):
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / np.sqrt(q.shape[-1])
    if causal:
        mask = np.tril(np.ones(scores.shape[-2:], bool))
    if mask is not None and mask.dtype == bool:
        scores = np.where(mask, scores, -np.inf)
    elif mask is not None:
        scores = scores + mask
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v.astype(np.float64)


@pytest.mark.parametrize("query_dim, value_dim, mask", [(300, 300, None), (264, 8, "causal"), (8, 300, "bool"),
                                                        (320, 320, "float")])
def test_attention_with_heads_wider_than_the_kernels(query_dim, value_dim, mask, rng):
    """Head dims past the attention kernels' 256 (the SD VAE's single 512-wide head) take the product form:
    the scores materialised, softmax in float32 (float32 throughout here: sums of at most 320 products,
    1e-5)."""
    q = rng.standard_normal((2, 1, 5, query_dim)).astype(np.float32)
    k = rng.standard_normal((2, 1, 7, query_dim)).astype(np.float32)
    v = rng.standard_normal((2, 1, 7, value_dim)).astype(np.float32)
    given = {"bool": rng.random((5, 7)) > 0.3, "float": rng.standard_normal((5, 7)).astype(np.float32)}.get(mask)
    if mask == "bool":
        given[:, 0] = True  # a row with nothing to attend is NaN in both
    got = nbx.nn.functional.scaled_dot_product_attention(to_nbx(q), to_nbx(k), to_nbx(v),
                                                         None if given is None else to_nbx(given),
                                                         is_causal=mask == "causal")
    np.testing.assert_allclose(got.numpy(), _attention_reference(q, k, v, given, mask == "causal"),
                               rtol=1e-5, atol=1e-5)


def test_a_wide_single_head_attention_runs_in_a_graph(tmp_path, monkeypatch):
    """The VAE's pixel attention at more than 256 channels: exported, its launch keys those the census
    names, inside its memory plan, replayed."""
    monkeypatch.setattr(arena, "strict", True)
    module = _seeded(lambda: models.PixelAttention(264, groups=4))
    x = torch.randn(1, 264, 3, 3)
    model = _exported(module, (x,), tmp_path)
    with torch.no_grad():
        want = module(x)
        _expect_like(run_in_census(model, [x.numpy()]), want)
        model.replay(_as_nbx(x))
        _expect_like(model.replay(_as_nbx(x)), want)
    assert model._replayer.reason(_as_nbx(x)) is None
