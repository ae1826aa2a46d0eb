"""The first lines of typical torch inference code run with ``import nbxtensor as nbx``: gradient-mode
switches, ``detach`` and ``requires_grad``, in-place views, ``type()``, ``allclose``/``equal``, NumPy's
``axis=`` and ``keepdims=``, foreign arrays, and torch's error texts. References are NumPy."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE, arange_pair, storage_start, to_nbx

GRADIENTS_REFUSED = "gradients are not computed by nbxtensor, an inference library"


# ---- gradient modes ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [nbx.no_grad, nbx.inference_mode])
def test_grad_modes_are_context_managers_and_decorators_in_every_form(mode):
    x = to_nbx(np.ones(3, np.float32))
    with mode():
        assert (x + 1).tolist() == [2.0, 2.0, 2.0]

    @mode()
    def called(t):
        """keeps its name and doc"""
        return t * 2

    @mode
    def bare(t):
        return t * 3

    assert called(x).tolist() == [2.0] * 3 and bare(x).tolist() == [3.0] * 3
    assert called.__name__ == "called" and called.__doc__ == "keeps its name and doc" and bare.__name__ == "bare"
    assert not nbx.is_grad_enabled()


def test_inference_mode_true_is_the_mode_and_false_is_refused():
    with nbx.inference_mode(True):
        assert nbx.is_inference_mode_enabled()
    with nbx.inference_mode(mode=True):
        pass
    with pytest.raises(RuntimeError, match=r"inference_mode\(False\): " + GRADIENTS_REFUSED):
        nbx.inference_mode(False)


def test_set_grad_enabled_takes_false_as_a_call_a_context_and_a_decorator_and_refuses_true():
    nbx.set_grad_enabled(False)
    with nbx.set_grad_enabled(False):
        assert nbx.is_grad_enabled() is False

    @nbx.set_grad_enabled(False)
    def f():
        return 7

    assert f() == 7
    with pytest.raises(RuntimeError, match=r"set_grad_enabled\(True\): " + GRADIENTS_REFUSED):
        nbx.set_grad_enabled(True)
    with pytest.raises(RuntimeError, match="enable_grad: " + GRADIENTS_REFUSED):
        with nbx.enable_grad():
            pass


def test_an_exception_leaves_a_grad_mode_block_unchanged():
    with pytest.raises(KeyError):
        with nbx.no_grad():
            raise KeyError("raised inside")


# ---- requires_grad and detach ------------------------------------------------------------------

def test_requires_grad_is_false_and_asking_for_it_is_refused():
    x = to_nbx(np.ones(2, np.float32))
    assert x.requires_grad is False and x.grad is None and x.is_leaf
    assert x.requires_grad_(False) is x
    x.requires_grad = False
    with pytest.raises(RuntimeError, match=r"Tensor.requires_grad_\(requires_grad=True\): " + GRADIENTS_REFUSED):
        x.requires_grad_()
    with pytest.raises(RuntimeError, match=GRADIENTS_REFUSED):
        x.requires_grad = True


_BASE = None


def _base():
    global _BASE
    if _BASE is None:
        _BASE = to_nbx(np.ones((2, 3), np.float32))
    return _BASE


CREATION = {
    "tensor": lambda **k: nbx.tensor([1.0, 2.0], **k),
    "zeros": lambda **k: nbx.zeros(2, 3, **k),
    "ones": lambda **k: nbx.ones((2,), **k),
    "empty": lambda **k: nbx.empty(2, **k),
    "full": lambda **k: nbx.full((2,), 1.5, **k),
    "scalar_tensor": lambda **k: nbx.scalar_tensor(3, **k),
    "arange": lambda **k: nbx.arange(4, **k),
    "linspace": lambda **k: nbx.linspace(0, 1, 3, **k),
    "eye": lambda **k: nbx.eye(2, **k),
    "zeros_like": lambda **k: nbx.zeros_like(_base(), **k),
    "ones_like": lambda **k: nbx.ones_like(_base(), **k),
    "empty_like": lambda **k: nbx.empty_like(_base(), **k),
    "full_like": lambda **k: nbx.full_like(_base(), 2, **k),
    "rand": lambda **k: nbx.rand(2, **k),
    "randn": lambda **k: nbx.randn(2, **k),
    "rand_like": lambda **k: nbx.rand_like(_base(), **k),
    "randn_like": lambda **k: nbx.randn_like(_base(), **k),
    "randint": lambda **k: nbx.randint(0, 5, (3,), **k),
    "randint_like": lambda **k: nbx.randint_like(_base(), 5, **k),
    "randperm": lambda **k: nbx.randperm(4, **k),
    "new_zeros": lambda **k: _base().new_zeros(2, **k),
    "new_ones": lambda **k: _base().new_ones(2, **k),
    "new_empty": lambda **k: _base().new_empty(2, **k),
    "new_full": lambda **k: _base().new_full((2,), 1, **k),
    "new_tensor": lambda **k: _base().new_tensor([1, 2], **k),
}


@pytest.mark.parametrize("name", sorted(CREATION))
def test_every_creation_function_refuses_requires_grad_true_by_name(name):
    made = CREATION[name](device=TEST_DEVICE, requires_grad=False)
    assert made.requires_grad is False
    with pytest.raises(RuntimeError, match=rf"^{name}\(requires_grad=True\): {GRADIENTS_REFUSED}$"):
        CREATION[name](device=TEST_DEVICE, requires_grad=True)


def test_detach_is_a_new_tensor_over_the_same_memory():
    array, x = arange_pair((2, 3), np.float32)
    view = x.t()
    detached = view.detach()
    assert detached is not view and storage_start(detached) == storage_start(x)
    assert detached.shape == view.shape and detached.stride() == view.stride()
    detached[0, 1] = 100.0  # torch's detach shares the data: writes show through
    array.T[0, 1] = 100.0
    np.testing.assert_array_equal(x.numpy(), array)
    assert x.detach_() is x
    data = x.data
    assert data is not x and data.data_ptr() == x.data_ptr() and data.shape == x.shape


# ---- in-place views ----------------------------------------------------------------------------

IN_PLACE = [
    ("unsqueeze_", (1,), lambda a: np.expand_dims(a, 1)),
    ("unsqueeze_", (-1,), lambda a: np.expand_dims(a, -1)),
    ("squeeze_", (), lambda a: a.squeeze()),
    ("squeeze_", (0,), lambda a: a.squeeze(0)),
    ("squeeze_", (1,), lambda a: a),  # an extent other than 1 stays
    ("squeeze_", ((0, 2),), lambda a: a.squeeze((0, 2))),
    ("transpose_", (0, 3), lambda a: a.swapaxes(0, 3)),
    ("swapdims_", (1, -1), lambda a: a.swapaxes(1, -1)),
    ("swapaxes_", (2, 1), lambda a: a.swapaxes(2, 1)),
]


@pytest.mark.parametrize("method, args, reference", IN_PLACE)
def test_in_place_views_change_the_tensor_itself(method, args, reference):
    array, x = arange_pair((1, 2, 1, 3), np.float32)
    start = storage_start(x)
    returned = getattr(x, method)(*args)
    expected = reference(array)
    assert returned is x and x.shape == expected.shape and storage_start(x) == start
    np.testing.assert_array_equal(x.numpy(), expected)
    # ops after the change see the new layout (cached layouts are not reused)
    np.testing.assert_array_equal((x + 0).numpy(), expected)


def test_t_and_as_strided_in_place():
    array, x = arange_pair((2, 3), np.float32)
    assert x.t_() is x and x.shape == (3, 2)
    np.testing.assert_array_equal(x.contiguous().numpy(), array.T)
    y = to_nbx(np.arange(6, dtype=np.float32))
    assert y.as_strided_((2, 2), (1, 2), 1) is y
    np.testing.assert_array_equal(y.numpy(), [[1, 3], [2, 4]])
    assert y.storage_offset() == 1


def test_a_refused_in_place_view_leaves_the_tensor_as_it_was():
    x = to_nbx(np.arange(6, dtype=np.float32))
    with pytest.raises(RuntimeError, match="as_strided"):
        x.as_strided_((4,), (2,))
    with pytest.raises(IndexError):
        x.unsqueeze_(5)
    assert x.shape == (6,) and x.stride() == (1,) and x.storage_offset() == 0
    assert x.squeeze_(axis=0) is x and x.shape == (6,)


# ---- type(), predicates, allclose and equal ----------------------------------------------------

def test_type_names_the_legacy_type_and_casts_when_given_one():
    x = to_nbx(np.ones(2, np.float32))
    assert x.type() == ("nbxtensor.FloatTensor" if x.is_cpu else "nbxtensor.cuda.FloatTensor")
    assert to_nbx(np.ones(1, np.int64)).type().endswith(".LongTensor")
    assert x.to(nbx.bfloat16).type().endswith(".BFloat16Tensor")
    assert x.to(nbx.float8_e4m3fn).type().endswith(".Float8_e4m3fnTensor")
    assert x.type(nbx.int32).dtype is nbx.int32
    assert x.type("torch.DoubleTensor").dtype is nbx.float64
    assert x.type("nbxtensor.HalfTensor").dtype is nbx.float16
    with pytest.raises(ValueError, match="invalid tensor type name 'torch.SpamTensor'"):
        x.type("torch.SpamTensor")


def test_predicates_and_numel():
    x = to_nbx(np.zeros((2, 3), np.float32))
    assert nbx.is_tensor(x) and not nbx.is_tensor(np.zeros(2)) and not nbx.is_tensor([1])
    assert nbx.numel(x) == x.numel() == 6
    assert nbx.is_floating_point(x) and x.is_floating_point()
    assert not nbx.is_floating_point(x.long()) and not nbx.is_complex(x)
    assert nbx.is_complex(x.to(nbx.complex64))


ALLCLOSE = [
    ([1.0, 2.0], [1.0 + 1e-6, 2.0], {}),
    ([1.0, 2.0], [1.0 + 1e-4, 2.0], {}),
    ([1.0, 2.0], [1.05, 2.0], {"rtol": 0.1}),
    ([0.0], [1e-9], {}),
    ([0.0], [1e-7], {}),
    ([0.0], [1e-7], {"atol": 1e-6}),
    ([np.nan, 1.0], [np.nan, 1.0], {}),
    ([np.nan, 1.0], [np.nan, 1.0], {"equal_nan": True}),
    ([np.inf, -np.inf], [np.inf, -np.inf], {}),
    ([np.inf], [-np.inf], {}),
    ([[1.0, 2.0], [1.0, 2.5]], [1.0, 2.0], {}),  # broadcast
]


@pytest.mark.parametrize("a, b, kwargs", ALLCLOSE)
def test_allclose_agrees_with_numpy(a, b, kwargs):
    a64, b64 = np.array(a), np.array(b)
    expected = bool(np.allclose(a64, b64, **kwargs))
    x, y = to_nbx(a64), to_nbx(b64)
    got = nbx.allclose(x, y, **kwargs)
    assert got is expected and x.allclose(y, **kwargs) is expected


def test_allclose_wants_one_dtype_as_torch():
    with pytest.raises(RuntimeError, match="float32 did not match float64"):
        nbx.allclose(to_nbx(np.ones(2, np.float32)), to_nbx(np.ones(2)))


def test_equal_is_same_shape_and_same_values_as_a_python_bool():
    x = to_nbx(np.array([1.0, 2.0], np.float32))
    assert nbx.equal(x, to_nbx(np.array([1.0, 2.0], np.float32))) is True
    assert x.equal(to_nbx(np.array([1, 2], np.int64))) is True  # compared after promotion, as torch
    assert nbx.equal(x, to_nbx(np.array([1.0, 3.0], np.float32))) is False
    assert nbx.equal(x, to_nbx(np.array([[1.0, 2.0]], np.float32))) is False  # broadcastable is not enough
    nan = to_nbx(np.array([np.nan]))
    assert nbx.equal(nan, nan) is False
    with pytest.raises(TypeError, match="other must be a Tensor"):
        nbx.equal(x, [1.0, 2.0])


# ---- axis= and keepdims= -----------------------------------------------------------------------

AXIS_CASES = [
    ("sum", {}, lambda a, k: a.sum(**k)),
    ("mean", {}, lambda a, k: a.mean(**k)),
    ("prod", {}, lambda a, k: a.prod(**k)),
    ("amax", {}, lambda a, k: a.max(**k)),
    ("amin", {}, lambda a, k: a.min(**k)),
    ("argmax", {}, lambda a, k: a.argmax(**k)),
    ("argmin", {}, lambda a, k: a.argmin(**k)),
    ("std", {}, lambda a, k: a.std(ddof=1, **k)),
    ("var", {}, lambda a, k: a.var(ddof=1, **k)),
    ("all", {}, lambda a, k: (a > 2).all(**k)),
    ("any", {}, lambda a, k: (a > 2).any(**k)),
]


@pytest.mark.parametrize("name, extra, reference", AXIS_CASES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_axis_and_keepdims_are_aliases_of_dim_and_keepdim(name, extra, reference, keepdims):
    array, x = arange_pair((2, 3), np.float32)
    array = array.astype(np.float64)
    if name in ("all", "any"):
        x = x > 2
    expected = reference(array, {"axis": 1, "keepdims": keepdims})
    for got in (getattr(nbx, name)(x, axis=1, keepdims=keepdims), getattr(x, name)(axis=1, keepdims=keepdims)):
        assert tuple(got.shape) == expected.shape
        np.testing.assert_allclose(got.numpy().astype(np.float64), expected, rtol=1e-6)


def test_axis_reaches_max_min_cumsum_softmax_and_cat():
    array, x = arange_pair((2, 3), np.float32)
    values, indices = x.max(axis=1)
    np.testing.assert_array_equal(values.numpy(), array.max(axis=1))
    np.testing.assert_array_equal(indices.numpy(), array.argmax(axis=1))
    np.testing.assert_array_equal(nbx.min(x, axis=0).values.numpy(), array.min(axis=0))
    np.testing.assert_array_equal(x.cumsum(axis=1).numpy(), array.cumsum(axis=1))
    shifted = np.exp(array - array.max(axis=1, keepdims=True))
    np.testing.assert_allclose(nbx.softmax(x, axis=1).numpy(), shifted / shifted.sum(axis=1, keepdims=True),
                               rtol=1e-6)
    np.testing.assert_array_equal(nbx.cat([x, x], axis=1).numpy(), np.concatenate([array, array], axis=1))


@pytest.mark.parametrize("call, name", [
    (lambda x: x.sum(foo=1), "sum"), (lambda x: nbx.zeros(2, foo=1), "zeros"),
    (lambda x: nbx.ones_like(x, foo=1), "ones_like"), (lambda x: x.cumsum(0, foo=1), "cumsum"),
])
def test_an_unknown_keyword_names_the_op_not_its_factory(call, name):
    x = to_nbx(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'foo'$"):
        call(x)


def test_dim_and_its_alias_together_are_refused():
    x = to_nbx(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="got both dim= and its alias axis="):
        x.sum(dim=0, axis=1)


# ---- foreign arrays ----------------------------------------------------------------------------

class DLPackProducer:
    """Another library's tensor, seen only through the DLPack protocol."""

    def __init__(self, inner):
        self._inner = inner

    def __dlpack__(self, **kwargs):
        return self._inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._inner.__dlpack_device__()


class ArrayProducer:
    """Another library's array, seen only through ``__array__``."""

    def __init__(self, array):
        self._array = array

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)


def test_tensor_and_as_tensor_take_a_dlpack_producer_keeping_its_dtype():
    array = np.array([[1.5, -2.0], [3.25, 4.0]], np.float32)
    source = to_nbx(array).to(nbx.bfloat16)
    copied = nbx.tensor(DLPackProducer(source))
    assert copied.dtype is nbx.bfloat16 and copied.tolist() == array.tolist()
    assert storage_start(copied) != storage_start(source)  # tensor() copies
    shared = nbx.as_tensor(DLPackProducer(source), device=source.device)
    assert shared.dtype is nbx.bfloat16 and shared.data_ptr() == source.data_ptr()  # as_tensor shares
    assert nbx.tensor(DLPackProducer(np.arange(3, dtype=np.int16))).dtype is nbx.int16
    assert nbx.tensor(DLPackProducer(array), dtype=nbx.float64).dtype is nbx.float64


def test_tensor_takes_an_array_protocol_producer():
    got = nbx.tensor(ArrayProducer(np.array([1, 2, 3], np.int32)), device=TEST_DEVICE)
    assert got.dtype is nbx.int32 and got.tolist() == [1, 2, 3]
    assert nbx.as_tensor(ArrayProducer(np.ones(2, np.float64))).dtype is nbx.float64


# ---- error texts -------------------------------------------------------------------------------

@pytest.mark.parametrize("index, message", [
    (lambda x: x[to_nbx(np.array([0, 5]))], "^index 5 is out of bounds for dimension 0 with size 2$"),
    (lambda x: x[to_nbx(np.array([-3]))], "^index -3 is out of bounds for dimension 0 with size 2$"),
    (lambda x: x[:, to_nbx(np.array([1, 7]))], "^index 7 is out of bounds for dimension 1 with size 3$"),
    (lambda x: x[None, 1, [3]], "^index 3 is out of bounds for dimension 1 with size 3$"),
    (lambda x: x[to_nbx(np.array(4))], "^index 4 is out of bounds for dimension 0 with size 2$"),
    (lambda x: x.index_select(1, to_nbx(np.array([3]))), "index_select: index 3 is out of bounds for dimension 1 "
                                                          "with size 3"),
    (lambda x: x.gather(1, to_nbx(np.array([[0], [9]]))), "gather: index 9 is out of bounds for dimension 1 "
                                                           "with size 3"),
    (lambda x: x.scatter_(0, to_nbx(np.array([[2]])), 1.0), "scatter_: index 2 is out of bounds for dimension 0 "
                                                             "with size 2"),
    (lambda x: x.__setitem__(to_nbx(np.array([6])), 0.0), "index_put_: index 6 is out of bounds for dimension 0 "
                                                           "with size 2"),
])
def test_an_index_tensor_out_of_range_names_the_value_and_the_size(index, message):
    x = to_nbx(np.zeros((2, 3), np.float32))
    if not nbx.device(TEST_DEVICE).type == "cpu":
        pytest.skip("a GPU reports an index out of range at its next synchronisation, without the value")
    with pytest.raises(IndexError, match=message):
        index(x)


def test_to_an_absent_device_says_so():
    x = to_nbx(np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"to\('cpu:1'\) names neither a dtype nor a device that is here: "
                                         "the cpu device has no index 1"):
        x.to("cpu:1")
    with pytest.raises(ValueError, match="unknown device type 'floot32'"):
        x.to("floot32")
    assert x.to("float64").dtype is nbx.float64 and x.to("cpu").device == nbx.device("cpu")


def test_meta_tensors_come_from_creation_and_to_and_refuse_computation():
    made = nbx.zeros(2, 3, device="meta")
    moved = to_nbx(np.ones((3, 2), np.float32)).t().to("meta")
    others = (nbx.empty_like(made), nbx.full((2,), 1.0, device="meta"), made.to("meta", nbx.float16),
              nbx.tensor([[1.0, 2.0]], device="meta"), nbx.arange(5, device="meta"),
              nbx.linspace(0, 1, 4, device="meta"), nbx.eye(3, device="meta"), nbx.rand(2, 2, device="meta"),
              nbx.randint(0, 3, (4,), device="meta"))
    assert [tuple(t.shape) for t in others] == [(2, 3), (2,), (2, 3), (1, 2), (5,), (4,), (3, 3), (2, 2), (4,)]
    for t in (made, moved, *others):
        assert t.is_meta and t.device == nbx.device("meta")
    assert made.shape == (2, 3) and moved.stride() == (1, 2)  # to() keeps strides, as elsewhere
    assert made.t().shape == (3, 2) and made.unsqueeze(0).shape == (1, 2, 3)
    with pytest.raises(RuntimeError, match="add: a meta tensor has no data"):
        made + 1
    with pytest.raises(RuntimeError, match="the meta device has no memory"):
        nbx.randperm(3, device="meta")
    with pytest.raises(RuntimeError, match=r"numpy\(\) needs data, and a meta tensor has none"):
        made.numpy()


def test_repr_of_an_empty_tensor_says_its_size_and_dtype_as_torch():
    assert repr(nbx.zeros((2, 0), device="cpu")) == "tensor([], size=(2, 0))"
    assert repr(nbx.zeros((0,), device="cpu")) == "tensor([])"
    assert repr(nbx.zeros((0,), dtype=nbx.int64, device="cpu")) == f"tensor([], dtype={nbx.int64!r})"
    expected = f"tensor([], size=(3, 0, 1), dtype={nbx.int32!r})"
    assert repr(nbx.zeros((3, 0, 1), dtype=nbx.int32, device="cpu")) == expected
    assert repr(nbx.tensor(np.zeros(2, np.int64), device="cpu")) == "tensor([0, 0])"  # made on the host: no kernel runs


def test_the_where_method_reads_self_as_the_values_where_the_condition_holds():
    x = to_nbx(np.array([1.0, -2.0, 3.0], np.float32))
    other = to_nbx(np.full(3, 9.0, np.float32))
    assert x.where(x > 0, other).tolist() == [1.0, 9.0, 3.0]  # torch: x.where(condition, other)
    assert x.where(x > 0, 0.0).tolist() == [1.0, 0.0, 3.0]
