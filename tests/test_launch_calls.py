"""Call-level plans bound to their launchers (``plans.LaunchCall``): once a layout's launches are compiled
and bound, a repeated reduction, softmax, scan, sort or top-k goes from its plan key straight to the bound
launchers, with the launches the general path makes. The CPU backend stands in for a compiling one
(``test_pointwise_plans.bound_launches``): nothing runs, every launch is recorded."""
import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.launch as L
from nbxtensor import allocation
from nbxtensor.ops import normalization, plans, pooling, reductions, resample, sorting
from tests.test_pointwise_plans import bound_launches  # noqa: F401 (a fixture)

F = nbx.nn.functional


def _host(shape, dtype=np.float32, seed=0):
    """A CPU tensor: the stand-in launcher serves the CPU backend, whatever the test device."""
    return nbx.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), device="cpu")


def _outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


def _same_launches(general, bound, general_outputs, bound_outputs):
    """Whether two calls' recorded launches agree but for their fresh memory: an output's address where
    the other call has its own output's, and the workspace's pieces shifted by one distance throughout
    (the pieces of a call's one workspace buffer keep their offsets)."""
    if len(general) != len(bound):
        return False
    outputs = {g.data_ptr(): b.data_ptr() for g, b in zip(general_outputs, bound_outputs)}
    shifts = set()
    for first, second in zip(general, bound):
        if len(first) != len(second):
            return False
        for g, b in zip(first, second):
            if g == b:
                continue
            if g in outputs:
                if outputs[g] != b:
                    return False
            else:
                shifts.add(b - g)
    return len(shifts) <= 1


# (name, call, its input): one- and several-launch plans, one and two outputs, with and without workspace
# (the CPU facts split a reduced row past 262144, a softmax row past 16384 and a cumsum row past 4096;
# top-k of a row past 4096 selects in several launches)
CALLS = [
    ("x.sum(dim=-1)", lambda x: x.sum(dim=-1), (4, 32)),
    ("x.sum(-1)", lambda x: x.sum(-1), (4, 32)),
    ("nbx.sum(x, -1)", lambda x: nbx.sum(x, -1), (4, 32)),
    ("mean over two dims", lambda x: x.mean((1, 2)), (2, 4, 8)),
    ("amax", lambda x: nbx.amax(x, -1), (4, 32)),
    ("argmax", lambda x: x.argmax(-1), (4, 32)),
    ("max over a dim", lambda x: x.max(-1), (4, 32)),
    ("argmax of a long row", lambda x: x.argmax(-1), (1, 300000)),
    ("aminmax", lambda x: nbx.aminmax(x, dim=-1), (4, 32)),
    ("var", lambda x: x.var(-1), (4, 32)),
    ("std_mean", lambda x: nbx.std_mean(x, (0, 1)), (2, 4, 8)),
    ("vector_norm", lambda x: nbx.linalg.vector_norm(x, 3, -1), (4, 32)),
    ("logsumexp", lambda x: x.logsumexp(-1), (4, 32)),
    ("any", lambda x: x.any(-1), (4, 32)),
    ("count_nonzero", lambda x: nbx.count_nonzero(x, -1), (4, 32)),
    ("cummax", lambda x: x.cummax(-1), (4, 32)),
    ("nbx.softmax", lambda x: nbx.softmax(x, -1), (4, 32)),
    ("x.softmax", lambda x: x.softmax(-1), (4, 32)),
    ("F.softmax", lambda x: F.softmax(x, -1), (4, 32)),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-1), (4, 32)),
    ("softmax of long rows", lambda x: nbx.softmax(x, -1), (2, 20000)),
    ("cumsum", lambda x: nbx.cumsum(x, -1), (4, 32)),
    ("cumsum of long rows", lambda x: x.cumsum(-1), (2, 8192)),
    ("sort", lambda x: nbx.sort(x), (4, 32)),
    ("topk", lambda x: nbx.topk(x, 3), (2, 4, 32)),
    ("topk of long rows", lambda x: x.topk(5), (2, 8192)),
    ("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1), (1, 2, 8, 8)),
    ("max_pool2d with indices", lambda x: F.max_pool2d(x, 2, return_indices=True), (1, 2, 8, 8)),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 3), (2, 3, 9)),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 1), (2, 3, 5, 5)),
    ("interpolate nearest", lambda x: F.interpolate(x, scale_factor=2.0), (1, 2, 4, 4)),
    ("interpolate bilinear", lambda x: F.interpolate(x, size=[7, 5], mode="bilinear"), (1, 2, 4, 4)),
    ("interpolate antialiased", lambda x: F.interpolate(x, size=(2, 3), mode="bicubic", antialias=True), (1, 2, 6, 6)),
    ("upsample_nearest1d", lambda x: nbx.ops.registry.get("upsample_nearest1d").impl(x, [6], None), (1, 2, 3)),
]


@pytest.mark.parametrize("name,call,shape", CALLS, ids=[c[0] for c in CALLS])
def test_a_repeated_call_goes_straight_to_its_bound_launchers(bound_launches, monkeypatch, name, call, shape):
    """The first call plans, launches and binds; a later call of the same layout neither plans (no meta
    rule, no checks) nor takes the general launch path, and issues the general path's launches, on its
    own input and fresh outputs. Inside a capture the general path records every launch."""
    x = _host(shape)
    call(x)
    y = _host(shape, seed=1)
    with L.capture() as recorded:
        general = _outputs(call(y))
    general_launches = bound_launches[-len(recorded.launches):]
    assert len(recorded.launches) >= 1

    def refused(*args, **kwargs):
        raise AssertionError("a bound call planned again or took the general launch path")
    for owner, function in [(plans.PlannedLaunch, "__call__"), (plans.PlannedLaunch, "launch"),
                            (plans, "launch_slots"), (L, "launch_planned"), (reductions, "_plan_reduce"),
                            (reductions, "_simple_result"), (reductions, "reduced_dims"), (reductions, "_plan_scan"),
                            (normalization, "_plan_softmax"), (normalization, "_softmax_result"),
                            (sorting, "_plan_select"), (sorting, "_rows"), (pooling, "_plan"),
                            (pooling, "_window_args"), (resample, "_plan"), (resample, "_interpolate_plan")]:
        monkeypatch.setattr(owner, function, refused)
    before = len(bound_launches)
    bound = _outputs(call(y))
    made = bound_launches[before:]
    assert y.data_ptr() in made[0][1:] and _same_launches(general_launches, made, general, bound), name
    assert [(t.shape, t.stride(), t.dtype) for t in bound] == [(t.shape, t.stride(), t.dtype) for t in general]
    assert type(call(y)) is type(call(x))


def test_a_bound_call_gives_the_general_path_what_it_cannot_launch(bound_launches):
    """An input off Triton's 16-byte alignment is reduced in place by the general path (a softmax row from an
    aligned copy); aligned inputs of the layout keep the bound call."""
    big = _host(33 * 32)
    aligned, shifted = big[:32 * 32].reshape(32, 32), big[1:32 * 32 + 1].reshape(32, 32)
    for _ in range(2):
        aligned.sum(-1)
    shifted.sum(-1)
    assert shifted.data_ptr() % 16 and shifted.data_ptr() in bound_launches[-1][1:]
    for _ in range(2):
        aligned.softmax(-1)
    shifted.softmax(-1)
    assert shifted.data_ptr() not in bound_launches[-1][1:]
    aligned.sum(-1)
    assert aligned.data_ptr() in bound_launches[-1][1:]


def test_a_bound_call_launches_on_the_current_stream_into_the_arena(bound_launches, monkeypatch):
    """The stream is read at every call, and an output a graph's arena places is launched on at its own
    address."""
    from nbxtensor.device import backend_for
    x = _host((4, 32))
    stream = [0]
    monkeypatch.setattr(type(backend_for(x.device)), "current_stream_handle", lambda self, index=None: stream[0])
    for _ in range(2):
        x.sum(-1)
        nbx.topk(x, 3)
    stream[0] = 7
    nbx.topk(x, 3)
    assert bound_launches[-1][0] == 7
    arena = _host(64)
    monkeypatch.setattr(allocation, "arena_service",
                        lambda shape, strides, dtype, dev, nbytes, scratch: arena[16:20])
    out = x.sum(-1)
    assert out.data_ptr() == arena.data_ptr() + 64 and out.data_ptr() in bound_launches[-1][1:]
