"""float8 e4m3 tensors read as bytes: on a device whose facts name no float8 conversions (``native_fp8``:
Ampere and older GPUs, and the interpreter) kernels receive e4m3 tensors as uint8 pointers and decode them by
their bits. The CPU takes that path, so these tests run the decoding an Ampere GPU compiles."""
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
import triton
import triton.language as tl

import nbxtensor as nbx
from nbxtensor.device import facts
from nbxtensor.device import backend_for
from nbxtensor.device.backend import Backend
from nbxtensor.dtypes import get_dtype
from nbxtensor.kernels import quant as K
from nbxtensor.launch import capture, launch
from nbxtensor.quant import QuantizedWeight

from .conftest import TEST_DEVICE, cpu_kernels, to_nbx
from .test_quant import _check

E4M3 = get_dtype("float8_e4m3fn")
FINITE_BYTES = np.array([b for b in range(256) if b & 0x7F != 0x7F], np.uint8)


@pytest.mark.parametrize("name,element_type", [("cpu", tl.uint8), ("ampere", tl.uint8), ("turing", tl.uint8),
                                               ("generic_cuda", tl.uint8), ("ada", tl.float8e4nv),
                                               ("hopper", tl.float8e4nv)])
def test_e4m3_reaches_kernels_as_bytes_where_the_facts_name_no_float8_conversions(name, element_type):
    device = SimpleNamespace(facts=facts.load(name))
    assert Backend.kernel_element_type(device, E4M3) == element_type
    assert Backend.kernel_element_type(device, get_dtype("float8_e5m2")) == tl.float8e5
    assert Backend.kernel_element_type(device, get_dtype("bfloat16")) == tl.bfloat16


@triton.jit
def _decode_weight_bytes(raw, out, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    values = K._byte_weight(tl.load(raw + i, mask=i < n, other=0), K.WEIGHT_FP8, out.dtype.element_ty)
    tl.store(out + i, values, mask=i < n)


@cpu_kernels
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_e4m3_byte_decodes_as_ml_dtypes_does(dtype):
    """The weight kernels' decoding of e4m3 bytes (``kernels/quant.py``'s ``_byte_weight``) for all 256 bytes,
    into float32 and into float16 (the matrix unit's type for float16 rows), bit for bit: signed zeros and
    subnormals included; 0x7f and 0xff are NaN of their sign."""
    raw = np.arange(256, dtype=np.uint8)
    out = nbx.empty(256, dtype=getattr(nbx, dtype))
    launch(_decode_weight_bytes, (1,), out.device, [nbx.from_numpy(raw), out, 256], BLOCK=256)
    expected = raw.view(ml_dtypes.float8_e4m3fn).astype(np.dtype(dtype))
    got = out.numpy()
    nan = np.isnan(expected)
    assert np.flatnonzero(nan).tolist() == [0x7F, 0xFF]
    assert np.isnan(got[nan]).all() and np.signbit(got[nan]).tolist() == [False, True]
    unsigned = {"float32": np.uint32, "float16": np.uint16}[dtype]
    assert (got[~nan].view(unsigned) == expected[~nan].view(unsigned)).all()


@cpu_kernels
@pytest.mark.parametrize("rows,dtype", [(1, "float32"), (4, "bfloat16"), (20, "float32"), (20, "bfloat16")])
def test_products_of_every_finite_e4m3_value_read_as_bytes(rng, rows, dtype):
    """A weight holding every finite e4m3 value in each row (scaled per channel) times rows of ``dtype``, through
    the kernels that read fp8 weights as bytes here (decode rows, prefill tiles, the dequantized weight of
    16-bit prefill rows), against float64: each decoded value is exact, so the bound of ``test_quant`` holds."""
    assert backend_for(nbx.device(TEST_DEVICE)).kernel_element_type(E4M3) == tl.uint8
    n = 24
    q = np.stack([rng.permutation(FINITE_BYTES) for _ in range(n)]).view(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, n).astype(np.float32)
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE)
    reference = q.astype(np.float64) * scales[:, None].astype(np.float64)
    with capture() as recorded:
        _check(rng.standard_normal((rows, q.shape[1])), weight, reference, dtype)
    launched = {kernel.fn.__name__ for kernel, *_ in recorded.launches}
    assert launched & {"quantized_gemv", "quantized_gemm", "dequantize_weight"}, launched


@cpu_kernels
def test_fp8_activations_stay_refused_without_float8_matrix_units(rng, monkeypatch):
    """Reading e4m3 as bytes serves fp8 weights; float8 x float8 products still need float8 matrix units, and
    a device without them refuses them by name."""
    from nbxtensor.ops import plans, quant as quant_ops
    assert not quant_ops.fp8_matrix_units(facts.load("ampere"))
    assert quant_ops.fp8_matrix_units(facts.load("ada")) and quant_ops.fp8_matrix_units(facts.load("hopper"))
    weight = QuantizedWeight.fp8(rng.standard_normal((24, 64)).astype(ml_dtypes.float8_e4m3fn),
                                 np.ones(1, np.float32), device=TEST_DEVICE)
    monkeypatch.setattr(quant_ops, "fp8_matrix_units", lambda facts: False)
    plans.clear_all()
    with pytest.raises(RuntimeError, match="fp8_activations needs float8 matrix units"):
        nbx.quantized_linear(to_nbx(np.ones((4, 64), np.float32)), weight, fp8_activations=True)
    plans.clear_all()
