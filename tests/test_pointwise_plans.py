"""The pointwise engine's per-call plans: a repeated call reuses its plan, and a plan never stands for
a call whose metadata differs (shapes, strides, dtypes, devices, scalar types, out and in-place forms,
the default dtype), while whatever depends on values is still checked on every call."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import pointwise, pointwise_table
from nbxtensor.ops.plans import clear_all, positional_key
from tests.conftest import to_nbx


@pytest.fixture
def plan_builds(monkeypatch):
    """Counts plan constructions (cache misses) from here on."""
    count = [0]
    build = pointwise._build_call_plan

    def counting(*args, **kwargs):
        count[0] += 1
        return build(*args, **kwargs)

    monkeypatch.setattr(pointwise, "_build_call_plan", counting)
    pointwise._call_plans.clear()
    return count


def test_a_repeated_call_builds_its_plan_once(plan_builds):
    a, b = to_nbx(np.arange(6, dtype=np.float32)), to_nbx(np.ones(6, np.float32))
    for _ in range(3):
        a + b
    assert plan_builds[0] == 1
    for _ in range(3):
        a.add_(b)
        a * 2.0
    assert plan_builds[0] == 3


def test_a_cached_plan_follows_the_data(plan_builds):
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_array_equal((to_nbx(x) + to_nbx(y)).numpy(), x + y)
        np.testing.assert_array_equal((to_nbx(x) * 3.5).numpy(), x * np.float32(3.5))
        signs = np.signbit((to_nbx(x) * -0.0).numpy())  # the plan of ``* 3.5``, with -0.0's own bits
        np.testing.assert_array_equal(signs, np.signbit(x * np.float32(-0.0)))
        cond = x > 0
        np.testing.assert_array_equal(nbx.where(to_nbx(cond), to_nbx(x), 7).numpy(), np.where(cond, x, 7))
    assert plan_builds[0] == 3


def test_no_plan_is_stale_when_the_metadata_changes(plan_builds):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.arange(12, dtype=np.float32).reshape(4, 3) * 10  # read transposed
    cases = [
        (lambda: to_nbx(x) + to_nbx(x), x + x),
        (lambda: to_nbx(x) + to_nbx(y).T, x + y.T),                              # strides
        (lambda: to_nbx(x) + to_nbx(x[:1]), x + x[:1]),                          # broadcast shape
        (lambda: to_nbx(x[:2]) + to_nbx(x[:2]), x[:2] + x[:2]),                  # shape
        (lambda: to_nbx(x.astype(np.int32)) + to_nbx(x), x + x),                 # dtype
        (lambda: to_nbx(x.astype(np.int32)) + 2, x.astype(np.int32) + 2),        # scalar types
        (lambda: to_nbx(x.astype(np.int32)) + 2.5, (x + 2.5).astype(np.float32)),
        (lambda: to_nbx(x.astype(np.int32)) + True, x.astype(np.int32) + 1),
        (lambda: to_nbx(x) + to_nbx(np.array(5.0, np.float64)), x + 5),          # a 0-d tensor
        (lambda: nbx.add(to_nbx(x), to_nbx(x), alpha=2), x + 2 * x),             # a kwarg changing the mode
    ]
    for _ in range(2):
        for make, expected in cases:
            got = make()
            assert got.dtype.name == np.asarray(expected).dtype.name
            np.testing.assert_array_equal(got.numpy(), expected)
    assert plan_builds[0] == len(cases)
    # the transposed operand gives the output its layout; the plain one does not
    assert (to_nbx(y).T + to_nbx(y).T).stride() == to_nbx(y).T.stride()


def test_no_plan_is_stale_across_out_inplace_and_the_default_dtype(plan_builds):
    x = np.arange(6, dtype=np.int64)
    ints = to_nbx(x)
    assert nbx.sqrt(ints).dtype is nbx.float32
    previous = nbx.get_default_dtype()
    nbx.set_default_dtype(nbx.float64)
    try:
        assert nbx.sqrt(ints).dtype is nbx.float64
    finally:
        nbx.set_default_dtype(previous)
    out = nbx.empty((6,), dtype=nbx.float64)
    assert nbx.add(ints, 1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), x + 1)
    strided_out = nbx.empty((12,), dtype=nbx.float64)[::2]
    nbx.add(ints, 2, out=strided_out)
    np.testing.assert_array_equal(strided_out.numpy(), x + 2)
    target = to_nbx(x)
    target.add_(1)
    target.add_(1)
    np.testing.assert_array_equal(target.numpy(), x + 2)
    assert (ints + 1).numpy().tolist() == (x + 1).tolist()


def test_an_empty_out_is_resized_on_every_call():
    x = to_nbx(np.arange(4, dtype=np.float32))
    for _ in range(2):
        out = nbx.empty((0,), dtype=nbx.float32)
        nbx.mul(x, 2, out=out)
        assert tuple(out.shape) == (4,)
        np.testing.assert_array_equal(out.numpy(), np.arange(4) * 2)


def test_value_checks_run_on_a_cached_plan():
    ints = to_nbx(np.arange(1, 5, dtype=np.int64))
    ints ** 5
    with pytest.raises(RuntimeError, match="negative integer powers"):
        ints ** -3
    base = to_nbx(np.arange(8, dtype=np.float32))
    base[4:8].add_(base[0:4])
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        base[2:6].add_(base[1:5])


@pytest.mark.skipif(nbx._runtime.KERNEL_MODE != nbx._runtime.INTERPRETED, reason="the CPU device's check")
def test_integer_division_by_zero_is_checked_on_a_cached_plan():
    a = nbx.tensor(np.array([4, 5], np.int64))
    a // nbx.tensor(np.array([2, 1], np.int64))
    with pytest.raises(ZeroDivisionError):
        a // nbx.tensor(np.array([2, 0], np.int64))


def test_a_plan_holds_no_tensor():
    import gc
    import weakref
    x = to_nbx(np.ones(4, np.float32))
    result = x + x
    watched = weakref.ref(result._storage)
    del result
    x + x
    gc.collect()
    assert watched() is None
    for plan in pointwise._call_plans.values():
        assert not any(isinstance(field, nbx.Tensor) for field in plan)


# ---- the tiled path: operands whose fastest dims differ ------------------------------------------

def _kernels_used():
    return {plan.launch.planned.kernel.__name__ for plan in pointwise._call_plans.values() if plan.launch is not None}


@pytest.mark.parametrize("case", ["add", "inplace", "out_transposed", "batched", "where_half", "mul_int_scalar",
                                  "addcmul_three_layouts"])
def test_tiled_launch_is_exact(case, monkeypatch):
    monkeypatch.setattr(pointwise, "DEFAULT_TILE", 16)
    pointwise._call_plans.clear()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 50)).astype(np.float32)
    b_t = rng.standard_normal((50, 37)).astype(np.float32)  # read transposed
    if case == "add":
        got, expected = to_nbx(a) + to_nbx(b_t).T, a + b_t.T
    elif case == "inplace":
        got = to_nbx(a)
        got.add_(to_nbx(b_t).T, alpha=2)
        expected = a + np.float32(2) * b_t.T
    elif case == "out_transposed":
        got = nbx.empty((50, 37), dtype=nbx.float64).T
        nbx.sub(to_nbx(a), to_nbx(a), out=got)
        nbx.mul(to_nbx(a), to_nbx(b_t).T, out=got)
        expected = (a * b_t.T).astype(np.float64)
    elif case == "batched":
        x = rng.standard_normal((3, 20, 24)).astype(np.float32)
        y = rng.standard_normal((3, 24, 20)).astype(np.float32)
        got, expected = to_nbx(x) - nbx.transpose(to_nbx(y), 1, 2) + to_nbx(np.float32(0.5)), x - y.transpose(0, 2, 1) + 0.5
    elif case == "where_half":
        cond = rng.standard_normal((50, 37)) > 0
        got = nbx.where(to_nbx(cond).T, to_nbx(a.astype(np.float16)), 1.5)
        expected = np.where(cond.T, a.astype(np.float16), np.float16(1.5))
    elif case == "mul_int_scalar":
        ints = rng.integers(-100, 100, size=(50, 37)).astype(np.int32)
        got, expected = to_nbx(ints).T * 3 + to_nbx(a.astype(np.int32)), ints.T * 3 + a.astype(np.int32)
    else:
        c = np.asfortranarray(rng.standard_normal((37, 50)).astype(np.float32))
        got = nbx.addcmul(to_nbx(a), to_nbx(b_t).T, nbx.transpose(to_nbx(c.T), 0, 1), value=0.5)
        expected = a + np.float32(0.5) * b_t.T * c
        # A compiled kernel may contract a + v*b*c into one FMA (as ATen's CUDA kernel does): each
        # element is then the exact value rounded once, which float64 carries here (the product is exact).
        fused = (a.astype(np.float64) + 0.5 * b_t.T.astype(np.float64) * c.astype(np.float64)).astype(np.float32)
    assert "pointwise_tiled" in _kernels_used()
    assert got.dtype.name == expected.dtype.name
    if case == "addcmul_three_layouts":
        assert np.all((got.numpy() == expected) | (got.numpy() == fused))
    else:
        np.testing.assert_array_equal(got.numpy(), expected)


def test_the_tiled_and_the_flat_launch_agree(monkeypatch):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((17, 33)).astype(np.float32)
    results = []
    for tile in (8, 10 ** 6):  # a tile larger than the tensor: the flat kernel
        monkeypatch.setattr(pointwise, "DEFAULT_TILE", tile)
        pointwise._call_plans.clear()
        results.append(nbx.atan2(to_nbx(a), to_nbx(b).T).numpy())
        assert ("pointwise_tiled" in _kernels_used()) == (tile == 8)
    np.testing.assert_array_equal(results[0], results[1])


class _RecordingLauncher:
    """Triton's compiled launcher as the launch path sees it; its C function records each launch as
    (stream, *the kernel's arguments)."""
    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid = launch_pdl = 0

    def __init__(self):
        self.launches = []

    def launch(self, *args):
        self.launches.append((args[3], *args[13:]))

    def bind(self, compiled, grid, values, positions):
        """A stand-in of the backend's bound launcher: a call sets the values at ``positions`` and records
        the launch as Triton's launcher does."""
        values = list(values)

        def launch(stream, *new):
            for position, value in zip(positions, new):
                values[position] = value
            self.launches.append((stream, *values))
        return launch

    def __call__(self, *args):
        raise AssertionError("launches go to the C function, not through Triton's Python wrapper")


@pytest.fixture
def bound_launches(monkeypatch):
    """The CPU backend told it compiles kernels, every kernel "compiled" already into a stand-in whose
    launches are recorded (nothing runs); returns the recorded launches."""
    import nbxtensor.launch as L
    from nbxtensor.device import backend_for

    launcher = _RecordingLauncher()

    class Compiled:
        function, packed_metadata, run = "function", "metadata", launcher

    class EverythingCompiled(dict):
        def get(self, key, default=None):
            return (Compiled, [], L._direct_launcher(Compiled))

    backend = backend_for(nbx.device("cpu"))
    monkeypatch.setattr(type(backend), "compiles_kernels", True)
    monkeypatch.setattr(type(backend), "current_stream_handle", lambda self, index=None: 0, raising=False)
    monkeypatch.setattr(type(backend), "bind_launch", lambda self, *args: launcher.bind(*args))
    monkeypatch.setattr(L, "_compiled", EverythingCompiled())
    clear_all()  # no plan or bound call made before holds another launcher
    yield launcher.launches
    clear_all()


def _host(array):
    """A CPU tensor: the stand-in launcher serves the CPU backend, whatever the test device."""
    return nbx.tensor(np.asarray(array), device="cpu")


def _row(name):
    return next(r for r in pointwise_table.TABLE if r.name == name)


def _general(name, *args):
    """The call through the general path (parse, plan, ``launch_slots``), never the bound one."""
    return pointwise._run(_row(name), args, {})


def _same_launch(first, second, out_first, out_second):
    def normalise(args, out):
        return tuple("out" if a == out.data_ptr() else a for a in args)
    return normalise(first, out_first) == normalise(second, out_second)


def test_a_bound_call_launches_exactly_what_the_general_path_does(bound_launches, monkeypatch):
    """After a call's kernel is bound, later calls with the same key go straight to the bound launcher
    with the general path's arguments: tensors by address, scalars by their bits (0.0 and -0.0 apart),
    reflected operands in their places, broadcast operands with their strides."""
    rng = np.random.default_rng(0)
    a, b, c, d = (_host(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(4))
    row = _host(rng.standard_normal(8).astype(np.float32))
    cases = [("add", lambda x, y: x + y, lambda x, y: (x, y)),
             ("mul", lambda x, y: x * 2.5, lambda x, y: (x, 2.5)),
             ("mul", lambda x, y: 2.5 * y, lambda x, y: (2.5, y)),
             ("mul", lambda x, y: x * 0.0, lambda x, y: (x, 0.0)),
             ("mul", lambda x, y: x * -0.0, lambda x, y: (x, -0.0)),
             ("sub", lambda x, y: x - row, lambda x, y: (x, row)),
             ("sub", lambda x, y: row - y, lambda x, y: (row, y))]
    binds = []
    bind = pointwise._bind_fast_call
    monkeypatch.setattr(pointwise, "_bind_fast_call", lambda *args: binds.append(bind(*args)) or binds[-1])
    fast_launches = []
    for name, fn, operands in cases:
        for _ in range(3):
            fn(a, b)  # compiles (the stand-in), binds the launch, binds the call
        bound = len(binds)
        out = fn(c, d)
        assert len(binds) == bound, f"{name}: the bound call was not taken"
        fast_launches.append(bound_launches[-1])
        general_out = _general(name, *operands(c, d))
        assert _same_launch(fast_launches[-1], bound_launches[-1], out, general_out), name
        assert out.shape == general_out.shape and out.stride() == general_out.stride()
    assert all(found is not None for found in binds)
    assert fast_launches[3] != fast_launches[4]  # x * 0.0 and x * -0.0


def test_a_bound_call_takes_each_operand_from_its_own_argument(bound_launches, monkeypatch):
    """``x + x`` is bound under a key of its own (one tensor passed twice), so a later ``a + b`` of the same
    layout reads a and b, and a later ``y + y`` takes its bound call and reads y twice; an operand off
    Triton's 16-byte alignment, a capture or a new default dtype go through the general path."""
    rng = np.random.default_rng(1)
    x, a, b, y = (_host(rng.standard_normal(32).astype(np.float32)) for _ in range(4))
    for _ in range(3):
        x + x
    a + b
    kernel_args = bound_launches[-1][1:]
    assert a.data_ptr() in kernel_args and b.data_ptr() in kernel_args
    with monkeypatch.context() as patched:
        patched.setattr(pointwise, "_run", lambda *args, **kwargs: pytest.fail("y + y took the general path"))
        doubled = y + y
    assert bound_launches[-1][1:].count(y.data_ptr()) == 2 and doubled.data_ptr() in bound_launches[-1]
    big = _host(rng.standard_normal(40).astype(np.float32))
    shifted = big[1:33]  # 4 bytes past an aligned address
    out = shifted + b
    assert shifted.data_ptr() in bound_launches[-1][1:] and out.shape == (32,)
    import nbxtensor.launch as L
    with L.capture() as recorded:
        a + b
    assert len(recorded.launches) == 1
    ia, ib = _host(np.arange(1, 9, dtype=np.int32)), _host(np.full(8, 2, np.int32))
    for _ in range(3):
        ia / ib
    nbx.set_default_dtype(nbx.float64)
    try:
        assert (ia / ib).dtype == nbx.float64
    finally:
        nbx.set_default_dtype(nbx.float32)


def test_a_bound_call_launches_on_the_current_stream(bound_launches, monkeypatch):
    """The stream is read at every call (a ``with nbx.cuda.stream(s)`` may change it between two calls)."""
    from nbxtensor.device import backend_for
    a, b = _host(np.ones(8, np.float32)), _host(np.ones(8, np.float32))
    stream = [0]
    monkeypatch.setattr(type(backend_for(a.device)), "current_stream_handle", lambda self, index=None: stream[0])
    for _ in range(3):
        a + b
    stream[0] = 7
    a + b
    assert bound_launches[-1][0] == 7


def test_a_bound_call_writes_where_a_graph_arena_puts_its_output(bound_launches, monkeypatch):
    """Inside a graph run, outputs are views into the graph's arena at an offset: the bound call launches
    on the view's address, not on the arena's start."""
    from nbxtensor import allocation
    a, b = _host(np.ones(8, np.float32)), _host(np.ones(8, np.float32))
    for _ in range(3):
        a + b
    arena = _host(np.zeros(64, np.float32))
    monkeypatch.setattr(allocation, "arena_service",
                        lambda shape, strides, dtype, dev, nbytes, scratch: arena[16:16 + 8])
    out = a + b
    assert out.data_ptr() == arena.data_ptr() + 64
    assert out.data_ptr() in bound_launches[-1][1:] and arena.data_ptr() not in bound_launches[-1][1:]


def test_tensors_of_one_layout_on_one_device_share_a_key():
    """A tensor goes into ``positional_key`` as its layout key: equal for equal shape, strides, dtype and
    device, whatever the data or the offset; different when any of them differs."""
    from nbxtensor.storage import Storage
    from nbxtensor.tensor import Tensor
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a, b = _host(x), _host(x + 1)
    big = _host(np.zeros((4, 4), np.float32))
    assert positional_key((a, b)) == positional_key((b, a)) == positional_key((a, big[1:]))
    assert positional_key((a,)) == positional_key((big[1:],))
    transposed = _host(x.reshape(4, 3)).T
    assert transposed.shape == a.shape
    other_dtype = _host(x.astype(np.float64))
    # no memory is needed for a key, so a CUDA tensor of no elements stands for one on any machine
    cuda = [Tensor._make(Storage(nbx.device("cuda", i), 0), 0, (0,), (1,), a.dtype) for i in (0, 1)]
    empty = _host(np.zeros(0, np.float32))
    keys = [positional_key((t,)) for t in (a, transposed, other_dtype, empty, *cuda)]
    assert len(set(keys)) == len(keys)
    assert positional_key((a, b)) != positional_key((a, transposed))
    assert positional_key((a, 1)) != positional_key((a, 1.0)) != positional_key((a, True))


def test_a_tensor_with_no_storage_has_no_positional_key():
    from nbxtensor.tensor import Tensor
    a = _host(np.ones(4, np.float32))
    meta = Tensor._meta((4,), nbx.float32)
    positional_key((a,))  # a's layout key is kept from here on
    assert positional_key((meta,)) is None
    assert positional_key((a, meta)) is None and positional_key((meta, a)) is None
    assert positional_key((a, 2.0, meta)) is None


def test_an_out_resized_in_place_gets_a_new_key():
    """An empty ``out`` takes the broadcast shape in place; a layout key kept from before would stand for
    the old shape."""
    a, b = to_nbx(np.ones(8, np.float32)), to_nbx(np.arange(8, dtype=np.float32))  # this runs ops: the test device
    out = to_nbx(np.zeros(0, np.float32))
    before = positional_key((out, b))
    nbx.add(a, b, out=out)
    assert out.shape == (8,)
    assert positional_key((out, b)) == positional_key((a, b)) != before
    np.testing.assert_array_equal((out * b).numpy(), (a + b).numpy() * b.numpy())


def test_layout_keys_are_never_reused_when_the_table_is_cleared(monkeypatch):
    import sys
    tensor_module = sys.modules["nbxtensor.tensor"]  # ``nbxtensor.tensor`` the attribute is the function
    monkeypatch.setattr(tensor_module, "_LAYOUTS", {})
    monkeypatch.setattr(tensor_module, "_MAX_LAYOUTS", 2)
    kept = [_host(np.zeros(n, np.float32)) for n in range(1, 6)]
    keys = [positional_key((t,)) for t in kept]  # the table is cleared twice on the way
    assert len(set(keys)) == len(keys)
    again = _host(np.ones(1, np.float32))
    assert positional_key((again,)) not in keys[1:]


def test_a_bound_call_gives_its_outputs_their_layout_key(bound_launches):
    """Outputs of a bound call come with their layout key, so a chained op does not compute it again;
    it is the key their layout has."""
    from nbxtensor.tensor import layout_key
    rng = np.random.default_rng(2)
    a, b, c = (_host(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(3))
    row = _host(rng.standard_normal(8).astype(np.int32))
    for _ in range(3):
        a + b
        a * row
    for out in (a + b, a * row):
        assert out._layout is not None
        assert out._layout == layout_key(out._shape, out._strides, out._dtype, out.device)
    assert positional_key((a + b, c)) == positional_key((a, c))


def test_a_planned_launch_of_aligned_tensors_goes_straight_to_its_launcher(bound_launches, monkeypatch):
    """``launch_slots`` keeps the bound launcher of a launch whose varying arguments are all tensors on
    16-byte addresses: a later call with aligned tensors of the same dtypes skips the specialisation;
    one with an address off 16 bytes, or another dtype, takes the general path and its own compilation."""
    import nbxtensor.launch as L
    from nbxtensor.kernels import ramp
    from nbxtensor.ops.plans import PlannedLaunch, Slot
    planned = PlannedLaunch(ramp.linear_ramp, (1,), [Slot("out"), 8, 0, 0, 0, 0],
                            dict(MODE=ramp.MODE_ARANGE.value, COMPUTE=None, COMPUTE_BITS=None, OUT_FORMAT=0, VIA_F32=False,
                                 FLOAT_TO_INT=False, INDEX_64=False, BLOCK=8))
    specialised = []
    general = L._specialised
    monkeypatch.setattr(L, "_specialised", lambda values: specialised.append(values) or general(values))
    cpu = nbx.device("cpu")
    first, second = _host(np.zeros(16, np.float32)), _host(np.zeros(16, np.float32))
    planned(cpu, {"out": first})  # "compiles" (the stand-in) and binds
    planned(cpu, {"out": first})
    taken = len(specialised)
    planned(cpu, {"out": second})
    assert len(specialised) == taken and bound_launches[-1][1] == second.data_ptr()
    shifted = first[1:]  # 4 bytes off the specialisation
    planned(cpu, {"out": shifted})
    assert len(specialised) > taken and bound_launches[-1][1] == shifted.data_ptr()
    taken = len(specialised)
    ints = _host(np.zeros(16, np.int32))
    planned(cpu, {"out": ints})
    assert len(specialised) > taken and bound_launches[-1][1] == ints.data_ptr()
    taken = len(specialised)
    planned(cpu, {"out": second})
    assert len(specialised) == taken and bound_launches[-1][1] == second.data_ptr()


def test_costly_bodies_keep_every_multiprocessor_busy_on_small_tensors(monkeypatch):
    """A costly body (gelu, erf) takes the heavy block only where every multiprocessor still gets two programs;
    a smaller tensor halves it down to MIN_HEAVY_BLOCK (64 x 3072 made 48 programs of 4096 for 132 SMs). Cheap
    bodies and the interpreter keep the plain block."""
    from nbxtensor import launch
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops import pointwise
    monkeypatch.setattr(launch, "multiprocessors", lambda dev: 132)
    hopper = load_facts("hopper")["kernels"]
    assert pointwise._block(hopper, True, 64 * 3072, None) == 512
    assert pointwise._block(hopper, True, 4096 * 4096, None) == hopper["elementwise_block_heavy"]
    assert pointwise._block(hopper, True, 1000, None) == pointwise.MIN_HEAVY_BLOCK
    assert pointwise._block(hopper, False, 64 * 3072, None) == hopper["elementwise_block"]
    cpu = load_facts("cpu")["kernels"]
    assert pointwise._block(cpu, True, 1000, None) == cpu["elementwise_block"]


def test_a_bound_split_reduction_takes_its_streams_arrival_counters(bound_launches, monkeypatch, set_kernel_facts):
    """A split column sum binds with its arrival counters: a bound call passes those of the stream it
    launches on (each stream has its own), as the general path does, in one launch."""
    from nbxtensor import allocation
    from nbxtensor.device import backend_for
    from nbxtensor.ops import plans
    set_kernel_facts(reduction_column_split_length=16, reduction_split_min=16, reduction_split_block=256)
    clear_all()
    x = _host(np.ones((150, 40), np.float32))
    stream = [0]
    monkeypatch.setattr(type(backend_for(x.device)), "current_stream_handle", lambda self, index=None: stream[0])
    for _ in range(3):
        x.sum(0)
    monkeypatch.setattr(plans, "run_launches", lambda *args: pytest.fail("the general path was taken"))
    for handle in (0, 5):
        stream[0] = handle
        before = len(bound_launches)
        x.sum(0)
        assert len(bound_launches) == before + 1
        launched = bound_launches[-1]
        assert launched[0] == handle
        assert allocation.arrival_counters(x.device, handle).data_ptr() in launched[1:]
    assert allocation.arrival_counters(x.device, 0) is not allocation.arrival_counters(x.device, 5)
