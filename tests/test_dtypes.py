"""The dtype table, dtype parsing, and every dtype's way in and out of a tensor: tensor(), from_numpy,
numpy(), item() and tolist(), including 0-d and empty tensors."""
import pickle

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import from_dlpack_code, from_safetensors_code
from tests.conftest import TEST_DEVICE, cpu_kernels, to_nbx

# name: (itemsize, kind, numpy dtype, triton type name, safetensors code, dlpack (code, bits))
EXPECTED_TABLE = {
    "bool": (1, "bool", np.dtype(np.bool_), "uint8", "BOOL", (6, 8)),
    "uint8": (1, "uint", np.dtype(np.uint8), "uint8", "U8", (1, 8)),
    "int8": (1, "int", np.dtype(np.int8), "int8", "I8", (0, 8)),
    "int16": (2, "int", np.dtype(np.int16), "int16", "I16", (0, 16)),
    "int32": (4, "int", np.dtype(np.int32), "int32", "I32", (0, 32)),
    "int64": (8, "int", np.dtype(np.int64), "int64", "I64", (0, 64)),
    "float16": (2, "float", np.dtype(np.float16), "float16", "F16", (2, 16)),
    "bfloat16": (2, "float", np.dtype(ml_dtypes.bfloat16), "bfloat16", "BF16", (4, 16)),
    "float32": (4, "float", np.dtype(np.float32), "float32", "F32", (2, 32)),
    "float64": (8, "float", np.dtype(np.float64), "float64", "F64", (2, 64)),
    "complex64": (8, "complex", np.dtype(np.complex64), "float32", "C64", (5, 64)),
    "complex128": (16, "complex", np.dtype(np.complex128), "float64", None, (5, 128)),
    "float8_e4m3fn": (1, "float", np.dtype(ml_dtypes.float8_e4m3fn), "float8e4nv", "F8_E4M3", (10, 8)),
    "float8_e5m2": (1, "float", np.dtype(ml_dtypes.float8_e5m2), "float8e5", "F8_E5M2", (12, 8)),
}
ALL_NAMES = list(EXPECTED_TABLE)
FLOAT8 = ("float8_e4m3fn", "float8_e5m2")


# ---- the table ---------------------------------------------------------------------------------

def test_table_lists_exactly_the_product_dtypes_once():
    assert [d.name for d in nbx.all_dtypes] == ALL_NAMES


@pytest.mark.parametrize("name", ALL_NAMES)
def test_table_row(name):
    itemsize, kind, numpy_dtype, triton_name, safetensors, dlpack = EXPECTED_TABLE[name]
    d = nbx.get_dtype(name)
    assert (d.name, d.itemsize, d.kind, d.bits) == (name, itemsize, kind, itemsize * 8)
    assert d.numpy == numpy_dtype and d.numpy.itemsize == itemsize
    assert d.safetensors == safetensors
    assert d.dlpack == dlpack
    assert d.storage_only == (name in FLOAT8)
    import triton.language as tl
    assert d.triton == getattr(tl, triton_name)
    assert getattr(nbx, name) is d
    assert repr(d) == f"nbxtensor.{name}"


@pytest.mark.parametrize("name", ALL_NAMES)
def test_dtype_predicates(name):
    d = nbx.get_dtype(name)
    kind = EXPECTED_TABLE[name][1]
    assert d.is_floating_point == (kind == "float")
    assert d.is_complex == (kind == "complex")
    assert d.is_integral == (kind in ("int", "uint"))
    assert d.is_signed == (kind not in ("bool", "uint"))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_codes_map_back(name):
    d = nbx.get_dtype(name)
    assert from_dlpack_code(*d.dlpack) is d
    if d.safetensors is not None:
        assert from_safetensors_code(d.safetensors) is d


def test_unknown_codes_raise():
    with pytest.raises(TypeError, match="safetensors"):
        from_safetensors_code("U16")
    with pytest.raises(TypeError, match="DLPack"):
        from_dlpack_code(2, 32, lanes=4)
    with pytest.raises(TypeError, match="DLPack"):
        from_dlpack_code(1, 16)


def test_real_and_complex_counterparts():
    assert nbx.complex64.to_real() is nbx.float32
    assert nbx.complex128.to_real() is nbx.float64
    assert nbx.float32.to_real() is nbx.float32
    assert nbx.float32.to_complex() is nbx.complex64
    assert nbx.float64.to_complex() is nbx.complex128
    assert nbx.bfloat16.to_complex() is nbx.complex64  # as ATen's toComplexType
    with pytest.raises(TypeError, match="complex32"):
        nbx.float16.to_complex()
    with pytest.raises(TypeError):
        nbx.int32.to_complex()


@pytest.mark.parametrize("name", ALL_NAMES)
def test_dtypes_are_singletons_through_pickle(name):
    d = nbx.get_dtype(name)
    assert pickle.loads(pickle.dumps(d)) is d


# ---- parsing ------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("half", "float16"), ("fp16", "float16"), ("f16", "float16"),
    ("bf16", "bfloat16"), ("float", "float32"), ("fp32", "float32"), ("double", "float64"),
    ("long", "int64"), ("int", "int32"), ("short", "int16"), ("char", "int8"), ("byte", "uint8"),
    ("u8", "uint8"), ("i64", "int64"), ("bool_", "bool"), ("cfloat", "complex64"), ("cdouble", "complex128"),
    ("c64", "complex64"), ("fp8_e4m3", "float8_e4m3fn"), ("f8_e5m2", "float8_e5m2"),
    ("torch.float16", "float16"), ("torch.bfloat16", "bfloat16"), ("torch.half", "float16"),
    ("torch.float8_e4m3fn", "float8_e4m3fn"), ("nbxtensor.int8", "int8"), ("np.float32", "float32"),
    ("numpy.int16", "int16"),
])
def test_parse_aliases_and_prefixed_names(spec, expected):
    assert nbx.get_dtype(spec) is nbx.get_dtype(expected)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_parse_every_name_and_numpy_dtype(name):
    d = nbx.get_dtype(name)
    assert nbx.get_dtype(d) is d
    assert nbx.get_dtype(f"torch.{name}") is d
    assert nbx.get_dtype(d.numpy) is d
    assert nbx.get_dtype(d.numpy.type) is d  # the scalar type: np.float16, ml_dtypes.bfloat16...
    assert nbx.get_dtype(str(d.numpy)) is d


@pytest.mark.parametrize("spec, expected", [(bool, "bool"), (int, "int64"), (float, "float32"),
                                            (complex, "complex64")])
def test_parse_python_types(spec, expected):
    assert nbx.get_dtype(spec) is nbx.get_dtype(expected)


def test_parse_numpy_spellings():
    assert nbx.get_dtype(np.float32) is nbx.float32
    assert nbx.get_dtype(np.dtype("<i8")) is nbx.int64
    assert nbx.get_dtype(np.dtype(">f4")) is nbx.float32  # the element type, whatever the byte order
    assert nbx.get_dtype(np.bool_) is nbx.bool


def test_parse_torch_dtype_objects():
    torch = pytest.importorskip("torch")
    for name in ALL_NAMES:
        assert nbx.get_dtype(getattr(torch, name)) is nbx.get_dtype(name)
        assert getattr(torch, name).itemsize == nbx.get_dtype(name).itemsize


@pytest.mark.parametrize("bad", ["float17", "torch.complex32", "uint16", "", "Float32"])
def test_unknown_name_lists_the_valid_names(bad):
    with pytest.raises(TypeError) as info:
        nbx.get_dtype(bad)
    message = str(info.value)
    assert repr(bad) in message
    for name in ALL_NAMES:
        assert name in message


@pytest.mark.parametrize("bad", [np.uint16, np.dtype("U5"), np.dtype([("a", np.int8)]), np.longdouble])
def test_numpy_dtype_without_counterpart_is_refused(bad):
    with pytest.raises(TypeError, match="no nbxtensor counterpart.*float32"):
        nbx.get_dtype(bad)


@pytest.mark.parametrize("bad", [object(), 3, [np.float32]])
def test_uninterpretable_spec_is_refused(bad):
    with pytest.raises(TypeError, match="valid names"):
        nbx.get_dtype(bad)


# ---- every dtype in and out ---------------------------------------------------------------------

def sample_values(name):
    """A few values each dtype represents exactly, as a NumPy array of that dtype."""
    d = nbx.get_dtype(name)
    if d.kind == "bool":
        values = [True, False, True]
    elif d.kind == "uint":
        values = [0, 7, 200, 255]
    elif d.kind == "int":
        values = [0, -7, 100, np.iinfo(d.numpy).min, np.iinfo(d.numpy).max]
    elif d.kind == "complex":
        values = [0, 1.5 - 2j, -0.25j, 3 + 0.5j]
    else:
        values = [0.0, -1.5, 0.25, 3.0, -0.0]
    return np.array(values).astype(d.numpy)


def python_values(array):
    """What tolist() must give: Python scalars of the dtype's kind."""
    if array.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn),
                       np.dtype(ml_dtypes.float8_e5m2)):
        array = array.astype(np.float64)
    return array.tolist()


PYTHON_TYPE = {"bool": bool, "uint": int, "int": int, "float": float, "complex": complex}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_round_trip_through_tensor(name):
    host = sample_values(name)
    t = to_nbx(host)
    assert t.dtype is nbx.get_dtype(name) and t.shape == host.shape
    back = t.numpy() if t.is_cpu else t.cpu().numpy()
    assert back.dtype == host.dtype
    assert back.tobytes() == host.tobytes()
    assert t.tolist() == python_values(host)
    for i in range(host.shape[0]):
        value = t[i].item()
        assert type(value) is PYTHON_TYPE[nbx.get_dtype(name).kind]
        assert value == python_values(host)[i]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_zero_dim_round_trip(name):
    host = sample_values(name)[1:2].reshape(())
    t = to_nbx(host)
    assert t.shape == () and t.ndim == 0
    assert t.item() == python_values(host)
    assert t.tolist() == python_values(host)
    assert np.asarray(t.cpu().numpy()).shape == ()
    shared = nbx.from_numpy(host)
    assert shared.shape == () and shared.item() == python_values(host)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_zero_dim_python_scalar_with_dtype(name):
    d = nbx.get_dtype(name)
    t = nbx.tensor(1, dtype=d, device=TEST_DEVICE)
    assert t.shape == () and t.dtype is d
    assert t.item() == 1


@pytest.mark.parametrize("name", ALL_NAMES)
def test_empty_round_trip(name):
    d = nbx.get_dtype(name)
    for shape in [(0,), (2, 0, 3)]:
        host = np.zeros(shape, dtype=d.numpy)
        t = to_nbx(host)
        assert t.shape == shape and t.dtype is d and t.numel() == 0
        assert t.tolist() == host.tolist()
        assert t.cpu().numpy().shape == shape and t.cpu().numpy().dtype == d.numpy
        shared = nbx.from_numpy(host)
        assert shared.shape == shape and shared.numpy().shape == shape
    with pytest.raises(RuntimeError, match="0 elements"):
        nbx.tensor([], dtype=d, device=TEST_DEVICE).item()


@pytest.mark.parametrize("name, value", [
    ("bfloat16", 1.5), ("bfloat16", -3.25), ("float16", 0.333251953125), ("float8_e4m3fn", -0.5),
    ("float8_e5m2", 1.5), ("uint8", 200), ("int8", -7), ("int16", -300), ("bool", True), ("bool", False),
])
def test_item_of_small_dtypes_is_the_value(name, value):
    # lesson: item() gave 0.0 for bf16 and small integer dtypes
    t = nbx.tensor([value], dtype=name, device=TEST_DEVICE)
    assert t.item() == value
    assert t.reshape(()).item() == value
    assert type(t.item()) is type(value)


def test_float8_e5m2_numpy_of_a_view():
    # as_strided lost the ml_dtypes type of float8_e5m2 ('<f1'), so numpy() of it failed
    t = nbx.from_numpy(np.array([[1.0, 2.0], [-4.0, 0.5]], dtype=ml_dtypes.float8_e5m2))
    assert t.numpy().dtype == np.dtype(ml_dtypes.float8_e5m2)
    assert t.t().numpy().astype(np.float32).tolist() == [[1.0, -4.0], [2.0, 0.5]]
    assert t.tolist() == [[1.0, 2.0], [-4.0, 0.5]]


# ---- from_numpy ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_NAMES)
@cpu_kernels
def test_from_numpy_shares_memory_both_ways(name):
    d = nbx.get_dtype(name)
    array = sample_values(name)
    t = nbx.from_numpy(array)
    assert t.dtype is d and t.shape == array.shape and t.is_cpu
    assert np.shares_memory(t.numpy(), array)
    array[1] = array[0]
    assert t[1].item() == python_values(array)[0]
    t[2] = nbx.tensor(array[3], device="cpu") if d.kind != "bool" else False
    expected = python_values(array[3:4])[0] if d.kind != "bool" else False
    assert python_values(array)[2] == expected


@cpu_kernels
def test_from_numpy_keeps_strides_of_a_strided_view():
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    view = base[1:, ::2]
    t = nbx.from_numpy(view)
    assert t.shape == (3, 3) and t.stride() == (6, 2)
    assert t.tolist() == view.tolist()
    t.fill_(-1)
    assert (base[1:, ::2] == -1).all() and (base[1:, 1::2] != -1).all() and (base[0] != -1).all()


def test_from_numpy_of_transposed_and_broadcast_arrays():
    base = np.arange(6, dtype=np.float64).reshape(2, 3)
    assert nbx.from_numpy(base.T).stride() == (1, 3)
    assert nbx.from_numpy(base.T).tolist() == base.T.tolist()
    broadcast = np.broadcast_to(np.arange(3.0), (4, 3))
    t = nbx.from_numpy(broadcast)
    assert t.stride() == (0, 1) and t.tolist() == broadcast.tolist()


def test_from_numpy_keeps_the_array_alive():
    t = nbx.from_numpy(np.arange(5, dtype=np.int64))
    import gc
    gc.collect()
    assert t.tolist() == [0, 1, 2, 3, 4]


def test_from_numpy_rejects_negative_strides():
    with pytest.raises(ValueError, match="negative strides"):
        nbx.from_numpy(np.arange(5)[::-1])
    with pytest.raises(ValueError, match="negative strides"):
        nbx.from_numpy(np.arange(6).reshape(2, 3)[:, ::-1])


def test_from_numpy_rejects_big_endian():
    with pytest.raises(ValueError, match="big-endian"):
        nbx.from_numpy(np.arange(3, dtype=">i4"))


def test_from_numpy_rejects_unsupported_dtypes_and_non_arrays():
    with pytest.raises(TypeError, match="uint16"):
        nbx.from_numpy(np.arange(3, dtype=np.uint16))
    with pytest.raises(TypeError, match="ndarray"):
        nbx.from_numpy([1, 2, 3])


def test_tensor_of_big_endian_array_converts():
    t = nbx.tensor(np.array([1, 256, -2], dtype=">i4"), device=TEST_DEVICE)
    assert t.dtype is nbx.int32 and t.tolist() == [1, 256, -2]


def test_tensor_copies_a_numpy_array():
    array = np.arange(4, dtype=np.float32)
    t = nbx.tensor(array, device=TEST_DEVICE)
    array[0] = 100
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


# ---- numpy() of views ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["float32", "int8", "bfloat16", "complex64", "complex128", "float8_e5m2", "bool"])
def test_numpy_of_non_contiguous_views(name):
    host = np.arange(24).reshape(2, 3, 4).astype(nbx.get_dtype(name).numpy)
    t = to_nbx(host)
    views = [
        (t.transpose(0, 2), host.transpose(2, 1, 0)),
        (t.permute(1, 2, 0), host.transpose(1, 2, 0)),
        (t[:, ::2, 1::2], host[:, ::2, 1::2]),
        (t[1], host[1]),
        (t[..., 2], host[..., 2]),
        (t[:, 1:2].expand(2, 5, 4), np.broadcast_to(host[:, 1:2], (2, 5, 4))),
        (t[1, 2, 3], host[1, 2, 3]),
        (t[:, 3:], host[:, 3:]),
    ]
    for view, expected in views:
        got = view.numpy() if view.is_cpu else view.cpu().numpy()
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert np.array_equal(got.astype(np.complex128), np.asarray(expected).astype(np.complex128))


def test_numpy_on_the_cpu_is_a_view():
    t = nbx.from_numpy(np.zeros((2, 3), np.float32))
    view = t.t().numpy()
    view[2, 1] = 5.0
    assert t.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 5.0]]


def test_numpy_of_a_view_with_an_offset():
    t = nbx.from_numpy(np.arange(10, dtype=np.int16))
    assert t[3:8:2].numpy().tolist() == [3, 5, 7]
    assert t[7].numpy().shape == () and int(t[7].numpy()) == 7


def test_array_protocol():
    t = to_nbx(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert np.asarray(t).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
