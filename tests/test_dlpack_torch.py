"""DLPack with torch (and CuPy where installed) as the other side: no copy either way, on the CPU and,
when the suite runs on CUDA, on the GPU, including a consumer on a stream of its own."""
import gc

import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE

torch = pytest.importorskip("torch")

needs_cuda = pytest.mark.skipif(not (TEST_DEVICE == "cuda" and torch.cuda.is_available()),
                                reason="needs NBX_TEST_DEVICE=cuda and a CUDA build of torch")


def test_torch_shares_our_cpu_memory():
    t = nbx.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="cpu")
    theirs = torch.from_dlpack(t)
    assert theirs.data_ptr() == t.data_ptr() and theirs.device.type == "cpu"
    theirs[0, 0] = 100.0
    assert t.numpy()[0, 0] == 100.0
    t.numpy()[2, 3] = -1.0
    assert theirs[2, 3].item() == -1.0


def test_we_share_torch_cpu_memory():
    theirs = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    t = nbx.from_dlpack(theirs)
    assert t.data_ptr() == theirs.data_ptr() and t.dtype == nbx.int32
    theirs[1, 1] = 77
    assert t.numpy()[1, 1] == 77
    t.numpy()[0, 2] = -5
    assert theirs[0, 2].item() == -5


def test_strided_views_both_ways():
    theirs = torch.arange(24, dtype=torch.float64).reshape(4, 6)[1:, ::2].t()
    t = nbx.from_dlpack(theirs)
    assert t.stride() == theirs.stride() and t.data_ptr() == theirs.data_ptr()
    np.testing.assert_array_equal(t.numpy(), theirs.numpy())

    ours = nbx.tensor(np.arange(24, dtype=np.int64).reshape(4, 6), device="cpu")[:, 1::2]
    back = torch.from_dlpack(ours)
    assert back.stride() == ours.stride() and back.data_ptr() == ours.data_ptr()
    np.testing.assert_array_equal(back.numpy(), ours.numpy())


def test_bfloat16_round_trip():
    theirs = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)
    t = nbx.from_dlpack(theirs)
    assert t.dtype == nbx.bfloat16 and t.data_ptr() == theirs.data_ptr()
    assert t.tolist() == [1.5, -2.0, 3.25]
    again = torch.from_dlpack(t)
    assert again.dtype == torch.bfloat16 and again.data_ptr() == theirs.data_ptr()


def test_torch_tensor_deleted_before_ours():
    theirs = torch.arange(5, dtype=torch.float32)
    t = nbx.from_dlpack(theirs)
    del theirs
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(5, dtype=np.float32))


@needs_cuda
def test_cuda_sharing_both_ways():
    t = nbx.tensor(np.arange(6, dtype=np.float32), device="cuda")
    theirs = torch.from_dlpack(t)
    assert theirs.is_cuda and theirs.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(theirs.cpu().numpy(), np.arange(6, dtype=np.float32))

    source = torch.arange(8, dtype=torch.float16, device="cuda").reshape(2, 4)
    ours = nbx.from_dlpack(source)
    assert ours.device.type == "cuda" and ours.data_ptr() == source.data_ptr()
    np.testing.assert_array_equal(ours.numpy(), source.cpu().numpy())


@needs_cuda
def test_cuda_consumer_on_its_own_stream_sees_our_writes():
    t = nbx.tensor(np.zeros(1 << 20, dtype=np.float32), device="cuda")
    t.fill_(3.0)  # queued on our stream; the consumer's stream must wait for it
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        theirs = torch.from_dlpack(t)
        total = theirs.sum()
    side.synchronize()
    assert total.item() == 3.0 * (1 << 20)


@needs_cuda
def test_cupy_sharing_both_ways():
    cupy = pytest.importorskip("cupy")
    t = nbx.tensor(np.arange(6, dtype=np.int32), device="cuda")
    theirs = cupy.from_dlpack(t)
    assert theirs.data.ptr == t.data_ptr()
    np.testing.assert_array_equal(cupy.asnumpy(theirs), np.arange(6, dtype=np.int32))

    source = cupy.arange(4, dtype=cupy.float64)
    ours = nbx.from_dlpack(source)
    assert ours.data_ptr() == source.data.ptr
    np.testing.assert_array_equal(ours.numpy(), np.arange(4, dtype=np.float64))
