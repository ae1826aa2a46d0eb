"""Export with torch, run with nbxtensor, compare with torch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nbxtensor import graph  # noqa: E402
from nbxtensor.export import ExportError, export  # noqa: E402
from nbxtensor.graph import GraphError  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402

from .conftest import cpu_kernels  # noqa: E402

pytestmark = cpu_kernels
torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.down(F.gelu(torch.relu(self.up(x))))


class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(x)


class EmbeddingSum(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(10, 8)

    def forward(self, ids):
        return self.table(ids).sum(1)


class Block(nn.Module):
    def __init__(self, sdpa=False):
        super().__init__()
        self.query, self.sdpa = nn.Linear(8, 8), sdpa

    def forward(self, x):
        if self.sdpa:
            return F.scaled_dot_product_attention(self.query(x), x, x)
        weights = torch.softmax(self.query(x) @ x.transpose(-1, -2) / 8 ** 0.5, dim=-1)
        values, indices = torch.max(weights @ x, dim=-1)
        return values, indices


def _roundtrip(module, example, tmp_path, dynamic=None, runs=()):
    module = module.eval()
    model = graph.load(export(module, example, tmp_path / "model", dynamic_shapes=dynamic))
    for inputs in [example, *runs]:
        got = model(*[t.numpy() for t in inputs])
        want = module(*inputs)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-4, atol=1e-5)
    return model


def test_mlp_with_dynamic_batch(tmp_path):
    batch = torch.export.Dim("batch", min=1, max=16)
    model = _roundtrip(MLP(), (torch.randn(3, 8),), tmp_path, ({0: batch},), runs=[(torch.randn(5, 8),)])
    assert model.symbols["batch"].min == 1 and model.symbols["batch"].max == 16 and model.symbols["batch"].trace == 3
    with pytest.raises(GraphError, match="outside its range"):
        model(np.zeros((17, 8), np.float32))


def test_layer_norm_kept_whole(tmp_path):
    model = _roundtrip(Norm(), (torch.randn(2, 3, 8),), tmp_path)
    assert [s.aten for s in model.steps] == ["aten::layer_norm.default"]


def test_embedding_and_sum(tmp_path):
    _roundtrip(EmbeddingSum(), (torch.randint(0, 10, (2, 5)),), tmp_path)


def test_softmax_matmul_block_with_tuple_output(tmp_path):
    batch = torch.export.Dim("batch", min=1, max=8)
    model = _roundtrip(Block(), (torch.randn(2, 4, 8),), tmp_path, ({0: batch},), runs=[(torch.randn(3, 4, 8),)])
    assert any(len(s.outputs) == 2 for s in model.steps)  # max.dim's getitems folded into its outputs


def test_attention_through_sdpa(tmp_path):
    try:
        registry.lookup("aten::scaled_dot_product_attention.default")
    except KeyError:
        pytest.skip("the registry has no aten::scaled_dot_product_attention.default yet")
    _roundtrip(Block(sdpa=True), (torch.randn(2, 4, 8),), tmp_path)


def test_missing_registry_op_fails_export_clearly(tmp_path):
    class Odd(nn.Module):
        def forward(self, x):
            return torch.special.i0(x)
    try:
        registry.lookup("aten::i0.default")
        pytest.skip("the registry implements aten::i0")
    except KeyError:
        pass
    with pytest.raises(ExportError, match=r"registry lacks 1 op\(s\).*aten::i0.default"):
        export(Odd(), (torch.randn(3),), tmp_path / "odd")


def test_nbx_export_writes_a_graph_that_runs_with_a_dynamic_batch(tmp_path, capsys):
    import importlib.util

    from nbxtensor.cli import main
    (tmp_path / "factory.py").write_text(
        "import torch\n"
        "import torch.nn as nn\n"
        "def make():\n"
        "    torch.manual_seed(0)  # the same weights each time\n"
        "    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))\n")
    out = tmp_path / "model"
    assert main(["export", f"{tmp_path / 'factory.py'}:make", "--input", "x=float32[3,4]",
                 "--dynamic", "x.0=batch:1:32", "--out", str(out)]) == 0
    assert "exported" in capsys.readouterr().out
    spec = importlib.util.spec_from_file_location("factory", tmp_path / "factory.py")
    factory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(factory)
    x = torch.randn(5, 4)  # a batch the example did not have
    # float32 GELU network, 4 and 8 long dot products
    np.testing.assert_allclose(graph.load(out)(x.numpy()).numpy(), factory.make()(x).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_nbx_export_explains_bad_arguments(tmp_path, capsys):
    from nbxtensor.cli import main
    assert main(["export", "no_colon_here", "--out", str(tmp_path)]) == 2
    assert "MODULE:NAME" in capsys.readouterr().err
    assert main(["export", "torch.nn:Identity", "--input", "x=floaty[2]", "--out", str(tmp_path)]) == 2
    assert "DTYPE" in capsys.readouterr().err
