"""torch.fft's transforms (the 18 of ``fft``, ``rfft``, ``hfft`` and their inverses in one, two and n dims,
one table), ``fftfreq``/``rfftfreq``, ``fftshift``/``ifftshift`` and ATen's ``_fft_c2c``/``_fft_r2c``/
``_fft_c2r``, with torch's arguments, checks, promotions and norms.

How a transform runs. An n-dim transform is a one-dim transform per dim, the first reading the input (real,
complex or one-sided Hermitian) and the rest working in place on the result. A one-dim transform of length
n is passes of ``kernels/fft.py``'s kernel, a program holding whole rows in registers:

- n of at most 32: one stage, the row times the n-point DFT matrix (``tl.dot``);
- n = n1 * n2 with n1, n2 <= 32 (so at most 1024): two stages with the twiddles between them, in one pass;
- longer n = na * rest: the four-step form, a pass of na through a workspace that multiplies its output by
  the twiddles w_n^(j ka) on the way out, then the rest's passes (two passes up to 2^20, three up to 2^30);
- n with a prime factor above 32 (or no split of those shapes): Bluestein's chirp z-transform, a
  convolution of power-of-two length m >= 2n - 1 run as a forward and an inverse transform of length m,
  the chirps and the kernel's spectrum multiplied in the passes' loads and stores.

Why small dense DFTs: Triton has no lane shuffles, so a butterfly network exchanges data through a layout
conversion per radix step, while a stage of up to 32 points is one product of the row tile with a DFT matrix
and a row of 1024 points costs two products and one transpose in registers; each pass reads and writes
memory once. The products cost 4 (p1 + p2) multiply-adds an element (p the stages' extents padded to powers
of two, at least 16, tl.dot's least), far more than the 5 log2 n flops of a radix-2 FFT, and on an H100 in
IEEE float32 on the FMA units that bounds large transforms by arithmetic, not memory (README, "What does not
work yet"); 64-point stages spilled registers there. So a pass of a power-of-two length (4 to 1024) has a
second form, the radix form: log2 n radix-2 stages on the register tile (``kernels/fft.py``), about five
operations an element a stage and a permute of the tile each. Which is faster depends on how the permutes
compile, so the two are timed against each other per launch key (``tuning.choose_timed``); the interpreter
takes the radix form. Float32 products stay IEEE float32 on the FMA units (never TF32), or where the facts ask
(``fft_float32_parts``) the six products of their bfloat16 parts on the matrix units (``kernels/matmul.py``'s
exact float32; slow to compile); float64 ones on the FMA units.
Every table (DFT matrices, twiddles, chirps, the Bluestein kernel's spectrum) is computed in float64 on the
host from exact integer exponents (jk mod n) and rounded once to the data's type, and kept on the device per
length. A stage's error grows with its few terms and the stages are about log_32 n, so the error grows as
log n (``tests/test_fft.py`` measures it against NumPy's float64).

float16 and bfloat16 inputs are refused, as torch refuses them on the CPU; integer and bool inputs promote
to the default float.

Call plans. Every op keeps a plan per call layout (the input's layout, the options, the default float): the
first call of a layout runs the general path above and records its passes' launches, temporaries and
tables (``planned_call``); later calls replay them (a ``LaunchCall`` where the input goes straight to a fresh
output, binding its launches where kernels compile), with only the input's conversion and the buffer's
zeroing as ops where the plan has them. A call that runs an op between its passes (three passes with a cut
output, Bluestein's product of a window by its chirp) keeps the general path.
"""
from __future__ import annotations

import functools
import math
import threading
from typing import NamedTuple

import numpy as np

from .. import dtypes, tuning
from .. import shape as S
from ..allocation import (Workspace, fresh_tensor_maker, new_tensor, outside_arena, scratch_scope, scratch_tensor,
                          workspace_bytes)
from ..device import backend_for
from ..dtypes import get_dtype
from ..kernels import fft as K
from ..kernels.matmul import PRECISION_BF16_PARTS
from ..launch import cdiv, launch
from ..lowering import encode_scalar, needs_index_64, padded_for_kernel
from ..grad_mode import refuse_requires_grad
from ..promotion import get_default_dtype
from ..tensor import Tensor
from .creation import tensor
from .plans import LaunchCall, PlanCache, PlannedLaunch, Slot, binding_run, layout_key
from .registry import Cost, OUT, TensorMeta, arguments_binder, family_samples, get, op_impl, register
from .samples import Samples, operand, sample

STAGE_MAX = 32           # the longest DFT one stage multiplies by: a 32 x 32 complex matrix (64-point stages
                         # spilled registers on an H100: ten times slower a pass)
PASS_MAX = STAGE_MAX ** 2  # the longest row one pass holds (two stages)
LENGTH_MAX = 1 << 30     # the longest convolution Bluestein's method takes
TILE_MIN = 16            # tl.dot's least extent on a GPU: a stage's extent pads to it
FORWARD, INVERSE = -1, 1  # the sign of the exponent: X[k] = sum x[j] exp(sign 2 pi i jk / n)


# ---- lengths: how a transform of length n runs ----------------------------------------------------

def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _padded(n: int) -> int:
    """A stage's extent in the kernel's tile: n rounded up to a power of two, at least TILE_MIN."""
    return max(TILE_MIN, _pow2(n))


def _tile(n1: int, n2: int) -> tuple:
    """(P1, P2) of a pass of stages n1, n2 (P2 = 1: one stage)."""
    return _padded(n1), (1 if n2 == 1 else _padded(n2))


@functools.lru_cache(maxsize=None)
def _stages(n: int) -> tuple | None:
    """(n1, n2) of a one-pass transform of length n (n2 = 1: a single stage), the split whose tile is
    smallest, then whose products are shortest; None where n does not split into two factors up to
    STAGE_MAX."""
    if n <= STAGE_MAX:
        return n, 1
    splits = [(n1, n // n1) for n1 in range(2, STAGE_MAX + 1) if n % n1 == 0 and n // n1 <= STAGE_MAX]
    if not splits:
        return None
    return min(splits, key=lambda s: (math.prod(_tile(*s)), sum(_tile(*s)), s))


def _pass_work(n: int) -> float:
    """Multiply-adds an element of one pass of length n: its tile's padding times its products' lengths."""
    p1, p2 = _tile(*_stages(n))
    return p1 * p2 / n * (p1 + (p2 if p2 > 1 else 0))


@functools.lru_cache(maxsize=None)
def _passes(n: int) -> tuple | None:
    """The pass lengths of a transform of length n: (n,) in one pass, else the four-step form's first pass
    and the passes of the rest (the fewest passes, then the least work, then the most even); None where
    n has no such split."""
    if _stages(n) is not None:
        return (n,)
    splits = [(na, *rest) for na in range(STAGE_MAX + 1, PASS_MAX + 1) if n % na == 0 and _stages(na) is not None
              for rest in [_passes(n // na)] if rest is not None]
    if not splits:
        return None
    return min(splits, key=lambda s: (len(s), sum(map(_pass_work, s)), max(s) - min(s), s))


class _Method(NamedTuple):
    passes: tuple   # the pass lengths of the transform the kernel runs: of n itself, or of Bluestein's m
    bluestein: int  # 0, or the length m of Bluestein's convolution


@functools.lru_cache(maxsize=None)
def _method(n: int) -> _Method:
    passes = _passes(n)
    if passes is not None:
        return _Method(passes, 0)
    m = _pow2(2 * n - 1)
    if m > LENGTH_MAX:
        raise NotImplementedError(f"an FFT of length {n} is not supported: with a prime factor above {STAGE_MAX} "
                                  f"lengths go up to {LENGTH_MAX // 2} (Bluestein's convolution of {LENGTH_MAX})")
    return _Method(_passes(m), m)


# ---- tables: float64 on the host, rounded once, kept on the device --------------------------------

_TABLES: dict = {}
_TABLES_LIMIT = 256


def _products(rows: int, columns: int) -> np.ndarray:
    """The exponents j k of a rows x columns table of roots."""
    return np.arange(rows)[:, None] * np.arange(columns)[None, :]


def _roots(exponents, n: int, sign: int) -> np.ndarray:
    """exp(sign 2 pi i e / n) for integer exponents e, reduced mod n first so the angle is exact to float64."""
    e = np.mod(np.asarray(exponents, dtype=np.int64), n)
    return np.exp((sign * 2j * np.pi / n) * e)


def _table(key: tuple, dtype, device, make) -> Tensor:
    """The device tensor of ``make()`` (a float64 or complex128 array) in ``dtype``, made once per key."""
    full = (key, dtype.name, str(device))
    found = _TABLES.get(full)
    if found is None:
        with outside_arena():
            found = tensor(make(), dtype=dtype, device=device)
        if len(_TABLES) >= _TABLES_LIMIT:
            _TABLES.clear()
        _TABLES[full] = found
    recorder = _active()
    if recorder is not None:
        recorder.tables.add(id(found))
    return found


def _stage_tables(n1: int, n2: int, sign: int, component, device) -> Tensor:
    """A pass's tables as the kernel reads them: the n1- and n2-point DFT matrices as real matrices of twice
    their size (``kernels/fft.py``), then the twiddles w_n^(j2 k1) (P2 x P1 pairs), zero past n1 and n2."""
    def realified(n: int, p: int) -> np.ndarray:
        roots = np.zeros((p, p), np.complex128)
        roots[:n, :n] = _roots(_products(n, n), n, sign)
        matrix = np.empty((p, 2, p, 2))
        matrix[:, 0, :, 0] = matrix[:, 1, :, 1] = roots.real
        matrix[:, 0, :, 1] = roots.imag
        matrix[:, 1, :, 0] = -roots.imag
        return matrix.ravel()

    def make():
        p1, p2 = _tile(n1, n2)
        twiddles = np.zeros((p2, p1), np.complex128)
        twiddles[:n2, :n1] = _roots(_products(n2, n1), n1 * n2, sign)
        return np.concatenate([realified(n1, p1), realified(n2, p2), np.stack([twiddles.real, twiddles.imag], -1).ravel()])
    return _table(("stages", n1, n2, sign), component, device, make)


def _radix_tables(n: int, sign: int, component, device) -> Tensor:
    """The radix form's twiddles w_n^e, e < n / 2, as (real, imaginary) pairs (``kernels/fft.py``)."""
    return _table(("radix", n, sign), component, device,
                  lambda: np.stack([(roots := _roots(np.arange(n // 2), n, sign)).real, roots.imag], -1).ravel())


def _twiddles(na: int, nb: int, sign: int, dtype, device) -> Tensor:
    """The four-step's twiddles w_n^(jb ka), n = na * nb, as an (nb, na) complex table."""
    return _table(("twiddles", na, nb, sign), dtype, device,
                  lambda: _roots(_products(nb, na), na * nb, sign))


def _chirp(n: int, sign: int, dtype, device) -> Tensor:
    """Bluestein's chirp exp(sign pi i j^2 / n), j < n (j^2 reduced mod 2n)."""
    return _table(("chirp", n, sign), dtype, device, lambda: _roots(np.arange(n) ** 2, 2 * n, sign))


def _chirp_spectrum(n: int, m: int, sign: int, dtype, device) -> Tensor:
    """The forward length-m DFT of the conjugate chirp laid out for a circular convolution (entries j and
    m - j for j < n), computed in float64."""
    def make():
        conjugate = _roots(np.arange(n) ** 2, 2 * n, -sign)
        kernel = np.zeros(m, np.complex128)
        kernel[:n] = conjugate
        kernel[m - n + 1:] = conjugate[1:][::-1]
        return np.fft.fft(kernel)
    return _table(("chirp spectrum", n, m, sign), dtype, device, make)


# ---- call plans: a layout's launches recorded once, replayed after ----------------------------------

class _Recorder:
    """What a call being planned did: its passes' launches (grid, arguments, constexprs), its temporaries
    (name -> (shape, dtype, tensor)), the tables it read (their ids), the tensors the plan names
    (``roles``: name -> tensor) and whether it did work a replay of launches cannot repeat (an op between
    the passes)."""

    def __init__(self):
        self.launches, self.temporaries, self.tables, self.roles = [], {}, set(), {}
        self.refused = False


_recorders = threading.local()  # ``active``: this thread's recorder, where a call is being planned


class _Recording:
    """The block in which this thread's transform work is noted in ``recorder``."""

    def __init__(self, recorder: _Recorder):
        self.recorder = recorder

    def __enter__(self):
        self.outer, _recorders.active = getattr(_recorders, "active", None), self.recorder
        return self.recorder

    def __exit__(self, *exc):
        _recorders.active = self.outer


def _active() -> _Recorder | None:
    return getattr(_recorders, "active", None)


def note_role(name: str, t: Tensor) -> None:
    recorder = _active()
    if recorder is not None:
        recorder.roles[name] = t


def _refuse_replay() -> None:
    """The call being planned runs an op between its passes: its plan runs the general path."""
    recorder = _active()
    if recorder is not None:
        recorder.refused = True


def planned_scratch(shape: tuple, dtype, device) -> Tensor:
    """A temporary of the transform (``scratch_tensor``), a workspace piece of the call being planned."""
    t = scratch_tensor(shape, dtype, device)
    recorder = _active()
    if recorder is not None:
        recorder.temporaries[f"temporary {len(recorder.temporaries)}"] = (tuple(shape), dtype, t)
    return t


def issue_planned(kernel, grid, device, args: list, **constexprs) -> None:
    """``launch``, noted in the call being planned (a pass, or an op's own kernel after its passes)."""
    recorder = _active()
    if recorder is not None:
        recorder.launches.append((kernel, grid, list(args), constexprs))
    launch(kernel, grid, device, args, **constexprs)


def planned_launches(recorder: _Recorder):
    """(``PlannedLaunch``es, ``Workspace``, each role's slot name) replaying the recorded launches, every
    tensor argument a slot named by its role or temporary (matched by storage and offset) or a kept table;
    None where the call cannot be replayed so."""
    if recorder.refused:
        return None
    named = {**recorder.roles, **{name: t for name, (_, _, t) in recorder.temporaries.items()}}
    places = {(id(t._storage), t._offset): name for name, t in named.items()}
    launches = []
    for kernel, grid, args, constexprs in recorder.launches:
        planned = []
        for a in args:
            if isinstance(a, Tensor):
                name = places.get((id(a._storage), a._offset))
                if name is not None:
                    a = Slot(name)
                elif id(a) not in recorder.tables:
                    return None
            planned.append(a)
        launches.append(PlannedLaunch(kernel, grid, planned, constexprs))
    slots = {role: places[id(t._storage), t._offset] for role, t in recorder.roles.items()}
    pieces = {name: (shape, dtype) for name, (shape, dtype, _) in recorder.temporaries.items()}
    return launches, Workspace(pieces), slots


def _option_key(value):
    """A call's option (``n``, ``s``, ``dim``, ``norm``...) as part of a plan key: with its type (True == 1
    as keys), sequences item by item; None where it is none of those (the call is planned for itself)."""
    if value is None or type(value) in (int, bool, str, float):
        return type(value), value
    if type(value) in (list, tuple):
        items = tuple(map(_option_key, value))
        return None if None in items else (type(value), items)
    return None


def call_key(name: str, x: Tensor, *options):
    """The plan key of a call of ``name`` on ``x`` with ``options``, or None (no plan kept)."""
    if type(x) is not Tensor:
        return None
    items = tuple(map(_option_key, options))
    return None if None in items else (name, layout_key(x), items, dtypes._default_float)


_CALLS = PlanCache()


def planned_call(key, args: tuple, run, replay):
    """``run(*args)``, the general path of a call, for the first call of ``key``, its work recorded; later
    calls of ``key`` take ``replay(recorder, key, *args)``'s result, made once from that record, as
    ``execute(*args)`` (``key`` None: every call takes the general path)."""
    if key is None:
        return run(*args)
    execute = _CALLS.lookup(key)
    if execute is not None:
        return execute(*args)
    with _Recording(_Recorder()) as recorder:
        result = run(*args)
    with outside_arena():
        _CALLS.put(key, replay(recorder, key, *args))
    return result


lookup_call = _CALLS.lookup  # ``lookup_call(key)``: the replay ``planned_call`` made for ``key``, or None


# ---- passes -----------------------------------------------------------------------------------------

class Framing(NamedTuple):
    """How a source's rows are an stft's frames read from its unpadded signals (``kernels/fft.py``'s FRAME):
    the pad mode (a ``K.FRAME_*``), each batch dim's step in signal positions (the frames' dim: the hop),
    the center padding, the signals' length, and the centred window's first element and length."""
    mode: int
    positions: tuple
    pad: int
    length: int
    window_start: int
    window_count: int


class Signal(NamedTuple):
    """A tensor's rows along one dim: the batch's sizes and strides (every other dim, in order) and the
    signal's stride, in elements; ``framing``, where the rows are frames of an unpadded signal."""
    tensor: Tensor
    sizes: tuple
    strides: tuple
    stride: int
    framing: Framing | None = None


def signal(t: Tensor, dim: int) -> Signal:
    strides = t.stride()
    return Signal(t, tuple(s for d, s in enumerate(t.shape) if d != dim),
                  tuple(s for d, s in enumerate(strides) if d != dim), strides[dim])


def _batch_strides(t: Tensor, sizes: tuple) -> tuple:
    """The batch strides of a contiguous workspace (batch..., rest...)."""
    rest = S.numel(t.shape[len(sizes):])
    return tuple(rest * s for s in S.contiguous_strides(sizes))


class _Side(NamedTuple):
    """One side of a pass: the tensor, its outer rows' strides, the inner rows' stride, the signal's
    stride, and whether the signal index is grouped (``kernels/fft.py``); a framed source's ``framing``,
    its ``positions`` the outer rows' steps in positions and ``row_position`` the inner rows'."""
    tensor: Tensor
    outer_strides: tuple
    row_stride: int
    stride: int
    grouped: bool
    framing: Framing | None = None
    row_position: int = 0


def _precision(component, device) -> str:
    """The products' precision: IEEE on the FMA units, or for float32, where the facts ask for it
    (``fft_float32_parts``) and the device has bfloat16 matrix units, the six products of bfloat16 parts."""
    facts = backend_for(device).facts
    if component.name == "float32" and facts["kernels"].get("fft_float32_parts") and \
            "bfloat16" in (facts.get("matrix_unit") or {}).get("dtypes", ()):
        return PRECISION_BF16_PARTS.value
    return "ieee"


def _rows_per_program(p1: int, p2: int, inner_rows: int, facts: dict) -> int:
    """Rows a program takes: about the facts' ``fft_tile_elements`` padded elements, no more than the inner
    rows need, and enough that each product has TILE_MIN rows."""
    rows = max(1, facts["kernels"]["fft_tile_elements"] // (p1 * p2))
    return max(min(rows, _pow2(inner_rows)), TILE_MIN // p2)


# a pass's forms: its stages as dense DFTs (tl.dot), or for a power-of-two length the radix-2 form
DENSE, RADIX = "dense", "radix"


def _forms(n: int) -> list:
    """The forms a pass of length n may take, the interpreter's choice first."""
    return [{"FORM": RADIX}, {"FORM": DENSE}] if 4 <= n <= PASS_MAX and n & (n - 1) == 0 else [{"FORM": DENSE}]


def _pass_key(facts: dict, rows: int, n: int, component, input_kind, output_kind) -> str:
    """The launch key of a pass of ``rows`` rows of length n whose form is timed (``_forms``)."""
    return tuning.launch_key("fft_pass", facts, rows={"M": rows}, cols={"N": n}, dtypes=(component,),
                             flags=dict(INPUT=input_kind.value, OUTPUT=output_kind.value))


def transform_keys(facts: dict, batch: int, n: int, component, input_kind, output_kind, out_count: int) -> list:
    """The tuned launch keys ``transform`` of ``batch`` rows of length n forms (passes of a power-of-two
    length time their radix and dense forms), from the shapes alone: its passes as ``_run`` makes them."""
    if not batch:
        return []
    method = _method(n)
    if not method.bluestein:
        return _run_keys(facts, batch, method.passes, component, input_kind, output_kind, out_count == n)
    return (_run_keys(facts, batch, method.passes, component, input_kind, K.OUTPUT_COMPLEX, False) +
            _run_keys(facts, batch, method.passes, component, K.INPUT_COMPLEX, output_kind, False))


def _run_keys(facts, batch: int, passes: tuple, component, input_kind, output_kind, direct: bool) -> list:
    """``_run``'s pass keys (``direct``: its output written whole, no table multiplying it)."""
    def timed(rows, n, input_kind, output_kind):
        return [_pass_key(facts, rows, n, component, input_kind, output_kind)] if len(_forms(n)) > 1 else []
    if len(passes) == 1:
        return timed(batch, passes[0], input_kind, output_kind)
    na, rest = passes[0], math.prod(passes[1:])
    first = timed(batch * rest, na, input_kind, K.OUTPUT_COMPLEX)
    if len(passes) == 2:
        return first + timed(batch * na, rest, K.INPUT_COMPLEX, output_kind)
    return first + _run_keys(facts, batch * na, passes[1:], component, K.INPUT_COMPLEX,
                             output_kind if direct else K.OUTPUT_COMPLEX, True)


def _framing_arguments(source: _Side) -> list:
    """The pass's frame arguments (``kernels/fft.py``'s FRAME): zeros where the source is no framed one."""
    framing = source.framing
    if framing is None:
        return [padded_for_kernel((0,) * len(source.outer_strides), 0), 0, 0, 0, 0, 0]
    return [padded_for_kernel(framing.positions, 0), source.row_position, framing.pad, framing.length,
            framing.window_start, framing.window_count]


def _launch_pass(source: _Side, target: _Side, outer_shape: tuple, inner_rows: int, n: int, sign: int, *,
                 input_kind, output_kind, signal_length: int, in_count: int, out_count: int, scale: float = 1.0,
                 pre: Tensor | None = None, post: Tensor | None = None, post_strides: tuple = (0, 0)) -> None:
    device = target.tensor.device
    component = target.tensor.dtype.to_real()
    facts = backend_for(device).facts

    def arguments(config: dict, source: _Side, target: _Side) -> tuple:
        """(grid, arguments, constexprs) of the pass in the form ``config`` names."""
        if config["FORM"] == RADIX:
            n1, n2, p1, p2, tables = n, 1, n, 1, _radix_tables(n, sign, component, device)
            rows = max(1, min(facts["kernels"]["fft_tile_elements"] // n, _pow2(inner_rows)))
            stages = n.bit_length() - 1
        else:
            n1, n2 = _stages(n)
            p1, p2 = _tile(n1, n2)
            tables = _stage_tables(n1, n2, sign, component, device)
            rows = _rows_per_program(p1, p2, inner_rows, facts)
            stages = 0
        blocks = cdiv(inner_rows, rows)
        pre_kind = K.PRE_NONE if pre is None else K.PRE_COMPLEX if pre.dtype.is_complex else K.PRE_REAL
        in_components = 2 if source.tensor.dtype.is_complex else 1
        out_components = 2 if target.tensor.dtype.is_complex else 1
        index_64 = needs_index_64(*((t.shape, tuple(c * s for s in t.stride())) for t, c in
                                    ((source.tensor, in_components), (target.tensor, out_components))),
                                  count=S.numel(outer_shape) * blocks * rows * p1 * p2, reach=1)
        args = [source.tensor, target.tensor, tables, tables if pre is None else pre, tables if post is None else post,
                inner_rows, blocks, n1, n2, signal_length, in_count, out_count, source.row_stride, source.stride,
                target.row_stride, target.stride, padded_for_kernel(outer_shape),
                padded_for_kernel(source.outer_strides, 0), padded_for_kernel(target.outer_strides, 0), *post_strides,
                encode_scalar(scale, component), *_framing_arguments(source)]
        constexprs = dict(
            INPUT=input_kind.value, OUTPUT=output_kind.value, IN_GROUPED=source.grouped, OUT_GROUPED=target.grouped,
            PRE=pre_kind.value, POST=post is not None,
            FRAME=K.FRAME_NONE.value if source.framing is None else source.framing.mode, SCALED=scale != 1.0,
            OUTER_RANK=max(len(outer_shape), 1),
            ROWS=rows, P1=p1, P2=p2, PRECISION=_precision(component, device),
            PARTS_IN_F32=bool(facts["kernels"].get("interpreted")), INDEX_64=index_64, RADIX_STAGES=stages,
            num_warps=4 if rows * p1 * p2 <= 2048 else 8)
        return (S.numel(outer_shape) * blocks,), args, constexprs

    def timed(config: dict):
        """The pass in form ``config`` on tensors of its sides' layouts of its own (a pass in place must not
        run over its data while it is timed)."""
        probes = [side._replace(tensor=new_tensor(side.tensor.shape, side.tensor.dtype, device,
                                                  strides=side.tensor.stride())) for side in (source, target)]
        grid, args, constexprs = arguments(config, *probes)
        return lambda: launch(K.fft_pass, grid, device, args, **constexprs)

    forms = _forms(n)
    config = forms[0] if len(forms) == 1 else tuning.choose_timed(
        _pass_key(facts, S.numel(outer_shape) * inner_rows, n, component, input_kind, output_kind), facts, forms,
        timed)
    grid, args, constexprs = arguments(config, source, target)
    issue_planned(K.fft_pass, grid, device, args, **constexprs)


def _positions(source: Signal) -> tuple:
    """Each batch dim's step in signal positions of a framed source (zeros for any other)."""
    return (0,) * len(source.sizes) if source.framing is None else source.framing.positions


def _run(source: Signal, target: Signal, passes: tuple, sign: int, *, input_kind, output_kind, signal_length: int,
         in_count: int, out_count: int, scale: float = 1.0, pre: Tensor | None = None, post: Tensor | None = None):
    """A transform of length prod(passes) from ``source``'s rows into ``target``'s: one pass, or the
    four-step form's two through a workspace. ``pre`` multiplies the input by signal index, ``post`` the
    output by signal index (tables of the kernel's)."""
    sizes = source.sizes
    if len(passes) == 1:
        # the inner rows: the batch dim the source walks most closely (its loads coalesce along it)
        spread = [d for d, size in enumerate(sizes) if size > 1]
        inner = min(spread, key=lambda d: (abs(source.strides[d]), d)) if spread else None
        outer = [d for d in range(len(sizes)) if d != inner]
        positions = _positions(source)
        outer_shape, (source_outer, target_outer, positions_outer) = S.coalesce(
            [sizes[d] for d in outer], [source.strides[d] for d in outer], [target.strides[d] for d in outer],
            [positions[d] for d in outer])
        inner_rows = 1 if inner is None else sizes[inner]
        row_strides = (0, 0) if inner is None else (source.strides[inner], target.strides[inner])
        framing = source.framing and source.framing._replace(positions=positions_outer)
        _launch_pass(_Side(source.tensor, source_outer, row_strides[0], source.stride, False, framing,
                           0 if inner is None else positions[inner]),
                     _Side(target.tensor, target_outer, row_strides[1], target.stride, False), outer_shape, inner_rows,
                     passes[0], sign, input_kind=input_kind, output_kind=output_kind, signal_length=signal_length,
                     in_count=in_count, out_count=out_count, scale=scale, pre=pre, post=post, post_strides=(0, 1))
        return
    na, rest = passes[0], math.prod(passes[1:])
    dtype, device = target.tensor.dtype.to_real().to_complex(), target.tensor.device
    work = planned_scratch((*sizes, na, rest), dtype, device)
    work_strides = _batch_strides(work, sizes)
    # pass one: the rows (batch, j) of length na at stride rest, into work[batch, ka, j] times w_n^(j ka)
    shape, (source_outer, work_outer, positions_outer) = S.coalesce(sizes, source.strides, work_strides,
                                                                   _positions(source))
    framing = source.framing and source.framing._replace(positions=positions_outer)
    _launch_pass(_Side(source.tensor, source_outer, source.stride, source.stride, True, framing),
                 _Side(work, work_outer, 1, 1, True), shape, rest, na, sign, input_kind=input_kind,
                 output_kind=K.OUTPUT_COMPLEX, signal_length=signal_length, in_count=in_count, out_count=na * rest,
                 pre=pre, post=_twiddles(na, rest, sign, dtype, device), post_strides=(na, 1))
    if len(passes) == 2:
        # pass two: the rows (batch, ka) of length rest, into X[ka + na k]
        shape, (work_outer, target_outer) = S.coalesce(sizes, work_strides, target.strides)
        _launch_pass(_Side(work, work_outer, rest, 1, False),
                     _Side(target.tensor, target_outer, target.stride, target.stride, True), shape, na, rest, sign,
                     input_kind=K.INPUT_COMPLEX, output_kind=output_kind, signal_length=rest, in_count=rest,
                     out_count=out_count, scale=scale, post=post, post_strides=(1, na))
        return
    # more passes: the rows (batch, ka) by the passes left into X[ka + na k], a view of the target, or of a
    # whole workspace where the output is cut short or multiplied by a table (its index is no row's)
    direct = out_count == na * rest and post is None
    whole = target
    if not direct:
        whole = planned_scratch((*sizes, na * rest), dtype, device)
        whole = Signal(whole, sizes, _batch_strides(whole, sizes), 1)
    rows = Signal(work, (*sizes, na), (*work_strides, rest), 1)
    _run(rows, Signal(whole.tensor, (*sizes, na), (*whole.strides, whole.stride), whole.stride * na), passes[1:], sign,
         input_kind=K.INPUT_COMPLEX, output_kind=output_kind if direct else K.OUTPUT_COMPLEX, signal_length=rest,
         in_count=rest, out_count=rest, scale=scale if direct else 1.0)
    if not direct:
        _finish(whole.tensor, target, out_count, output_kind, scale, post)


def _finish(whole: Tensor, target: Signal, out_count: int, output_kind, scale: float, post: Tensor | None) -> None:
    """``whole``'s rows (batch..., n) cut to ``out_count``, times ``post`` by index and ``scale``, into
    ``target`` (their real parts for a real output)."""
    _refuse_replay()
    with scratch_scope():
        values = op_impl("narrow")(whole, -1, 0, out_count)
        if post is not None:
            values = op_impl("mul")(values, op_impl("narrow")(post, 0, 0, out_count))
        if scale != 1.0:
            values = op_impl("mul")(values, scale)
        if output_kind == K.OUTPUT_REAL:
            values = op_impl("select")(op_impl("view_as_real")(values), -1, 0)
    view = op_impl("as_strided")(target.tensor, (*target.sizes, out_count), (*target.strides, target.stride),
                             target.tensor.storage_offset())
    op_impl("copy_")(view, values)


def transform(source: Signal, target: Signal, n: int, sign: int, *, input_kind, output_kind, in_count: int,
              out_count: int, scale: float = 1.0, window: Tensor | None = None) -> None:
    """The length-n DFT of ``source``'s rows (``in_count`` elements read, zeros after; a Hermitian input's
    one-sided half) into ``target``'s (``out_count`` elements written), times ``scale``; ``window`` (real or
    complex, n entries) multiplies the input first."""
    if not S.numel(source.sizes):
        return
    method = _method(n)
    if not method.bluestein:
        _run(source, target, method.passes, sign, input_kind=input_kind, output_kind=output_kind, signal_length=n,
             in_count=in_count, out_count=out_count, scale=scale, pre=window)
        return
    m = method.bluestein
    device = target.tensor.device
    dtype = target.tensor.dtype.to_real().to_complex()
    chirp = _chirp(n, sign, dtype, device)
    if window is not None:
        _refuse_replay()
    with scratch_scope():
        pre = chirp if window is None else op_impl("mul")(chirp, window)
    spectrum = planned_scratch((*source.sizes, m), dtype, device)
    spectrum = Signal(spectrum, source.sizes, _batch_strides(spectrum, source.sizes), 1)
    _run(source, spectrum, method.passes, FORWARD, input_kind=input_kind, output_kind=K.OUTPUT_COMPLEX,
         signal_length=n, in_count=min(in_count, n), out_count=m, pre=pre,
         post=_chirp_spectrum(n, m, sign, dtype, device))
    _run(spectrum, target, method.passes, INVERSE, input_kind=K.INPUT_COMPLEX, output_kind=output_kind,
         signal_length=m, in_count=m, out_count=min(out_count, n), scale=scale / m, post=chirp)


def transform_workspace(batch: int, n: int, component, windowed: bool = False) -> int:
    """The workspace bytes ``transform`` takes for ``batch`` rows of length n, at most (its ``scratch_tensor``s:
    a pass's output between passes, past two passes a whole output and its products by a table and a scale)."""
    method = _method(n)
    row_bytes = 2 * component.itemsize * (method.bluestein or n)
    between = len(method.passes) - 1
    ending = 3 if between > 1 else 0
    sizes = [batch * row_bytes] * ((between + ending) * (2 if method.bluestein else 1))
    if method.bluestein:
        sizes.append(batch * row_bytes)
        if windowed:
            sizes.append(2 * component.itemsize * n)
    return workspace_bytes(*sizes)


def transform_passes(n: int) -> int:
    """Passes over memory of a transform of length n."""
    method = _method(n)
    return len(method.passes) * (2 if method.bluestein else 1)


def transform_flops(batch: int, n: int, real_side: bool = False) -> int:
    """5 n log2 n a complex row (half that where one side is real), Bluestein's two transforms of m and
    its three products by tables."""
    method = _method(n)
    length = method.bluestein or n
    flops = 5 * length * math.log2(max(length, 2)) * (2 if method.bluestein else 1) + (18 * length if method.bluestein
                                                                                       else 0)
    return int(batch * flops * (0.5 if real_side else 1))


# ---- the transforms' plans, from metadata alone ---------------------------------------------------

C2C, R2C, C2R = "c2c", "r2c", "c2r"
_NORMS = (None, "backward", "forward", "ortho")


class _Step(NamedTuple):
    """One dim's transform. The first reads the (promoted, truncated) input and writes the buffer's part of
    the input's extents; later ones transform the buffer in place; a complex-to-real transform's last reads
    the buffer (or the input, alone) and writes the output."""
    dim: int
    n: int
    in_count: int
    out_count: int
    input_kind: object
    output_kind: object
    scale: float
    from_input: bool


class _Plan(NamedTuple):
    out_shape: tuple
    out_dtype: object
    compute: object       # the input's dtype once promoted (a copy where it differs)
    source_sizes: tuple   # the input's extents once truncated (views)
    buffer_shape: tuple   # the tensor the steps but a complex-to-real one's last write (the output but there)
    staged: bool          # whether that buffer is a temporary (a complex-to-real transform of several dims)
    sign: int
    steps: tuple
    zeroed: bool          # whether the buffer is zeroed first (the input padded along a later step's dim)
    cost: Cost


def _fft_dtype(dtype):
    """The dtype a transform computes an input of ``dtype`` in, as torch promotes: complex and float32/64
    as they are, integers and bools to the default float; float16, bfloat16 and float8 refused."""
    if dtype.is_complex:
        return dtype
    if not dtype.is_floating_point:
        dtype = get_default_dtype()
    if dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"Unsupported dtype {dtype.name}")
    return dtype


def _norm_scale(norm, n: int, forward: bool) -> float:
    """The factor a transform of n points is scaled by under torch's ``norm`` of its direction."""
    if norm not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    if norm == "ortho":
        return 1 / math.sqrt(n)
    return 1 / n if (norm == "forward") == forward else 1.0


def _plan(kind: str, sign: int, shape: tuple, input_dtype, dtype, dims: tuple, sizes: tuple, scales: tuple) -> _Plan:
    """The plan of a transform of ``kind`` over ``dims`` of an input of ``shape`` and ``input_dtype`` computed
    in ``dtype``: ``sizes`` the signal lengths (a complex-to-real transform's last the output's), ``scales``
    each dim's factor."""
    shape = tuple(shape)
    component, complex_dtype = dtype.to_real(), dtype.to_real().to_complex()
    out_shape, source = list(shape), list(shape)
    for d, n in zip(dims, sizes):
        out_shape[d] = n
        source[d] = min(shape[d], n)
    buffer = list(out_shape)
    if kind == R2C:
        out_shape[dims[-1]] = buffer[dims[-1]] = sizes[-1] // 2 + 1
    if kind == C2R:
        source[dims[-1]] = buffer[dims[-1]] = min(shape[dims[-1]], sizes[-1] // 2 + 1)
    order = (list(reversed(dims)) if kind == C2C else [dims[-1], *reversed(dims[:-1])] if kind == R2C
             else [*reversed(dims[:-1]), dims[-1]])
    steps, temporaries = [], []
    flops = read = written = 0
    for i, d in enumerate(order):
        n = sizes[dims.index(d)]
        last = kind == C2R and d == dims[-1]
        if i == 0:
            extents = source
            target = [buffer[e] if e == d or e not in dims else source[e] for e in range(len(shape))]
        else:
            extents = target = buffer
        if last:
            target = out_shape
        input_kind = (K.INPUT_HERMITIAN if last else K.INPUT_COMPLEX if i or dtype.is_complex else K.INPUT_REAL)
        steps.append(_Step(d, n, extents[d], target[d], input_kind, K.OUTPUT_REAL if last else K.OUTPUT_COMPLEX,
                           scales[dims.index(d)], i == 0))
        rows = S.numel(target) // max(target[d], 1)
        temporaries.append(transform_workspace(rows, n, component))
        flops += transform_flops(rows, n, input_kind != K.INPUT_COMPLEX or last)
        between = rows * (_method(n).bluestein or n) * complex_dtype.itemsize * (transform_passes(n) - 1)
        read += S.numel(extents) * (component if input_kind == K.INPUT_REAL else complex_dtype).itemsize + between
        written += S.numel(target) * (component if last else complex_dtype).itemsize + between
    zeroed = any(source[e] < buffer[e] for e in order[1:])
    if zeroed:
        written += S.numel(buffer) * complex_dtype.itemsize
    if dtype is not input_dtype:
        temporaries.append(workspace_bytes(S.numel(source) * dtype.itemsize))
        read += S.numel(source) * input_dtype.itemsize
        written += S.numel(source) * dtype.itemsize
    staged = kind == C2R and len(dims) > 1
    if staged:
        temporaries.append(workspace_bytes(S.numel(buffer) * complex_dtype.itemsize))
    if not order:
        read, written = S.numel(shape) * input_dtype.itemsize, S.numel(shape) * complex_dtype.itemsize
    return _Plan(tuple(out_shape), component if kind == C2R else complex_dtype, dtype, tuple(source),
                 tuple(buffer), staged, sign, tuple(steps), zeroed,
                 Cost(flops=flops, bytes_read=read, bytes_written=written, workspace=sum(temporaries)))


def _narrowed(x: Tensor, sizes: tuple) -> Tensor:
    for d, size in enumerate(sizes):
        if x.shape[d] != size:
            x = op_impl("narrow")(x, d, 0, size)
    return x


def _execute(plan: _Plan, x: Tensor) -> Tensor:
    """Run ``plan`` on ``x``: its output (the general path; a call being planned notes its source, output
    and buffer as ``src``, ``out`` and ``buffer``)."""
    device = x.device
    x = _narrowed(x, plan.source_sizes)
    out = new_tensor(plan.out_shape, plan.out_dtype, device)
    if not plan.steps:
        _refuse_replay()
        return op_impl("copy_")(out, x)
    if x.dtype is not plan.compute:
        with scratch_scope():
            x = op_impl("to")(x, dtype=plan.compute)
    buffer = planned_scratch(plan.buffer_shape, plan.compute.to_real().to_complex(), device) if plan.staged else out
    for name, t in (("src", x), ("out", out), ("buffer", buffer)):
        note_role(name, t)
    if plan.zeroed:
        op_impl("fill_")(buffer, 0)
    for step in plan.steps:
        source = x if step.from_input else buffer
        target = out if step.output_kind == K.OUTPUT_REAL else buffer
        if step.from_input and target is buffer:
            target = _narrowed(buffer, tuple(buffer.shape[e] if e == step.dim else x.shape[e]
                                             for e in range(buffer.ndim)))
        transform(signal(source, step.dim), signal(target, step.dim), step.n, plan.sign,
                  input_kind=step.input_kind, output_kind=step.output_kind, in_count=step.in_count,
                  out_count=step.out_count, scale=step.scale)
    return out


def plan_keys(facts: dict, plan: _Plan) -> list:
    """The tuned launch keys ``_execute`` forms for ``plan``: each step's transform over the rows of the
    tensor it reads (the truncated input, or the buffer)."""
    keys = []
    component = plan.compute.to_real()
    for step in plan.steps:
        sizes = plan.source_sizes if step.from_input else plan.buffer_shape
        batch = math.prod(size for d, size in enumerate(sizes) if d != step.dim)
        keys += transform_keys(facts, batch, step.n, component, step.input_kind, step.output_kind, step.out_count)
    return keys


def _replay(plan: _Plan):
    """``replay(recorder, key, x)`` for ``planned_call``: a call of ``plan``'s layout as its recorded launches,
    with fresh output and temporaries; where the input converts or the buffer is zeroed first, those ops
    run before them. One from the source to a fresh output alone is a ``LaunchCall``, which binds its
    launches where kernels compile."""
    def replay(recorder: _Recorder, key, x: Tensor):
        planned = planned_launches(recorder)
        if planned is None:
            return functools.partial(_execute, plan)
        launches, workspace, slots = planned
        device = x.device
        fresh_output = fresh_tensor_maker(plan.out_shape, plan.out_dtype, device)
        convert = x.dtype is not plan.compute
        if not convert and not plan.zeroed and launches:
            return binding_run(_CALLS, key, LaunchCall(device, launches, workspace, "src",
                                                       [(("out", "buffer"), fresh_output)]), 0)

        def execute(x: Tensor) -> Tensor:
            out = fresh_output()
            if convert:
                with scratch_scope():
                    x = op_impl("to")(_narrowed(x, plan.source_sizes), dtype=plan.compute)
            tensors = {"src": x, "out": out, "buffer": out}
            workspace.allocate(device, tensors)
            if plan.zeroed:
                op_impl("fill_")(tensors[slots["buffer"]], 0)
            for launched in launches:
                launched(device, tensors)
            return out
        return execute
    return replay


# ---- torch.fft's transforms: one table ------------------------------------------------------------

class _Family(NamedTuple):
    kind: str
    forward: bool  # the direction the norm counts: hfft goes forward, ihfft back
    sign: int


FAMILIES = {"fft": _Family(C2C, True, FORWARD), "ifft": _Family(C2C, False, INVERSE),
            "rfft": _Family(R2C, True, FORWARD), "irfft": _Family(C2R, False, INVERSE),
            "hfft": _Family(C2R, True, FORWARD), "ihfft": _Family(R2C, False, INVERSE)}
# a transform's arities: its name's suffix, its dims' default
ARITIES = {"": -1, "2": (-2, -1), "n": None}


def _checked_dtype(name: str, family: _Family, dtype, several: bool):
    if family.kind == R2C and dtype.is_complex:
        raise RuntimeError(f"{name} expects a real-valued input tensor, but got {dtype.name}" if several else
                           f"{name} expects a real input tensor, but got {dtype.name}")
    promoted = _fft_dtype(dtype)
    return promoted.to_complex() if family.kind == C2R else promoted


def _one_dim(family: _Family, name: str, shape: tuple, n, dim) -> tuple:
    if isinstance(dim, bool) or not hasattr(dim, "__index__"):
        raise TypeError(f"fft_{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    if not shape:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = S.wrap_dim(dim, len(shape))
    if n is None:
        n = 2 * (shape[d] - 1) if family.kind == C2R else shape[d]
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return (d,), (int(n),)


def _as_tuple(value) -> tuple:
    return (value,) if hasattr(value, "__index__") else tuple(value)


def _several_dims(family: _Family, name: str, shape: tuple, s, dim) -> tuple:
    """(dims, sizes) as torch canonicalizes ``s`` and ``dim``: dims wrapped and unique, sizes -1 for the
    input's, a complex-to-real transform's last size the output's."""
    ndim = len(shape)
    if dim is not None:
        dims = tuple(S.wrap_dim(d, ndim) for d in _as_tuple(dim))
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = tuple(int(v) for v in _as_tuple(s))
        if dim is not None and len(dims) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {ndim} dimensions.")
        if dim is None:
            dims = tuple(range(ndim - len(s), ndim))
        sizes = tuple(shape[d] if v == -1 else v for v, d in zip(s, dims))
    else:
        if dim is None:
            dims = tuple(range(ndim))
        sizes = tuple(shape[d] for d in dims)
    for n in sizes:
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
    if family.kind != C2C and not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    if family.kind == C2R:
        last = 2 * (shape[dims[-1]] - 1) if s is None or s[-1] == -1 else sizes[-1]
        if last < 1:
            raise RuntimeError(f"Invalid number of data points ({last}) specified")
        sizes = (*sizes[:-1], last)
    return dims, sizes


def _transform_plan(name: str, family: _Family, arity: str, x, size_argument, dim, norm) -> _Plan:
    dtype = _checked_dtype(name, family, x.dtype, arity != "")
    shape = tuple(x.shape)
    dims, sizes = (_one_dim if arity == "" else _several_dims)(family, name, shape, size_argument, dim)
    scales = tuple(_norm_scale(norm, n, family.forward) for n in sizes) or (_norm_scale(norm, 1, family.forward),)
    return _plan(family.kind, family.sign, shape, x.dtype, dtype, dims, sizes, scales[:len(sizes)])


def _rules(name: str, plan_of) -> dict:
    """The meta, cost and key rules of op ``name`` whose plan is ``plan_of(arguments)`` (meta and cost on
    bound arguments)."""
    return dict(meta=lambda a: TensorMeta(*plan_of(a)[:2]), cost=lambda a: plan_of(a).cost, bound=True,
                key=bound_key_rule(name, lambda facts, a: plan_keys(facts, plan_of(a))))


def bound_key_rule(name: str, keys_of):
    """A key rule, called as the op ``name`` is, that hands ``keys_of(facts, arguments)`` the call's arguments
    bound to its implementation's parameters (bound at the first call: the op is registered by then)."""
    binders = []

    def key(facts, *args, **kwargs):
        if not binders:
            binders.append(arguments_binder(name, get(name).impl))
        return keys_of(facts, binders[0](*args, **kwargs))
    return key


def _declare_transform(name: str, family: _Family, arity: str):
    full = name + arity

    def plan_of(a) -> _Plan:
        return _transform_plan(full, family, arity, a.input, a.n if arity == "" else a.s, a.dim, a.norm)

    def run(input, size, dim, norm):
        plan = _transform_plan(full, family, arity, input, size, dim, norm)
        return planned_call(call_key(full, input, size, dim, norm), (input,), functools.partial(_execute, plan),
                            _replay(plan))

    if arity == "":
        def impl(input, n=None, dim=-1, norm=None):
            execute = _CALLS.lookup(call_key(full, input, n, dim, norm))
            return execute(input) if execute is not None else run(input, n, dim, norm)
    else:
        default = ARITIES[arity]

        def impl(input, s=None, dim=default, norm=None):
            execute = _CALLS.lookup(call_key(full, input, s, dim, norm))
            return execute(input) if execute is not None else run(input, s, dim, norm)
    impl.__name__ = impl.__qualname__ = full
    impl.__doc__ = f"torch.fft.{full}: {_DOCS[name]}{'' if arity == '' else ' over several dims'}."
    return register(f"fft.{full}", family="fft", aten=[f"aten::fft_{full}.default"], api=(), variants=(OUT,),
                    **_rules(f"fft.{full}", plan_of))(impl)


_DOCS = {"fft": "the discrete Fourier transform", "ifft": "the inverse discrete Fourier transform",
         "rfft": "the one-sided transform of a real signal", "irfft": "the real signal of a one-sided spectrum",
         "hfft": "the real transform of a one-sided Hermitian signal",
         "ihfft": "the one-sided inverse transform of a real signal"}

TRANSFORMS = {name + arity: _declare_transform(name, family, arity)
              for name, family in FAMILIES.items() for arity in ARITIES}


# ---- ATen's primitives: a norm mode, signs and one-sidedness given --------------------------------

# ATen's fft_norm_mode: none, by 1/sqrt(n), by 1/n
_NORM_MODES = (lambda n: 1.0, lambda n: 1 / math.sqrt(n), lambda n: 1 / n)


def _primitive_plan(name: str, kind: str, sign: int, x, dim, normalization: int, last_dim_size=None) -> _Plan:
    real = name == "_fft_r2c"
    if x.dtype.is_complex == real:
        raise RuntimeError(f"{name} expects a {'real' if real else 'complex'} input tensor, but got {x.dtype.name}")
    dtype = _fft_dtype(x.dtype)
    dims = tuple(S.wrap_dim(d, len(x.shape)) for d in _as_tuple(dim))
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    sizes = tuple(x.shape[d] for d in dims)
    if kind == C2R:
        sizes = (*sizes[:-1], int(last_dim_size))
    scales = tuple(_NORM_MODES[normalization](n) for n in sizes)
    return _plan(kind, sign, tuple(x.shape), x.dtype, dtype, dims, sizes, scales)


def _c2c_plan(x, dim, normalization, forward):
    return _primitive_plan("_fft_c2c", C2C, FORWARD if forward else INVERSE, x, dim, normalization)


def _r2c_plan(x, dim, normalization, onesided):
    return _primitive_plan("_fft_r2c", R2C if onesided else C2C, FORWARD, x, dim, normalization)


def _c2r_plan(x, dim, normalization, last_dim_size):
    return _primitive_plan("_fft_c2r", C2R, INVERSE, x, dim, normalization, last_dim_size)


def _primitive_call(name: str, plan_of, x, *options):
    """A primitive's call through its layout's plan (``planned_call``)."""
    key = call_key(name, x, *options)
    execute = _CALLS.lookup(key)
    if execute is not None:
        return execute(x)
    plan = plan_of(x, *options)
    return planned_call(key, (x,), functools.partial(_execute, plan), _replay(plan))


@register("_fft_c2c", family="fft", aten=["aten::_fft_c2c.default"], api=(), variants=(OUT,),
          **_rules("_fft_c2c", lambda a: _c2c_plan(a.self, a.dim, a.normalization, a.forward)))
def fft_c2c(self, dim, normalization: int, forward: bool):
    """aten::_fft_c2c: a complex transform over ``dim``, forward or inverse, scaled by the norm mode."""
    return _primitive_call("_fft_c2c", _c2c_plan, self, dim, normalization, forward)


@register("_fft_r2c", family="fft", aten=["aten::_fft_r2c.default"], api=(), variants=(OUT,),
          **_rules("_fft_r2c", lambda a: _r2c_plan(a.self, a.dim, a.normalization, a.onesided)))
def fft_r2c(self, dim, normalization: int, onesided: bool):
    """aten::_fft_r2c: the forward transform of a real input over ``dim``, one-sided along its last."""
    return _primitive_call("_fft_r2c", _r2c_plan, self, dim, normalization, onesided)


@register("_fft_c2r", family="fft", aten=["aten::_fft_c2r.default"], api=(), variants=(OUT,),
          **_rules("_fft_c2r", lambda a: _c2r_plan(a.self, a.dim, a.normalization, a.last_dim_size)))
def fft_c2r(self, dim, normalization: int, last_dim_size: int):
    """aten::_fft_c2r: the inverse transform over ``dim`` of a one-sided Hermitian input, real, its last dim
    ``last_dim_size`` long."""
    return _primitive_call("_fft_c2r", _c2r_plan, self, dim, normalization, last_dim_size)


# ---- sample frequencies and shifts ------------------------------------------------------------------

def _frequencies_meta(name: str, n, dtype):
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dtype = get_default_dtype() if dtype is None else get_dtype(dtype)
    if not (dtype.is_floating_point or dtype.is_complex) or dtype.storage_only:
        raise RuntimeError(f"{name} requires a floating point or complex dtype")
    return TensorMeta((int(n) // 2 + 1 if name == "rfftfreq" else int(n),), dtype)


def _frequencies(name: str, n, d, dtype, device, requires_grad):
    """The sample frequencies, as torch makes them: the integers k (negative past the middle for fftfreq),
    in ``dtype``, times 1 / (n d) (a double: infinity for n d = 0, so rfftfreq(0) is [nan])."""
    refuse_requires_grad(requires_grad, f"fft.{name}")
    meta = _frequencies_meta(name, n, dtype)
    k = np.arange(meta.shape[0])
    if name == "fftfreq":
        k[(n + 1) // 2:] -= n
    with scratch_scope():
        integers = tensor(k, dtype=meta.dtype, device=device)
    return op_impl("mul")(integers, 1.0 / (n * d) if n * d else math.inf)


def _declare_frequencies(name: str):
    def impl(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
        return _frequencies(name, n, d, dtype, device, requires_grad)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"torch.fft.{name}: the sample frequencies of a{' one-sided' if name == 'rfftfreq' else 'n'} " \
                   f"n-point transform at spacing d."

    def cost(a):
        made = _frequencies_meta(name, a.n, a.dtype)
        return Cost(flops=made.shape[0], bytes_written=made.shape[0] * made.dtype.itemsize,
                    workspace=workspace_bytes(made.shape[0] * made.dtype.itemsize))
    return register(f"fft.{name}", family="creation", aten=[f"aten::fft_{name}.default"], api=(), variants=(OUT,),
                    meta=lambda a: _frequencies_meta(name, a.n, a.dtype), cost=cost, bound=True)(impl)


def _shifts(name: str, x, dim) -> tuple:
    """(shifts, dims) of ``fftshift``/``ifftshift``: every dim's half, rounded down or up, by default all."""
    dims = tuple(range(len(x.shape))) if dim is None else tuple(S.wrap_dim(d, len(x.shape)) for d in _as_tuple(dim))
    up = name == "ifftshift"
    return tuple((x.shape[d] + up) // 2 for d in dims), dims


def _declare_shift(name: str):
    def impl(input, dim=None):
        shifts, dims = _shifts(name, input, dim)
        if not dims:
            return op_impl("clone")(input)
        return op_impl("roll")(input, shifts, dims)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"torch.fft.{name}: the zero frequency moved {'back from' if name == 'ifftshift' else 'to'} " \
                   f"the middle of each dim (``roll`` by half its length)."

    def meta(a):
        _shifts(name, a.input, a.dim)
        return TensorMeta(tuple(a.input.shape), a.input.dtype)

    def cost(a):
        made = meta(a)
        return Cost(bytes_read=S.numel(made.shape) * made.dtype.itemsize,
                    bytes_written=S.numel(made.shape) * made.dtype.itemsize)
    return register(f"fft.{name}", family="shape", aten=[f"aten::fft_{name}.default"], api=(), meta=meta, cost=cost,
                    bound=True)(impl)


HELPERS = {name: _declare_frequencies(name) for name in ("fftfreq", "rfftfreq")}
HELPERS.update({name: _declare_shift(name) for name in ("fftshift", "ifftshift")})


# ---- samples ---------------------------------------------------------------------------------------

def _numpy_axes(ndim: int, s, dim) -> list:
    """NumPy's axes for torch's ``s`` and ``dim``: ``dim`` as given, else the last len(s) dims, else all."""
    if dim is not None:
        return [d % ndim for d in _as_tuple(dim)]
    return list(range(ndim - len(_as_tuple(s)), ndim)) if s is not None else list(range(ndim))


def _numpy_transform(name: str, arity: str):
    """NumPy's float64 transform behind ``name + arity``; hfft and ihfft of several dims, which NumPy lacks,
    as a complex transform of the leading dims and the one-dim transform of the last."""
    bind = arguments_binder(name + arity, TRANSFORMS[name + arity].impl)

    def reference(*args, **kwargs):
        a = bind(*args, **kwargs)
        x = np.asarray(a.input)
        x = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
        if arity == "":
            return getattr(np.fft, name)(x, n=a.n, axis=a.dim, norm=a.norm)
        axes = _numpy_axes(x.ndim, a.s, a.dim)
        sizes = None if a.s is None else list(_as_tuple(a.s))
        if name == "hfft":
            head = np.fft.fftn(x, s=sizes and sizes[:-1], axes=axes[:-1], norm=a.norm) if len(axes) > 1 else x
            return np.fft.hfft(head, n=sizes and sizes[-1], axis=axes[-1], norm=a.norm)
        if name == "ihfft":
            last = np.fft.ihfft(x, n=sizes and sizes[-1], axis=axes[-1], norm=a.norm)
            return np.fft.ifftn(last, s=sizes and sizes[:-1], axes=axes[:-1], norm=a.norm) if len(axes) > 1 else last
        return getattr(np.fft, name + "n")(x, s=sizes, axes=axes, norm=a.norm)
    return reference


def _transform_cases(name: str, arity: str) -> tuple:
    kind = FAMILIES[name].kind
    first, wide = ("complex64", "complex128") if kind == C2R else ("float32", "float64")
    other = "complex64" if kind == C2C else first  # fft and ifft take complex inputs, rfft and ihfft do not
    if arity == "":
        return (sample(operand(3, 8, dtype=first)),
                sample(operand(4, 5, dtype=other, layout="transposed"), n=7, dim=0, norm="ortho"),
                sample(operand(6, dtype=wide), n=4, norm="forward"),
                sample(operand(2, 6, dtype=first, layout="sliced"), 9, -1, "backward"),
                sample(operand(2, 3, dtype="int64"), dim=0))
    several = (0, 2) if arity == "n" else None
    return (sample(operand(3, 4, dtype=first)),
            sample(operand(2, 3, 5, dtype=other, layout="transposed"), s=(4, 6), norm="ortho"),
            sample(operand(3, 2, 4, dtype=wide), (2, 7), *(() if several is None else (several,)), norm="forward"),
            sample(operand(2, 3, 4, dtype=first), dim=several or (0, 1)),
            sample(operand(5, 2, dtype="int64")))


def _norm_names(forward: bool) -> tuple:
    """NumPy's norm names of ATen's norm modes (none, 1/sqrt(n), 1/n) in a direction."""
    return ("backward", "ortho", "forward") if forward else ("forward", "ortho", "backward")


def _c2c_reference(x, dim, normalization, forward):
    transform = np.fft.fftn if forward else np.fft.ifftn
    return transform(x.astype(np.complex128), axes=list(dim), norm=_norm_names(forward)[normalization])


def _r2c_reference(x, dim, normalization, onesided):
    transform = np.fft.rfftn if onesided else np.fft.fftn
    return transform(x.astype(np.float64), axes=list(dim), norm=_norm_names(True)[normalization])


def _c2r_reference(x, dim, normalization, last_dim_size):
    dim = list(dim)
    return np.fft.irfftn(x.astype(np.complex128), s=[x.shape[d] for d in dim[:-1]] + [last_dim_size], axes=dim,
                         norm=_norm_names(False)[normalization])


def _frequencies_reference(name: str):
    def reference(n, d=1.0, **kwargs):
        return getattr(np.fft, name)(n, d)
    return reference


def _shift_reference(name: str):
    def reference(x, dim=None):
        return getattr(np.fft, name)(x, axes=dim)
    return reference


_COMPLEX = dict(dtype="complex64")
_SAMPLES = {
    **{f"fft.{name}{arity}": Samples(_transform_cases(name, arity), _numpy_transform(name, arity))
       for name in FAMILIES for arity in ARITIES},
    "_fft_c2c": Samples((sample(operand(3, 4, **_COMPLEX), [1], 0, True),
                         sample(operand(2, 3, 4, **_COMPLEX, layout="transposed"), [0, 2], 2, False),
                         sample(operand(5, 3, dtype="complex128"), [0], 1, True)), _c2c_reference),
    "_fft_r2c": Samples((sample(operand(3, 6), [1], 0, True), sample(operand(2, 3, 4), [0, 2], 1, False),
                         sample(operand(4, 5, dtype="float64", layout="sliced"), [0, 1], 2, True)), _r2c_reference),
    "_fft_c2r": Samples((sample(operand(3, 4, **_COMPLEX), [1], 2, 6), sample(operand(2, 3, 4, **_COMPLEX), [0, 2], 0, 7),
                         sample(operand(4, 5, dtype="complex128"), [0, 1], 1, 8)), _c2r_reference),
    **{f"fft.{name}": Samples((sample(5), sample(8, 0.5), sample(1, dtype=get_dtype("float64"))),
                              _frequencies_reference(name)) for name in ("fftfreq", "rfftfreq")},
    **{f"fft.{name}": Samples((sample(operand(3, 4)), sample(operand(5, dtype="complex64"), dim=0),
                               sample(operand(2, 3, 5, layout="transposed"), dim=(0, 2)),
                               sample(operand(4, 3, dtype="int64"), dim=-1)), _shift_reference(name))
       for name in ("fftshift", "ifftshift")},
}


def _fft_samples(op):
    return _SAMPLES.get(op.name)


for _family in ("fft", "creation", "shape"):
    family_samples(_family, _fft_samples)
