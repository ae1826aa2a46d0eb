"""The ``_nbx_cuda_launch`` extension without a GPU: a ctypes function with cuLaunchKernelEx's signature
stands in for the driver and records the launch configuration and the parameter bytes it is handed.
Also the mapping of Triton signatures onto flat kernel parameters."""
import ctypes
import math
import os
import shutil
import struct
import sys
from types import SimpleNamespace

import pytest

from nbxtensor.device import cuda_launcher
from tests.conftest import TEST_DEVICE

if not (os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")):
    pytest.skip("no C compiler (gcc, clang or $CC) to build the _nbx_cuda_launch extension",
                allow_module_level=True)

lib = cuda_launcher.module()
BoundLaunch = lib.BoundLaunch

COOPERATIVE, PDL = 2, 6  # CU_LAUNCH_ATTRIBUTE_COOPERATIVE, _PROGRAMMATIC_STREAM_SERIALIZATION
FORMAT = {"p": "<Q", "b": "<b", "B": "<B", "h": "<h", "H": "<H", "i": "<i", "I": "<I", "l": "<q", "L": "<Q",
          "e": "<e", "f": "<f", "d": "<d"}


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, padding to 8, a 64-byte union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(LaunchConfig), ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))


class Driver:
    """A stand-in for cuLaunchKernelEx that records each launch: the configuration, the function, the
    8-byte slot behind each of the first ``count`` parameter pointers, and ``extra``."""

    def __init__(self, count: int, result: int = 0):
        self.count, self.result, self.launches = count, result, []
        self._callback = LAUNCH(self._launch)
        self.address = ctypes.cast(self._callback, ctypes.c_void_p).value

    def _launch(self, config, function, params, extra):
        c = config.contents
        attrs = [(c.attrs[a].id, c.attrs[a].value[0]) for a in range(c.numAttrs)]
        pointers = [params[i] for i in range(self.count)]
        self.launches.append(SimpleNamespace(
            grid=(c.gridDimX, c.gridDimY, c.gridDimZ), block=(c.blockDimX, c.blockDimY, c.blockDimZ),
            shared=c.sharedMemBytes, stream=c.hStream or 0, attrs=attrs, attrs_null=not c.attrs,
            function=function, pointers=pointers, slots=[ctypes.string_at(p, 8) for p in pointers],
            extra_null=not extra))
        return self.result

    @property
    def last(self):
        return self.launches[-1]

    def bind(self, kinds, values, varying=(), grid=(1, 1, 1), block_x=128, shared_memory=0, cooperative=0,
             pdl=0, function=0xF00D):
        kinds = kinds.encode() if isinstance(kinds, str) else kinds
        return BoundLaunch(self.address, function, grid, block_x, shared_memory, cooperative, pdl, kinds,
                           tuple(values), tuple(varying))


def slot_of(kind: str, value) -> bytes:
    """The 8 bytes a parameter's slot should hold: the value packed for its kind, then zeros."""
    if kind == "r":  # Triton's pack_bf16: the top half of the fp32 bits, truncated
        packed = struct.pack("<H", struct.unpack("<I", struct.pack("<f", value))[0] >> 16)
    else:
        packed = struct.pack(FORMAT[kind], value)
    return packed.ljust(8, b"\0")


THIRD = 1 / 3
PACKED = [
    ("p", [0, 1, 0x7F00_DEAD_BEE0, 2**63, 2**64 - 1]),
    ("b", [-128, -1, 0, 127]), ("B", [0, 200, 255]),
    ("h", [-32768, -2, 32767]), ("H", [0, 65535]),
    ("i", [-2**31, -5, 0, 2**31 - 1]), ("I", [0, 2**31, 2**32 - 1]),
    ("l", [-2**63, -7, 2**63 - 1]), ("L", [0, 2**63, 2**64 - 1]),
    ("e", [THIRD, -0.0, math.inf, -math.inf, math.nan, 65504.0, 1e-8, 2.5, 3]),
    ("r", [THIRD, -0.0, math.inf, -math.inf, math.nan, 1.0, -2.75, 3e38, 7]),
    ("f", [THIRD, -0.0, math.inf, -math.inf, math.nan, 3.4e38, 1e-45, 9]),
    ("d", [THIRD, -0.0, math.inf, math.nan, 1e300, 5e-324, 11]),
]


@pytest.mark.parametrize("kind,values", PACKED, ids=[k for k, _ in PACKED])
def test_every_kind_is_packed_at_its_slot_start(kind, values):
    driver = Driver(len(values))
    driver.bind(kind * len(values), values)(0)
    assert driver.last.slots == [slot_of(kind, v) for v in values]
    assert all(p % 8 == 0 for p in driver.last.pointers)
    assert len(set(driver.last.pointers)) == len(values)


@pytest.mark.parametrize("kind,values", PACKED, ids=[k for k, _ in PACKED])
def test_values_decodes_the_slots(kind, values):
    got = Driver(0).bind(kind * len(values), values).values()
    for v, g in zip(values, got):
        slot = slot_of(kind, v)
        if kind in "efdr":  # the value the kernel sees, as a Python float
            want = struct.unpack("<f", b"\0\0" + slot[:2])[0] if kind == "r" else \
                struct.unpack(FORMAT[kind], slot[:struct.calcsize(FORMAT[kind])])[0]
            assert type(g) is float and (g == want or math.isnan(g) and math.isnan(want))
            assert math.copysign(1, g) == math.copysign(1, want)
        else:
            assert type(g) is int and g == v


def test_bf16_truncates_and_out_of_range_floats_become_infinities_as_in_triton():
    values = [1 + 2**-8 + 2**-10, -(1 + 2**-8 + 2**-10), 1e40, -1e40]
    driver = Driver(4)
    driver.bind(b"rrff", values)(0)
    assert [s[:2] for s in driver.last.slots[:2]] == [struct.pack("<H", 0x3F80), struct.pack("<H", 0xBF80)]
    assert driver.last.slots[2:] == [struct.pack("<I", 0x7F800000).ljust(8, b"\0"),
                                     struct.pack("<I", 0xFF800000).ljust(8, b"\0")]
    driver = Driver(1)
    driver.bind(b"r", [1e40])(0)
    assert driver.last.slots[0][:2] == struct.pack("<H", 0x7F80)


def test_varying_parameters_change_per_call_and_the_others_stay():
    driver = Driver(6)
    bound = driver.bind(b"pipfpp", [10, 3, 20, 0.5, 0, 0], varying=(2, 0, 4))
    assert bound.varying == (2, 0, 4) and bound.kinds == b"pipfpp"
    for n in range(3):
        bound(99, 1000 + n, 2000 + n, 3000 + n)
        assert driver.last.slots == [slot_of(k, v) for k, v in zip("pipfpp", [2000 + n, 3, 1000 + n, 0.5,
                                                                            3000 + n, 0])]
        assert bound.values() == (2000 + n, 3, 1000 + n, 0.5, 3000 + n, 0)
    assert len(driver.launches) == 3 and len({tuple(l.pointers) for l in driver.launches}) == 1


def test_the_stream_function_grid_block_and_shared_memory_pass_through():
    driver = Driver(1)
    bound = driver.bind(b"i", [1], grid=(7, 5, 3), block_x=256, shared_memory=49152, function=0xABCDEF)
    for stream in (0, 1, 0x5555_0000_1234, 2**64 - 1):
        bound(stream)
        assert driver.last.stream == stream
    last = driver.last
    assert (last.grid, last.block, last.shared, last.function) == ((7, 5, 3), (256, 1, 1), 49152, 0xABCDEF)
    assert last.attrs == [] and last.attrs_null and last.extra_null
    assert (bound.grid, bound.block_x, bound.shared_memory, bound.function) == ((7, 5, 3), 256, 49152, 0xABCDEF)
    assert bound.launch_address == driver.address and (bound.cooperative, bound.pdl) == (0, 0)


@pytest.mark.parametrize("cooperative,pdl,attrs", [(0, 0, []), (1, 0, [(COOPERATIVE, 1)]), (0, 1, [(PDL, 1)]),
                                                   (1, 1, [(PDL, 1), (COOPERATIVE, 1)]),
                                                   (True, False, [(COOPERATIVE, 1)])])
def test_cooperative_and_pdl_add_launch_attributes_as_triton_does(cooperative, pdl, attrs):
    driver = Driver(0)
    driver.bind(b"", [], cooperative=cooperative, pdl=pdl)(0)
    assert driver.last.attrs == attrs


@pytest.mark.parametrize("grid", [(0, 1, 1), (4, 0, 1), (4, 2, 0)])
def test_a_zero_grid_launches_nothing_but_still_checks_and_stores_values(grid):
    driver = Driver(1)
    bound = driver.bind(b"i", [1], varying=(0,), grid=grid)
    assert bound(0, 42) is None and driver.launches == [] and bound.values() == (42,)
    with pytest.raises(OverflowError):
        bound(0, 2**31)


def test_a_failed_launch_raises_with_the_cuda_result():
    driver = Driver(0, result=700)
    with pytest.raises(RuntimeError, match="CUresult 700") as info:
        driver.bind(b"", [])(0)
    assert info.value.cuda_result == 700


def test_the_noop_launch_function_does_nothing_and_succeeds():
    bound = BoundLaunch(lib.noop_launch_address, 1, (1, 1, 1), 32, 0, 0, 0, b"ppp", (0, 0, 0), (0, 1))
    assert bound(0, 2**64 - 1, 3) is None and bound.values() == (2**64 - 1, 3, 0)
    assert "BoundLaunch" in repr(bound)


def test_calls_with_the_wrong_arguments_are_refused():
    driver = Driver(3)
    bound = driver.bind(b"pie", [0, 0, 0.0], varying=(0, 1, 2))
    with pytest.raises(TypeError, match=r"stream and 3 varying value\(s\): 4 argument\(s\), 2 given"):
        bound(0, 1)
    with pytest.raises(TypeError, match="0 given"):
        bound()
    with pytest.raises(TypeError, match="keyword"):
        bound(0, 1, 2, x=3.0)
    with pytest.raises(OverflowError, match=r"parameter 1 \(int32\): 2147483648 is outside"):
        bound(0, 1, 2**31, 0.0)
    with pytest.raises(OverflowError, match=r"parameter 1 \(int32\)"):
        bound(0, 1, -2**31 - 1, 0.0)
    with pytest.raises(TypeError, match=r"parameter 0 \(pointer\) needs an int, not float"):
        bound(0, 1.0, 2, 0.0)
    with pytest.raises(TypeError, match=r"parameter 0 \(pointer\) needs an int, not str"):
        bound(0, "0x10", 2, 0.0)
    with pytest.raises(OverflowError, match=r"parameter 0 \(pointer\)"):
        bound(0, -1, 2, 0.0)
    with pytest.raises(OverflowError, match=r"parameter 0 \(pointer\)"):
        bound(0, 2**64, 2, 0.0)
    with pytest.raises(TypeError, match=r"parameter 2 \(fp16\) needs a float, not str"):
        bound(0, 1, 2, "x")
    with pytest.raises(OverflowError, match=r"parameter 2 \(fp16\).*too large"):
        bound(0, 1, 2, 1e6)
    with pytest.raises(ValueError, match="stream"):
        bound(-1, 1, 2, 0.0)
    with pytest.raises(TypeError, match="stream"):
        bound(None, 1, 2, 0.0)
    assert driver.launches == []
    bound(0, 1, 2, 0.5)
    assert len(driver.launches) == 1


class Index:
    def __index__(self):
        return 12


def test_int_like_objects_are_taken_through_index():
    driver = Driver(3)
    driver.bind(b"pid", [Index(), True, Index()])(0)
    assert driver.last.slots == [slot_of("p", 12), slot_of("i", 1), slot_of("d", 12.0)]


@pytest.mark.parametrize("kind,bad", [("b", 128), ("b", -129), ("B", -1), ("B", 256), ("h", 2**15), ("H", -1),
                                      ("H", 2**16), ("i", -2**31 - 1), ("I", -1), ("I", 2**32), ("l", 2**63),
                                      ("l", -2**63 - 1), ("L", -1), ("L", 2**64), ("p", 2**70)])
def test_integers_are_range_checked_for_their_kind(kind, bad):
    with pytest.raises(OverflowError, match=r"parameter 1 \(u?int\d+|parameter 1 \(pointer\)"):
        Driver(0).bind("p" + kind, [0, bad])


def test_construction_is_validated():
    d = Driver(0)
    with pytest.raises(ValueError, match=r"2 kind code\(s\) but 1 value\(s\)"):
        d.bind(b"ii", [1])
    with pytest.raises(ValueError, match="parameter 1: unknown kind code 'x'"):
        d.bind(b"ix", [1, 2])
    with pytest.raises(ValueError, match="unknown kind code 0x00"):
        d.bind(b"\0", [1])
    with pytest.raises(TypeError, match="kinds must be bytes"):
        BoundLaunch(d.address, 1, (1, 1, 1), 32, 0, 0, 0, "ii", (1, 2), ())
    with pytest.raises(ValueError, match=r"varying\[1\] = 2 is not a parameter index in \[0, 2\)"):
        d.bind(b"ii", [1, 2], varying=(0, 2))
    with pytest.raises(ValueError, match=r"varying\[0\] = -1"):
        d.bind(b"ii", [1, 2], varying=(-1,))
    with pytest.raises(ValueError, match=r"varying\[0\] = '0'"):
        d.bind(b"ii", [1, 2], varying=("0",))
    with pytest.raises(ValueError, match="parameter 1 twice"):
        d.bind(b"ii", [1, 2], varying=(1, 1))
    with pytest.raises(TypeError, match="values and varying must be tuples"):
        BoundLaunch(d.address, 1, (1, 1, 1), 32, 0, 0, 0, b"i", [1], ())
    with pytest.raises(TypeError, match="grid must be a tuple of 3 ints"):
        d.bind(b"", [], grid=(1, 1))
    with pytest.raises(ValueError, match=r"grid\[1\] must be in \[0, 4294967295\], got -1"):
        d.bind(b"", [], grid=(1, -1, 1))
    with pytest.raises(OverflowError, match=r"grid\[2\]"):
        d.bind(b"", [], grid=(1, 1, 2**32))
    with pytest.raises(TypeError, match=r"grid\[0\] must be an int, not float"):
        d.bind(b"", [], grid=(1.0, 1, 1))
    with pytest.raises(ValueError, match="pdl"):
        d.bind(b"", [], pdl=-1)
    with pytest.raises(OverflowError, match="block_x"):
        d.bind(b"", [], block_x=2**32)
    with pytest.raises(ValueError, match="block_x"):
        d.bind(b"", [], block_x=0)
    with pytest.raises(ValueError, match="shared_memory"):
        d.bind(b"", [], shared_memory=-1)
    with pytest.raises(ValueError, match=r"cooperative must be in \[0, 1\], got 2"):
        d.bind(b"", [], cooperative=2)
    with pytest.raises(ValueError, match="function"):
        d.bind(b"", [], function=0)
    with pytest.raises(ValueError, match="launch_address"):
        BoundLaunch(0, 1, (1, 1, 1), 32, 0, 0, 0, b"", (), ())
    with pytest.raises(TypeError, match=r"parameter 0 \(fp32\) needs a float, not NoneType"):
        d.bind(b"f", [None])
    with pytest.raises(TypeError):
        BoundLaunch(d.address, 1, (1, 1, 1))
    keywords = BoundLaunch(launch_address=d.address, function=1, grid=(1, 1, 1), block_x=32, shared_memory=0,
                           cooperative=0, pdl=0, kinds=b"i", values=(4,), varying=())
    assert keywords.values() == (4,)


def test_calls_keep_reference_counts_steady():
    bound = BoundLaunch(lib.noop_launch_address, 1, (1, 1, 1), 32, 0, 0, 0, b"ppif", (0, 0, 0, 0.0), (0, 1, 2, 3))
    args = (2**40 + 1, 2**63 + 5, 123456, 0.75)
    stream = 2**50 + 3
    before = [sys.getrefcount(a) for a in (stream, *args, bound)]
    for _ in range(10_000):
        bound(stream, *args)
    bad = 2**31 + 7
    bad_before = sys.getrefcount(bad)
    for _ in range(1000):
        with pytest.raises(OverflowError):
            bound(stream, args[0], args[1], bad, args[3])
    assert [sys.getrefcount(a) for a in (stream, *args, bound)] == before
    assert sys.getrefcount(bad) == bad_before


def test_a_kernel_of_36_parameters_with_3_varying_pointers():
    kinds = b"ppp" + b"i" * 20 + b"l" * 6 + b"fer" + b"pp" + b"Lp"
    values = list(range(3)) + list(range(100, 120)) + [-(2**40)] * 6 + [0.5, 0.25, 2.0] + [7, 8, 2**64 - 1, 9]
    driver = Driver(len(kinds))
    bound = driver.bind(kinds, values, varying=(0, 1, 2))
    bound(5, 2**47, 2**47 + 256, 2**47 + 512)
    assert driver.last.slots == [slot_of(chr(k), v) for k, v in zip(kinds, [2**47, 2**47 + 256, 2**47 + 512,
                                                                           *values[3:]])]


# ---- Triton signatures -> parameters ----------------------------------------------------------------


def test_kinds_cover_triton_types():
    assert cuda_launcher.KINDS["i1"] == "b" and cuda_launcher.KINDS["u1"] == "B"
    assert cuda_launcher.kind_of("*fp32") == cuda_launcher.kind_of("*i1") == "p"
    assert set(lib.KIND_CODES.decode()) == {"p", *cuda_launcher.KINDS.values()}
    assert cuda_launcher.module() is lib


def test_parameters_of_a_plain_signature():
    layout = cuda_launcher.parameters_of_signature(
        {"x": "*fp32", "y": "*bf16", "n": "i32", "BLOCK": "constexpr", "scale": "fp32", "big": "i64",
         "flag": "i1", "one": "constexpr", "h": "fp16", "u": "u64"})
    assert layout.arguments == [[0], [1], [2], [], [3], [4], [5], [], [6], [7]]
    assert layout.kinds == b"ppifl" + b"beL" + b"pp"
    assert (layout.global_scratch, layout.profile_scratch) == (8, 9)


def test_parameters_of_tuples_nested_and_with_constant_leaves():
    layout = cuda_launcher.parameters_of_signature(
        {"ptrs": ("*fp16", "*fp16"), "strides": ("i64", "constexpr", ("i32", ("constexpr", "u8"))),
         "N": "constexpr", "empty": (), "m": "bf16"})
    assert layout.arguments == [[0, 1], [2, None, 3, None, 4], [], [], [5]]
    assert layout.kinds == b"ppliBr" + b"pp"


def test_parameters_of_a_signature_of_constexprs_only():
    layout = cuda_launcher.parameters_of_signature({"A": "constexpr", "B": "constexpr"})
    assert layout.arguments == [[], []] and layout.kinds == b"pp"


def test_parameter_values_follow_the_layout():
    layout = cuda_launcher.parameters_of_signature(
        {"x": "*fp32", "shape": ("i32", "constexpr", "i32"), "B": "constexpr", "s": "fp32", "t": ("*i8",)})

    class Pointer:
        def data_ptr(self):
            return 0x1000

    values = cuda_launcher.parameter_values(layout, (Pointer(), (4, 1, 6), 64, 0.5, [0x2000]),
                                            global_scratch=0x3000)
    assert values == (0x1000, 4, 6, 0.5, 0x2000, 0x3000, 0)
    bound = Driver(0).bind(layout.kinds, values)
    assert bound.values() == values
    with pytest.raises(ValueError, match="argument 1 has 2 value"):
        cuda_launcher.parameter_values(layout, (0, (4, 6), 64, 0.5, [0]))
    with pytest.raises(ValueError, match="takes 5 argument"):
        cuda_launcher.parameter_values(layout, (0,))


@pytest.mark.parametrize("ty", ["tensordesc<fp16[64, 64]>", "nvTmaDesc", "fp8", "i128"])
def test_unsupported_parameter_types_are_refused(ty):
    with pytest.raises(ValueError, match="argument 'd'"):
        cuda_launcher.parameters_of_signature({"x": "*fp32", "d": ty})
    with pytest.raises(ValueError):
        cuda_launcher.parameters_of_signature({"t": ("i32", (ty,))})


def test_parameters_of_a_compiled_kernel():
    compiled = SimpleNamespace(src=SimpleNamespace(signature={"x": "*fp32", "n": "i32", "B": "constexpr"}),
                               metadata=SimpleNamespace(num_ctas=1, tensordesc_meta=None))
    assert cuda_launcher.parameters(compiled) == ([[0], [1], []], b"pipp")
    compiled.metadata.num_ctas = 2
    with pytest.raises(ValueError, match="num_ctas=2"):
        cuda_launcher.parameters(compiled)


def test_a_varying_value_no_parameter_takes_is_passed_and_ignored():
    """A varying argument that Triton took as a constant (an int equal to 1) has no parameter: calls still
    pass its value, which changes nothing."""
    driver = Driver(2)
    bound = driver.bind("pi", (16, 5), varying=(0, None))
    assert bound.varying == (0, None)
    bound(3, 32, 1)
    assert driver.last.slots == [slot_of("p", 32), slot_of("i", 5)]


class _Compiled:
    """The parts of a Triton CompiledKernel that ``bind`` reads."""

    def __init__(self, signature, scratch=0):
        self.src = SimpleNamespace(signature=signature)
        self.metadata = SimpleNamespace(num_ctas=1)
        self.run = SimpleNamespace(global_scratch_size=scratch, profile_scratch_size=0,
                                   launch_cooperative_grid=0, launch_pdl=1)
        self.function = 0xBEEF
        self.packed_metadata = (4, 1, 1024)


def test_bind_maps_a_compiled_kernels_arguments_onto_its_parameters():
    """Pointers, a shape tuple with a leaf specialised to a constant, an argument specialised to a constant
    (varying: passed and ignored), then constexprs; the two scratch pointers follow the kernel's own."""
    compiled = _Compiled({"out": "*fp32", "n": "i32", "shape": ("i64", "constexpr"), "one": "constexpr",
                          "x": "*fp32", "scale": "fp32", "BLOCK": "constexpr"})
    driver = Driver(7)
    values = [4096, 40, (5, 1), 1, 8192, 0.5]
    bound = cuda_launcher.bind(compiled, (3,), values, [0, 3, 4], driver.address)
    assert bound.grid == (3, 1, 1) and bound.block_x == 128 and bound.shared_memory == 1024 and bound.pdl == 1
    assert bound.kinds == b"pilpfpp" and bound.varying == (0, None, 3)
    bound(9, 2048, 1, 6144)
    assert driver.last.slots == [slot_of("p", 2048), slot_of("i", 40), slot_of("l", 5), slot_of("p", 6144),
                                 slot_of("f", 0.5), slot_of("p", 0), slot_of("p", 0)]
    assert driver.last.stream == 9 and driver.last.function == 0xBEEF


def test_bind_declines_what_it_does_not_serve():
    """Kernels asking for scratch at each launch, tuple-valued varying arguments and tensor descriptors go
    through Triton's launcher (None)."""
    signature = {"x": "*fp32", "shape": ("i32", "i32")}
    address = Driver(0).address
    assert cuda_launcher.bind(_Compiled(signature, scratch=64), (1,), [0, (2, 3)], [0], address) is None
    assert cuda_launcher.bind(_Compiled(signature), (1,), [0, (2, 3)], [1], address) is None
    assert cuda_launcher.bind(_Compiled({"d": "tensordesc<fp32[64, 64]>"}), (1,), [0], [0], address) is None
    assert cuda_launcher.bind(_Compiled(signature), (1,), [0, (2, 3)], [0], address) is not None


@pytest.mark.skipif(TEST_DEVICE != "cuda", reason="the CUDA backend binds launches; the interpreter has none")
def test_repeated_calls_on_cuda_launch_through_our_launcher(monkeypatch):
    """On CUDA a pointwise call repeated with the same layout binds our launcher once and then launches
    through it, with results equal to NumPy's."""
    import numpy as np

    import nbxtensor as nbx
    made = []
    real_bind = cuda_launcher.bind
    monkeypatch.setattr(cuda_launcher, "bind", lambda *args: made.append(real_bind(*args)) or made[-1])
    x = np.arange(91, dtype=np.float32).reshape(7, 13)  # a layout no other test plans
    a, b = nbx.tensor(x, device="cuda"), nbx.tensor(2 * x, device="cuda")
    results = [(a + b * 0.5).numpy() for _ in range(4)]
    assert made and all(isinstance(m, BoundLaunch) for m in made)
    for got in results:
        np.testing.assert_array_equal(got, x + x)


@pytest.mark.skipif(TEST_DEVICE != "cuda", reason="the CUDA backend binds launches; the interpreter has none")
def test_a_bound_launch_from_a_new_thread_makes_the_device_current():
    """A thread that has touched no CUDA API yet has no current context: the bound launch fails with the
    driver's invalid-context error, the device is made current and the launch retried."""
    import threading

    import numpy as np

    import nbxtensor as nbx
    x = np.arange(77, dtype=np.float32).reshape(7, 11)  # a layout no other test plans
    a = nbx.tensor(x, device="cuda")
    for _ in range(3):
        a + a  # binds the call in this thread
    results = []
    worker = threading.Thread(target=lambda: results.append((a + a).numpy()))
    worker.start()
    worker.join()
    np.testing.assert_array_equal(results[0], 2 * x)


@pytest.mark.skipif(TEST_DEVICE != "cuda", reason="the CUDA backend binds launches; the interpreter has none")
def test_a_thread_without_a_context_gets_the_invalid_context_error_and_recovers(monkeypatch):
    """A bound launcher called first thing in a new thread (no CUDA call before it, so no current context):
    the driver answers CUDA_ERROR_INVALID_CONTEXT, which ``launch_failed`` puts right, and the retry runs."""
    import threading

    import numpy as np

    import nbxtensor as nbx
    from nbxtensor.device import backend_for
    made = []
    real_bind = cuda_launcher.bind
    monkeypatch.setattr(cuda_launcher, "bind", lambda *args: made.append(real_bind(*args)) or made[-1])
    x = np.arange(65, dtype=np.float32).reshape(5, 13)  # a layout no other test plans
    a = nbx.tensor(x, device="cuda")
    results = [a * 3.0 for _ in range(4)]  # kept alive: the launcher's last addresses are theirs
    launcher = next(m for m in made if m is not None)
    values = launcher.values()
    arguments = [0 if i is None else values[i] for i in launcher.varying]
    outcome = []

    def first_thing_in_a_thread():
        try:
            launcher(0, *arguments)
            outcome.append("ran")
        except RuntimeError as error:
            outcome.append(getattr(error, "cuda_result", None))
            backend_for(a.device).launch_failed(error, a.device.index)
            launcher(0, *arguments)
    worker = threading.Thread(target=first_thing_in_a_thread)
    worker.start()
    worker.join()
    nbx.cuda.synchronize()
    assert outcome in (["ran"], [201])  # 201: CUDA_ERROR_INVALID_CONTEXT
    for out in results:
        np.testing.assert_array_equal(out.numpy(), 3 * x)
