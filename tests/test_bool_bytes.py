"""Bool elements whose bytes are not 0 or 1 (NumPy bool arrays laid over other bytes, a uint8 tensor
viewed as bool, DLPack imports) are True wherever they are nonzero, as in NumPy and ATen: no kernel
computes with the raw byte. The reference is the canonical NumPy bool array."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE, to_nbx

BYTES = np.array([1, 2, 255, 0, 0, 128], dtype=np.uint8)
TRUTH = BYTES != 0


def _from_numpy():
    return nbx.from_numpy(BYTES.copy().view(np.bool_)).to(TEST_DEVICE)


def _tensor():
    return nbx.tensor(BYTES.view(np.bool_), device=TEST_DEVICE)


def _uint8_view():
    return to_nbx(BYTES.copy()).view(nbx.bool)


def _dlpack():
    return nbx.from_dlpack(BYTES.copy().view(np.bool_)).to(TEST_DEVICE)


SOURCES = {"from_numpy": _from_numpy, "tensor": _tensor, "uint8_view": _uint8_view, "dlpack": _dlpack}


@pytest.fixture(params=sorted(SOURCES))
def flags(request):
    return SOURCES[request.param]()


def test_the_sources_really_hold_other_bytes_than_one():
    for name in ("from_numpy", "uint8_view", "dlpack"):
        t = SOURCES[name]()
        assert t.view(nbx.uint8).tolist() == BYTES.tolist(), name
    # nbx.tensor copies, and stores each True as 1
    assert _tensor().view(nbx.uint8).tolist() == TRUTH.astype(np.uint8).tolist()


def test_reductions_count_true_elements(flags):
    assert flags.sum().item() == TRUTH.sum() == 4
    assert flags.sum(dtype=nbx.uint8).item() == 4
    assert flags.reshape(2, 3).sum(1).tolist() == TRUTH.reshape(2, 3).sum(1).tolist()
    assert flags.count_nonzero().item() == 4
    assert flags.cumsum(0).tolist() == np.cumsum(TRUTH).tolist()
    assert (flags.any().item(), flags.all().item()) == (True, False)
    assert flags[:3].all().item() is True
    assert flags.amax().item() is True and flags.amin().item() is False
    assert flags.float().mean().item() == pytest.approx(TRUTH.mean())


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8",
                                   "int8", "complex64"])
def test_casts_give_zero_and_one(flags, dtype):
    out = flags.to(getattr(nbx, dtype))
    assert np.array_equal(np.asarray(out.to(nbx.complex128).tolist()), TRUTH.astype(np.complex128))


def test_copies_store_canonical_bytes(flags):
    assert flags.clone().view(nbx.uint8).tolist() == TRUTH.astype(np.uint8).tolist()
    assert flags[::2].contiguous().view(nbx.uint8).tolist() == TRUTH[::2].astype(np.uint8).tolist()


def test_pointwise_ops_read_true_as_one(flags):
    assert (~flags).tolist() == (~TRUTH).tolist()
    assert flags.logical_not().tolist() == np.logical_not(TRUTH).tolist()
    assert (flags + 1).tolist() == (TRUTH + 1).tolist()
    assert (flags * 2.5).tolist() == (TRUTH * 2.5).tolist()
    assert (flags == flags[0]).tolist() == (TRUTH == TRUTH[0]).tolist()
    assert (flags ^ flags[1]).tolist() == (TRUTH ^ TRUTH[1]).tolist()
    assert (flags & flags[2]).tolist() == (TRUTH & TRUTH[2]).tolist()
    assert nbx.where(flags, 10.0, -1.0).tolist() == np.where(TRUTH, 10.0, -1.0).tolist()


def test_masks_select_true_elements(flags):
    values = to_nbx(np.arange(6.0))
    assert values.masked_fill(flags, -1.0).tolist() == np.where(TRUTH, -1.0, np.arange(6.0)).tolist()
    assert values[flags].tolist() == np.arange(6.0)[TRUTH].tolist()
    assert flags.nonzero().reshape(-1).tolist() == np.flatnonzero(TRUTH).tolist()
    written = to_nbx(np.zeros(6))
    written[flags] = 7.0
    assert written.tolist() == np.where(TRUTH, 7.0, 0.0).tolist()


def test_sorting_orders_by_truth(flags):
    assert flags.sort().values.tolist() == np.sort(TRUTH).tolist()
    assert flags.argsort(stable=True).tolist() == np.argsort(TRUTH, kind="stable").tolist()
    assert nbx.unique(flags).tolist() == [False, True]


def test_index_add_on_bools_reads_true_as_one(flags):
    out = to_nbx(np.zeros(6, dtype=bool)).index_add(0, to_nbx(np.arange(6)), flags)
    assert out.view(nbx.uint8).tolist() == TRUTH.astype(np.uint8).tolist()


def test_host_reads_give_python_bools(flags):
    assert flags.tolist() == TRUTH.tolist()
    assert all(type(v) is bool for v in flags.tolist())
    assert flags[1].item() is True and flags[2].item() is True and flags[3].item() is False
    assert bool(flags[5]) is True
    host = flags.numpy()
    assert host.dtype == np.bool_ and np.array_equal(host, TRUTH) and host.sum() == 4
