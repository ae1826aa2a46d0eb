"""The op registry: every op is declared once with ATen names, a meta rule and a cost rule, and the
meta rule agrees with what the implementation returns."""
import inspect

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry
from nbxtensor.ops.registry import Cost, TensorMeta

from .conftest import TEST_DEVICE, to_nbx


def test_every_op_is_complete():
    ops = registry.all_ops()
    assert len(ops) >= 30
    for op in ops:
        # fused ops with no ATen counterpart are named in the nbx:: namespace
        assert op.aten and all(name.startswith(("aten::", "nbx::")) for name in op.aten), op.name
        assert callable(op.meta) and callable(op.cost) and callable(op.impl), op.name


def test_aten_lookup_and_unknown_op_error():
    assert registry.lookup("aten::cat.default").name == "cat"
    assert registry.lookup("aten::clone").name == "clone"
    with pytest.raises(KeyError, match="aten::frobnicate.default.*families that exist: .*copy"):
        registry.lookup("aten::frobnicate.default")


# torch.where is two ops under one name: the pointwise select and, with the condition alone, nonzero
DISPATCHED = {"where": ("where", "where_condition")}


def test_api_is_generated_from_registry():
    for op in registry.all_ops():
        for name in op.api:
            if name in DISPATCHED:
                assert op.name in DISPATCHED[name]
                continue
            assert getattr(nbx, name) is registry.public_function(op)
        for method in op.methods:
            assert getattr(nbx.Tensor, method) is registry.public_function(op)
        assert inspect.unwrap(registry.public_function(op)) is op.impl


CASES = [
    ("cat", lambda a, b: ([a, b], 0)),
    ("stack", lambda a, b: ([a, b], 1)),
    ("clone", lambda a, b: (a,)),
    ("permute", lambda a, b: (a, (1, 0))),
    ("reshape", lambda a, b: (a, (-1,))),
    ("transpose", lambda a, b: (a, 0, 1)),
    ("split", lambda a, b: (a, 2, 1)),
    ("unsqueeze", lambda a, b: (a, -1)),
    ("select", lambda a, b: (a, 1, -1)),
    ("copy_", lambda a, b: (a, b)),
]


@pytest.mark.parametrize("name,make_args", CASES, ids=[c[0] for c in CASES])
def test_meta_matches_implementation(name, make_args):
    op = registry.get(name)
    a = to_nbx(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = to_nbx(np.ones((3, 4), dtype=np.float16))
    metas = op.meta(*make_args(TensorMeta((3, 4), nbx.float32), TensorMeta((3, 4), nbx.float16)))
    out = op(*make_args(a, b))
    outs = out if isinstance(out, tuple) else (out,)
    metas = (metas,) if isinstance(metas, TensorMeta) else metas
    assert [(tuple(o.shape), o.dtype) for o in outs] == [(tuple(m.shape), m.dtype) for m in metas]


def test_cost_rules_count_bytes():
    m = TensorMeta((1024,), nbx.bfloat16)
    assert registry.get("clone").cost(m) == Cost(bytes_read=2048, bytes_written=2048)
    cat_cost = registry.get("cat").cost([m, TensorMeta((1024,), nbx.float32)])
    assert cat_cost.bytes_read == 2048 + 4096 and cat_cost.bytes_written == 2048 * 4
    assert registry.get("zeros").cost(4, 4, dtype=nbx.float64).bytes_written == 128
    assert registry.get("permute").cost(m, (0,)) == Cost()


def test_meta_rules_need_no_device():
    meta = registry.get("zeros").meta(2, 3, dtype=nbx.int8)
    assert meta == TensorMeta((2, 3), nbx.int8)
    assert registry.get("arange").meta(0, 10, 3) == TensorMeta((4,), nbx.int64)
    assert TEST_DEVICE


def test_tensor_attributes_are_declared_once_and_set_only_by_bind(monkeypatch):
    """Tensor attributes that are no op's method go through ``registry.tensor_attribute``: a second
    declaration of a name, or a name an op's ``methods=`` claims too, is refused; ``bind`` sets them."""
    monkeypatch.setattr(registry, "_TENSOR_ATTRIBUTES", {})
    registry.tensor_attribute("probe_", lambda self: "probed")
    with pytest.raises(ValueError, match="'probe_' is declared twice"):
        registry.tensor_attribute("probe_", lambda self: None)

    class Host:
        pass

    namespace = {}
    registry.bind(namespace, Host)
    assert Host().probe_() == "probed" and Host.clone is registry.public_function(registry.get("clone"))
    registry.tensor_attribute("clone", lambda self: None)
    with pytest.raises(ValueError, match="'clone' is declared by op 'clone' and on its own"):
        registry.bind(namespace, Host)
