"""PyTorch's own OpInfo sample inputs (``op_db``) run through nbxtensor's counterparts on the CPU and
compared with torch's results: shapes, dtypes (by name) and values within per-dtype tolerances, NaN
positions included. ``opinfo_deviations.yaml`` lists the ops allowed to differ: deliberate deviations and,
under ``defects``, known bugs kept visible. ``pytest -s`` prints the summary table."""
import itertools
import os
import time
import warnings
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import yaml

import nbxtensor as nbx

from .conftest import cpu_kernels

torch = pytest.importorskip("torch")

DEVIATIONS = yaml.safe_load((Path(__file__).parent / "opinfo_deviations.yaml").read_text())

DTYPES = (torch.float32, torch.int64, torch.bool, torch.bfloat16)
SAMPLES_PER_DTYPE = 3
# Samples are generated lazily; past this many looked at, an op-dtype stops even if fewer were compared.
SAMPLES_EXAMINED = 12
MAX_ELEMENTS = 4096  # the interpreter runs kernels on the host: larger samples would take minutes
# ``NBX_OPINFO_ONLY=linalg.,masked.sum`` compares only the ops whose names start so (coverage unchecked).
ONLY = tuple(prefix for prefix in os.environ.get("NBX_OPINFO_ONLY", "").split(",") if prefix)

# torch.testing's default (rtol, atol) per dtype; integers and bools compare exactly.
TOLERANCES = {"float64": (1e-7, 1e-7), "float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5),
              "bfloat16": (1.6e-2, 1e-5), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}

# OpInfo names whose counterpart has another name (the Tensor method named here).
IRREGULAR = {"__rdiv__": "__rtruediv__", "fill": "fill_"}
# OpInfos that call torch through a lambda reordering the sample's arguments: ours, reordered alike.
ADAPTERS = {
    "einsum": lambda tensors, equation: nbx.einsum(equation, tensors),
    "where": lambda self, condition, other, **kwargs: nbx.where(condition, self, other, **kwargs),
    "nn.functional.embedding": lambda weight, idx, **kwargs: nbx.nn.functional.embedding(idx, weight, **kwargs),
    "nn.functional.embedding_bag":
        lambda weight, idx, **kwargs: nbx.nn.functional.embedding_bag(idx, weight, **kwargs),
    # the samples' distance_function is torch.nn.PairwiseDistance(): ours is pairwise_distance with its settings
    "nn.functional.triplet_margin_with_distance_loss":
        lambda anchor, positive, negative, distance_function=None, **kwargs:
        nbx.nn.functional.triplet_margin_with_distance_loss(anchor, positive, negative, **kwargs, distance_function=(
            None if distance_function is None else lambda x, y: nbx.nn.functional.pairwise_distance(
                x, y, distance_function.norm, distance_function.eps, distance_function.keepdim))),
    "polygamma": lambda input, n, **kwargs: nbx.polygamma(n, input, **kwargs),
    "special.polygamma": lambda input, n, **kwargs: nbx.special.polygamma(n, input, **kwargs),
}
# OpInfo variants whose torch call is a lambda doing more than the op: ours, composed alike.
VARIANT_ADAPTERS = {
    ("linalg.pinv", "singular"): lambda a, b: nbx.linalg.pinv(a @ b.transpose(-2, -1)),
    ("linalg.lstsq", "grad_oriented"): lambda a, b, driver: nbx.linalg.lstsq(a, b, driver=driver)[:2],
}
# Eigenvectors and singular vectors are unique only up to sign. For these ops, {output index: the axis each
# vector runs along}: on both sides every such vector is flipped so that its largest-magnitude component is
# positive before the comparison.
SIGN_FREE_VECTORS = {"linalg.eigh": {1: -2}, "linalg.svd": {0: -2, 2: -1}, "svd": {0: -2, 2: -2}}


# Sampling functions, and rrelu, whose slope is drawn in torch's default (training) mode.
RANDOM = {"bernoulli", "multinomial", "normal", "uniform", "cauchy", "exponential", "geometric", "log_normal",
          "rrelu"}


def excluded_because(op):
    """Why an op is outside an inference library's conformance, or None. The rules: convolution
    (``nn.functional.conv*``: tested on their own,
    too slow interpreted), training-only (names with ``backward`` or ``with_update``: gradients and
    running-statistics updates), random-only (draws from the random stream, whose numbers differ from
    torch's: ``rand*``, ``*dropout*`` and ``RANDOM``, with or without ``nn.functional.``)."""
    bare = op.name.removeprefix("nn.functional.")
    if op.name.startswith("nn.functional.conv"):
        return "convolution"
    if "backward" in op.name or "with_update" in op.name:
        return "training-only"
    if bare.startswith("rand") or "dropout" in bare or bare in RANDOM:
        return "random-only"
    return None


def counterpart(op):
    """(how, callable) for nbxtensor's counterpart of ``op``, or None: a function of ``nbx`` under the
    OpInfo's dotted name (``nn.functional.gelu``, ``special.erfcx``, ``linalg.cross``), else a Tensor
    method or property called on the sample's input."""
    if op.name in ADAPTERS:
        return "function", ADAPTERS[op.name]
    if (op.name, op.variant_test_name) in VARIANT_ADAPTERS:
        return "function", VARIANT_ADAPTERS[op.name, op.variant_test_name]
    name = IRREGULAR.get(op.name, op.name)
    function = nbx
    for part in name.split("."):
        function = getattr(function, part, None)
    if callable(function) and not isinstance(function, (nbx.dtype, type)):
        return "function", function
    if hasattr(nbx.Tensor, name):
        return ("property" if isinstance(getattr(nbx.Tensor, name), property) else "method"), name
    return None


def _dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def to_nbx(value):
    """``value`` with its torch tensors (anywhere in lists, tuples and dicts) as nbxtensor tensors of the
    same storage size, offset and strides, so that views and ``as_strided`` see what torch's saw."""
    if isinstance(value, torch.Tensor):
        value = value.detach().resolve_conj().resolve_neg()
        extent = value.untyped_storage().nbytes() // value.element_size()
        storage = value.as_strided((extent,), (1,), 0)
        array = storage.float().numpy().astype(ml_dtypes.bfloat16) if value.dtype == torch.bfloat16 else storage.numpy()
        return nbx.tensor(array).as_strided(tuple(value.shape), value.stride(), value.storage_offset())
    if isinstance(value, torch.dtype):
        return getattr(nbx, _dtype_name(value))
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.memory_format):
        return getattr(nbx, str(value).removeprefix("torch."))
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, (list, tuple)):
        return type(value)(to_nbx(item) for item in value)
    if isinstance(value, dict):
        return {key: to_nbx(item) for key, item in value.items()}
    return value


def _largest(value):
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (list, tuple)):
        return max((_largest(item) for item in value), default=0)
    if isinstance(value, dict):
        return _largest(list(value.values()))
    return 0


def call_ours(how, target, first, args, kwargs):
    if how == "function":
        return target(first, *args, **kwargs)
    if how == "property":
        return getattr(first, target)
    return getattr(first, target)(*args, **kwargs)


def compare(ours, theirs, values=True):
    """None when ``ours`` matches torch's ``theirs``, else what differs."""
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, nbx.Tensor):
            return f"returned {type(ours).__name__}, torch a tensor"
        if tuple(ours.shape) != tuple(theirs.shape):
            return f"shape {tuple(ours.shape)} != torch's {tuple(theirs.shape)}"
        if ours.dtype.name != _dtype_name(theirs.dtype):
            return f"dtype {ours.dtype.name} != torch's {_dtype_name(theirs.dtype)}"
        if not values:
            return None
        got = ours.numpy()
        expected = (theirs.float() if theirs.dtype == torch.bfloat16 else theirs).detach().resolve_conj().numpy()
        return _compare_values(got, expected, ours.dtype.name)
    if isinstance(theirs, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(theirs):
            return f"returned {type(ours).__name__}, torch a sequence of {len(theirs)}"
        for index, (a, b) in enumerate(zip(ours, theirs)):
            problem = compare(a, b, values)
            if problem:
                return f"[{index}] {problem}"
        return None
    if isinstance(ours, nbx.Tensor) or type(ours) is not type(theirs):
        return f"returned {type(ours).__name__}, torch {type(theirs).__name__}"
    return _compare_values(np.asarray(ours), np.asarray(theirs), np.asarray(theirs).dtype.name) if values else None


def _compare_values(got, expected, dtype_name):
    if dtype_name not in TOLERANCES:
        if not np.array_equal(got, expected):
            return f"values differ at {int(np.sum(got != expected))} of {got.size} elements"
        return None
    rtol, atol = TOLERANCES[dtype_name]
    wide = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(expected) else np.float64
    got, expected = got.astype(wide), expected.astype(wide)
    close = np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    worst = np.nanmax(np.abs(got - expected)[~close]) if np.isfinite(got[~close]).any() else np.nan
    return f"values differ at {int((~close).sum())} of {got.size} elements (max abs error {worst:.3g})"


def run_op(op, how, target):
    """Compare every affordable sample of ``op`` (up to SAMPLES_PER_DTYPE per dtype); returns
    (compared, matched, {dtype name: its first problem})."""
    compared = matched = 0
    problems = {}
    for dtype in (d for d in DTYPES if d in op.supported_dtypes("cpu")):
        taken = 0
        for sample in itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), SAMPLES_EXAMINED):
            if taken == SAMPLES_PER_DTYPE:
                break
            if _largest([sample.input, sample.args, sample.kwargs]) > MAX_ELEMENTS:
                continue
            taken += 1
            mismatch = _run_sample(op, how, target, sample)
            compared += 1
            if mismatch is None:
                matched += 1
            else:
                problems.setdefault(_dtype_name(dtype), mismatch)
    return compared, matched, problems


def _run_sample(op, how, target, sample):
    # converted first: a torch op that writes into its operands must not change what ours receives
    ours_in = to_nbx([sample.input, sample.args, sample.kwargs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            theirs = op(sample.input, *sample.args, **sample.kwargs)
        except Exception as error:
            theirs = error
        try:
            ours = call_ours(how, target, *ours_in)
        except Exception as error:
            if isinstance(theirs, Exception):
                return None
            return f"raised {type(error).__name__}: {str(error).splitlines()[0][:120] if str(error) else ''}"
    if isinstance(theirs, Exception):
        return f"returned where torch raised {type(theirs).__name__}"
    if op.name in SIGN_FREE_VECTORS and isinstance(ours, tuple) and len(ours) == len(theirs):
        ours, theirs = _signs_fixed(ours, theirs, SIGN_FREE_VECTORS[op.name])
    # the empty family's results are uninitialised memory: only shapes and dtypes compare
    return compare(ours, theirs, values=not op.has_nondeterministic_output)


def _sign_canonical(array, axis):
    """``array`` with each vector along ``axis`` flipped so that its largest-magnitude component is positive."""
    if array.size == 0:
        return array
    largest = np.take_along_axis(array, np.abs(array).argmax(axis=axis, keepdims=True), axis=axis)
    return array * np.where(largest < 0, -1, 1).astype(array.dtype)


def _signs_fixed(ours, theirs, axes):
    """(ours, theirs) as lists, their outputs at ``axes``' indices in ``_sign_canonical`` form."""
    ours, theirs = list(ours), list(theirs)
    for index, axis in axes.items():
        if isinstance(ours[index], nbx.Tensor) and isinstance(theirs[index], torch.Tensor):
            ours[index] = nbx.tensor(_sign_canonical(ours[index].numpy(), axis))
            theirs[index] = torch.from_numpy(_sign_canonical(theirs[index].numpy(), axis))
    return ours, theirs


def _op_db():
    """torch's op_db, imported in the test rather than at collection (4 s, in every pytest worker)."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as error:  # a private module: missing helpers (expecttest) or an API change skip
        pytest.skip(f"torch's op_db is not importable: {error!r}")
    return op_db


def _names(op_db):
    return sorted({op.name for op in op_db if not ONLY or op.name.startswith(ONLY)})


# op names are dealt round-robin to this many tests, so that pytest-xdist spreads the interpreted samples
SHARDS = 8


@cpu_kernels
@pytest.mark.parametrize("shard", range(SHARDS))
def test_opinfo_samples_match_torch(shard):
    op_db = _op_db()
    mine = set(_names(op_db)[shard::SHARDS])
    listed = {**DEVIATIONS["deviations"], **DEVIATIONS["defects"]}
    results = {}
    for op in op_db:
        if op.name not in mine or excluded_because(op):
            continue
        found = counterpart(op)
        if found is None:
            results.setdefault(op.name, None)
            continue
        start = time.perf_counter()
        compared, matched, problems = run_op(op, *found)
        seconds = time.perf_counter() - start
        previous = results.get(op.name) or (0, 0, {}, 0.0)
        results[op.name] = (previous[0] + compared, previous[1] + matched, {**problems, **previous[2]},
                            previous[3] + seconds)

    covered = {name: result for name, result in results.items() if result is not None}
    compared = {name: result for name, result in covered.items() if result[0]}
    failing = {name: result[2] for name, result in compared.items() if result[2]}
    samples, matches = sum(r[0] for r in covered.values()), sum(r[1] for r in covered.values())
    print(f"\nshard {shard} of {SHARDS}: {len(mine)} op_db names, with a counterpart {len(covered)}, compared"
          f" {len(compared)}, matching torch {len(compared) - len(failing)};"
          f" samples matched {matches}/{samples}")
    for name in sorted(failing):
        label = "defect" if name in DEVIATIONS["defects"] else "deviation" if name in listed else "FAIL"
        count = covered[name]
        for dtype, problem in failing[name].items():
            print(f"  {label:9} {name:45} {count[1]}/{count[0]}  {dtype}: {problem}")
    slowest = sorted(covered.items(), key=lambda item: -item[1][3])[:5]
    print("  slowest:", ", ".join(f"{name} {result[3]:.1f}s" for name, result in slowest))

    # a listing covers the dtypes it names: the op differing in another one is a new failure
    unexpected = {f"{name} {dtype}": problem for name, problems in failing.items()
                  for dtype, problem in problems.items() if dtype not in listed.get(name, {}).get("dtypes", ())}
    assert not unexpected, f"ops differing from torch, not listed in opinfo_deviations.yaml: {unexpected}"
    stale = sorted(name for name in listed if name in covered and name not in failing)
    assert not stale, f"listed in opinfo_deviations.yaml but matching torch now (remove them): {stale}"
    # test_opinfo_coverage counts every op with a counterpart as compared unless listed as uncompared
    uncompared = set(covered) - set(compared)
    unlisted = sorted(uncompared - set(DEVIATIONS["uncompared"]))
    assert not unlisted, f"no OpInfo sample compared, not listed under uncompared: {unlisted}"
    stale = sorted(name for name in DEVIATIONS["uncompared"] if name in compared)
    assert not stale, f"listed under uncompared in opinfo_deviations.yaml but compared now (remove them): {stale}"


def test_opinfo_coverage():
    """The share of op_db names (less those excluded) that pass, counted without running them: the shards
    above prove that every op with a counterpart compares samples (unless listed as uncompared) and differs
    from torch only as listed, so the passing ones are those with a counterpart, less the uncompared and the
    defects."""
    if ONLY:
        pytest.skip("NBX_OPINFO_ONLY compares a subset: coverage is unchecked")
    op_db = _op_db()
    excluded = {op.name: reason for op in op_db if (reason := excluded_because(op))}
    names = set(_names(op_db)) - set(excluded)
    covered = {op.name for op in op_db if op.name in names and counterpart(op) is not None}
    passing = covered - set(DEVIATIONS["uncompared"]) - set(DEVIATIONS["defects"])
    coverage = len(passing) / len(names)
    print(f"\nop_db names {len(names) + len(excluded)}; excluded {len(excluded)}"
          f" ({dict(Counter(excluded.values()))}); with a counterpart {len(covered)} of {len(names)};"
          f" passing {len(passing)} (coverage {coverage:.3f}); without one: {', '.join(sorted(names - covered))}")
    assert coverage >= DEVIATIONS["coverage_floor"], (
        f"coverage (ops passing) fell to {coverage:.3f} below {DEVIATIONS['coverage_floor']}")
