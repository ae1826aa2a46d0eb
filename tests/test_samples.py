"""Generic tests of every registry op, derived from the samples it declares (``nbxtensor/ops/samples.py``):
the meta rule gives the implementation's shapes and dtypes, the cost rule is sane, the in-place and
``out=`` variants agree with the functional form, a one-op graph saved and loaded runs it alike, and its
result matches the NumPy float64 reference it declares."""
import inspect
import json

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import graph
from nbxtensor.graph import calling
from nbxtensor.graph.format import encode_float
from nbxtensor.ops import registry
from nbxtensor.ops.registry import Cost, TensorMeta
from nbxtensor.tensor import Tensor

from .conftest import TEST_DEVICE, cpu_kernels, storage_start
from .sample_inputs import TOLERANCES, arguments, as_float64, ops_with_samples, outputs, split

SAMPLED = ops_with_samples()


def test_every_op_has_samples():
    missing = sorted(op.name for op in registry.all_ops() if registry.samples_of(op) is None)
    assert not missing, f"{len(missing)} registry ops declare no samples: {', '.join(missing)}"


def _metadata(value):
    """``value`` with its tensors as bare metadata, as the graph hands them to meta and cost rules."""
    if isinstance(value, Tensor):
        return TensorMeta(tuple(value.shape), value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_metadata(v) for v in value)
    return value


def _host(value):
    if isinstance(value, Tensor):
        return np.asarray(value.cpu().numpy())
    return np.asarray(value)


def _same(got, expected, dtype_name, what):
    """Bits equal (NaN equal to NaN) for tensors of one computation run twice."""
    got, expected = _host(got), _host(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if got.dtype.kind in "fc" or dtype_name in TOLERANCES:
        np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64), err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def _close_to_reference(got: Tensor, expected, what):
    name = got.dtype.name
    got = _host(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, the reference's {expected.shape}"
    if name in TOLERANCES:
        rtol, atol = TOLERANCES[name]
        # the reference is rounded to the result's dtype first: a result rounds once, correctly or not
        with np.errstate(over="ignore"):  # past the dtype's range the rounded reference is inf, as the result
            rounded = expected.astype(got.dtype).astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        np.testing.assert_allclose(got.astype(rounded.dtype), rounded, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype), err_msg=what)


def _check_meta_and_cost(op, tensor_args, tensor_kwargs, results, where):
    meta_args, meta_kwargs = _metadata(tensor_args), _metadata(tensor_kwargs)
    described = op.meta(*meta_args, **meta_kwargs)
    # an op returning nothing writes its operands in place; its meta rule returns nothing too
    assert (described is None) == (len(results) == 1 and results[0] is None), \
        f"{where}: the meta rule returns {described!r}, the implementation {results}"
    metas = [] if described is None else outputs(described)
    tensors = [r for r in results if isinstance(r, Tensor)]
    # a size the meta rule leaves None is one the values decide (repeat counts, the largest class index)
    assert not tensors or [(tuple(t if m is None else m for m, t in zip(meta.shape, tensor.shape)), meta.dtype)
            for meta, tensor in zip(metas, tensors)] == [(tuple(t.shape), t.dtype) for t in tensors] \
        and len(metas) == len(tensors), f"{where}: the meta rule's outputs {metas} differ from the implementation's"
    cost = op.cost(*meta_args, **meta_kwargs)
    assert isinstance(cost, Cost), f"{where}: the cost rule returns {type(cost).__name__}"
    for field in ("flops", "bytes_read", "bytes_written", "workspace"):
        value = getattr(cost, field)
        assert isinstance(value, int) and not isinstance(value, bool) and value >= 0, \
            f"{where}: cost {field} = {value!r}, not a non-negative int"
    # a view's rule sees no strides, so cannot know when a reshape copies; sizes decided by values are unknown;
    # an empty tensor is allocated, never written
    if op.family != "view" and "empty" not in op.name and not any(None in tuple(m.shape) for m in metas):
        inputs = {storage_start(t) for t in tensor_args if isinstance(t, Tensor)}
        written = sum(t.numel() * t.element_size() for t in tensors if storage_start(t) not in inputs)
        assert cost.bytes_written >= written, \
            f"{where}: the cost rule writes {cost.bytes_written} bytes, the outputs take {written}"
    return metas


def _inplace_variant(op):
    if op.name.endswith("_"):
        return None
    try:
        return registry.get(op.name + "_")
    except KeyError:
        return None


def _check_variants(op, sample_index, sample, results, where):
    """The in-place variant on a copy of the first operand and the ``out=`` form give the functional result."""
    first = results[0]
    if not isinstance(first, Tensor) or len(results) != 1:
        return
    inplace = _inplace_variant(op)
    if inplace is not None:
        _, _, args, kwargs = split(arguments(sample, op.name, sample_index))
        if isinstance(args[0], Tensor) and args[0].dtype == first.dtype and tuple(args[0].shape) == tuple(first.shape):
            target = args[0].clone()
            returned = inplace.impl(target, *args[1:], **kwargs)
            assert returned is target, f"{where}: {inplace.name} returns another tensor than its input"
            _same(target, first, first.dtype.name, f"{where}: {inplace.name}")
    if "out" in inspect.signature(op.impl).parameters:
        _, _, args, kwargs = split(arguments(sample, op.name, sample_index))
        out = nbx.empty(tuple(first.shape), dtype=first.dtype, device=TEST_DEVICE)
        returned = op.impl(*args, **kwargs, out=out)
        assert returned is out, f"{where}: out= returns another tensor than out"
        _same(out, first, first.dtype.name, f"{where}: out=")


def _encode(value, tensors: dict):
    if isinstance(value, Tensor):
        name = f"input::a{len(tensors)}"
        tensors[name] = value
        return {"tensor": name}
    if isinstance(value, (list, tuple)):
        return [_encode(v, tensors) for v in value]
    if isinstance(value, nbx.dtype):
        return {"dtype": value.name}
    if isinstance(value, float):
        return encode_float(value)
    return value


def _encodable(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(map(_encodable, value))
    return value is None or isinstance(value, (Tensor, bool, int, float, str, nbx.dtype))


def _graph_overload(op):
    """An ATen overload of ``op`` that a graph can name with the op's own arguments: none where the op has
    no ATen name (nbx's own ops run in graphs under ``nbx::`` names too) or each needs an adapter."""
    for name in op.aten:
        if calling.adapter(name) is None and not name.endswith("out"):
            return name
    return None


def _check_graph_round_trip(op, sample, sample_index, results, directory, where):
    overload = _graph_overload(op)
    if overload is None or calling.placed(op):
        return
    _, _, args, kwargs = split(arguments(sample, op.name, sample_index))
    if not all(map(_encodable, [*args, *kwargs.values()])):
        return  # an argument a graph file cannot hold (a quantized weight lives in the weights file)
    tensors: dict = {}
    encoded_args = [_encode(a, tensors) for a in args]
    encoded_kwargs = {k: _encode(v, tensors) for k, v in kwargs.items()}
    made = [r for r in results if isinstance(r, Tensor)]
    if len(made) != len(results):
        return
    ran = _run_one_op_graph(directory, overload, tensors, encoded_args, encoded_kwargs, made)
    for got, expected in zip(ran, made):
        _same(got, expected, expected.dtype.name, f"{where}: the graph's run of {overload}")


def _run_one_op_graph(directory, overload, tensors, encoded_args, encoded_kwargs, made):
    """The outputs of a graph of one step, ``overload`` on its encoded arguments, saved and loaded."""
    names = [f"out{i}" for i in range(len(made))]
    document = {
        "format": "nbxtensor.graph", "version": 1, "symbols": {}, "inputs": list(tensors), "outputs": names,
        "tensors": {**{n: {"shape": list(t.shape), "dtype": t.dtype.name} for n, t in tensors.items()},
                    **{n: {"shape": list(t.shape), "dtype": t.dtype.name} for n, t in zip(names, made)}},
        "ops": [{"id": "step", "op": overload, "args": encoded_args, "kwargs": encoded_kwargs, "outputs": names}],
    }
    (directory / "graph.json").write_text(json.dumps(document))
    model = graph.load(str(directory), device=TEST_DEVICE)
    return outputs(model(*[t.contiguous() for t in tensors.values()]))


@cpu_kernels
def test_graph_runs_polygamma_in_place_in_aten_argument_order(tmp_path):
    x = nbx.tensor(np.array([0.5, 1.5, 3.0], np.float32), device=TEST_DEVICE)
    expected = nbx.polygamma(1, x)
    tensors = {}
    got, = _run_one_op_graph(tmp_path, "aten::polygamma_.default", tensors, [_encode(x, tensors), 1], {}, [expected])
    _same(got, expected, "float32", "polygamma_ in a graph")


def test_inplace_comparison_meta_is_the_inputs_dtype():
    x = TensorMeta((3,), nbx.float32)
    assert registry.get("eq_").meta(x, x) == TensorMeta((3,), nbx.float32)
    assert registry.get("logical_not_").meta(x) == TensorMeta((3,), nbx.float32)



def test_max_over_everything_costs_its_one_result():
    x = TensorMeta((2, 3), nbx.float32)
    assert registry.get("max").cost(x).bytes_written == 4
    assert registry.get("min").cost(x).bytes_read == 24


def test_rules_take_one_tensors_metadata_for_a_tensor():
    x = TensorMeta((2, 3), nbx.float32)
    assert registry.get("atleast_3d").meta(x) == TensorMeta((2, 3, 1), nbx.float32)
    assert registry.get("t_copy").cost(x).bytes_written == 24
    assert registry.get("broadcast_tensors").meta(x) == (x,)



def test_take_along_dim_meta_is_the_indices_shape_broadcast():
    x, indices = TensorMeta((2, 3), nbx.float32), TensorMeta((1, 2), nbx.int64)
    assert registry.get("take_along_dim").meta(x, indices, 1) == TensorMeta((2, 2), nbx.float32)

@cpu_kernels
@pytest.mark.parametrize("op", SAMPLED, ids=lambda op: op.name)
def test_op_samples(op, tmp_path):
    declared = registry.samples_of(op)
    assert declared.cases, f"{op.name} declares an empty sample list"
    round_tripped = False
    for index, sample in enumerate(declared.cases):
        where = f"{op.name} sample {index}"
        numpy_args, numpy_kwargs, args, kwargs = split(arguments(sample, op.name, index))
        if calling.placed(op):  # an op making tensors from nothing is told where
            kwargs.setdefault("device", TEST_DEVICE)
        returned = op.impl(*args, **kwargs)
        results = outputs(returned)
        # a graph step's outputs are the op's results, each one tensor
        nested = isinstance(returned, (tuple, list)) and any(isinstance(r, (tuple, list)) for r in returned)
        metas = _check_meta_and_cost(op, args, kwargs, results, where)
        if sample.compare == "values":
            _check_variants(op, index, sample, results, where)
            # a graph plans its memory from sizes known before the run
            if not round_tripped and not nested and not any(None in tuple(m.shape) for m in metas):
                _check_graph_round_trip(op, sample, index, results, tmp_path, where)
                round_tripped = True
            if declared.reference is not None:
                with np.errstate(all="ignore"):
                    expected = outputs(declared.reference(*as_float64(numpy_args), **as_float64(numpy_kwargs)))
                assert len(expected) == len(results), f"{where}: the reference gives {len(expected)} results"
                for got, want in zip(results, expected):
                    _close_to_reference(got, want, where)
