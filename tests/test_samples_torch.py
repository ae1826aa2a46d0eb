"""Every registry op's samples (``nbxtensor/ops/samples.py``) run by torch and compared with ours: shapes,
dtypes by name, and values (NaN positions included) within the result dtype's tolerance. torch's op is
its public function, Tensor method or ATen overload (``_torch_function``)."""
import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.graph import calling
from nbxtensor.ops import registry
from nbxtensor.tensor import Tensor

from .conftest import cpu_kernels
from .sample_inputs import TOLERANCES, arguments, ops_with_samples, outputs, split

torch = pytest.importorskip("torch")

SAMPLED = ops_with_samples()


def _functional_names(op) -> list:
    """The names under which ``nbx.nn.functional`` holds ``op``."""
    bound = (op.impl, registry.public_function(op))
    return [name for name in dir(nbx.nn.functional) if getattr(nbx.nn.functional, name) in bound]


def _torch_function(op):
    """torch's counterpart of ``op``, or None: the ``torch.nn.functional`` function of the name nbxtensor's
    ``nn.functional`` gives it, else its Tensor method (called on the first argument), else its function
    under one of its names in torch (``torch.linalg.vector_norm``, ``torch.special.erfcx``), else the ATen
    overload packet it implements."""
    for name in _functional_names(op):
        function = _find(torch.nn.functional, name)
        if function is not None:
            return function
    for name in op.methods:
        if callable(getattr(torch.Tensor, name, None)):
            return _method(name)
    for root in (torch, torch.special):
        for name in (*op.api, op.name):
            function = _find(root, name)
            if function is not None:
                return function
    if op.name.startswith("signal_windows_"):  # nbx.signal.windows' functions, registered under ATen-style names
        return _find(torch.signal.windows, op.name.removeprefix("signal_windows_"))
    for name in op.aten:
        namespace, _, overload = name.partition("::")
        if namespace == "aten" and calling.adapter(name) is None:
            packet = getattr(torch.ops.aten, overload.split(".")[0], None)
            if packet is not None:
                return packet
    return None


def _find(root, dotted):
    function = root
    for part in dotted.split("."):
        function = getattr(function, part, None)
    return function if callable(function) and not isinstance(function, type) else None


def _method(name):
    def call(self, *args, **kwargs):
        if not isinstance(self, torch.Tensor):
            raise TypeError(f"torch's Tensor.{name} is called on a tensor, not on {type(self).__name__}")
        return getattr(self, name)(*args, **kwargs)
    return call


def _to_torch(value):
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        array = np.asarray(value)
        if array.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
        return torch.from_numpy(array.copy())
    if isinstance(value, nbx.dtype):
        return getattr(torch, value.name)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value)
    return value


def _from_torch(value):
    if value.dtype == torch.bfloat16:
        return value.float().numpy().astype(ml_dtypes.bfloat16)
    return value.resolve_conj().numpy()


def _compare(ours, theirs, where, values):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, Tensor), f"{where}: ours is {type(ours).__name__}, torch's a tensor"
        assert tuple(ours.shape) == tuple(theirs.shape), f"{where}: shape {tuple(ours.shape)}, torch's {tuple(theirs.shape)}"
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), \
            f"{where}: dtype {ours.dtype.name}, torch's {theirs.dtype}"
        if not values:
            return
        got, expected = np.asarray(ours.cpu().numpy()), _from_torch(theirs)
        if ours.dtype.name in TOLERANCES:
            rtol, atol = TOLERANCES[ours.dtype.name]
            kind = np.complex128 if ours.dtype.is_complex else np.float64
            np.testing.assert_allclose(got.astype(kind), expected.astype(kind), rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=where)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=where)
    elif values:
        assert ours == theirs, f"{where}: {ours!r}, torch's {theirs!r}"


@cpu_kernels
@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's deprecations of its own functions, and 0-dof notes
@pytest.mark.parametrize("op", SAMPLED, ids=lambda op: op.name)
def test_op_samples_match_torch(op):
    function = _torch_function(op)
    if function is None:
        pytest.skip(f"torch has no counterpart of {op.name}")
    compared = 0
    for index, sample in enumerate(registry.samples_of(op).cases):
        where = f"{op.name} sample {index}"
        numpy_args, numpy_kwargs, args, kwargs = split(arguments(sample, op.name, index))
        try:
            theirs = outputs(function(*_to_torch(numpy_args), **{k: _to_torch(v) for k, v in numpy_kwargs.items()}))
        except (RuntimeError, TypeError, NotImplementedError) as error:
            refusal = error  # torch refuses this sample (a dtype its CPU kernels lack): nothing to compare with
            continue
        ours = outputs(op.impl(*args, **kwargs))
        assert len(ours) == len(theirs), f"{where}: {len(ours)} results, torch's {len(theirs)}"
        for got, expected in zip(ours, theirs):
            _compare(got, expected, where, sample.compare == "values")
        compared += 1
    if not compared:
        pytest.skip(f"torch refuses every sample of {op.name}: {refusal}")
