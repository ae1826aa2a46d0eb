"""``stft`` and ``istft`` as torch has them: frames of a (padded) signal, windowed and transformed by
``ops/fft.py``'s one-dim transform, and back by overlap-add divided by the window's envelope (one pass).

stft's transform reads its frames straight from the unpadded signal, the center padding's positions mapped
into it by the pad mode and the window multiplied in the same loads (``kernels/fft.py``'s FRAME); its result
is laid out as torch's, frames innermost in memory (a transposed view of (batch, frames, frequencies)).
Checks and their messages are torch's.
"""
from __future__ import annotations

import math

import numpy as np

from .. import shape as S
from ..allocation import fresh_tensor_maker, new_tensor, scratch_scope, scratch_tensor, workspace_bytes
from ..kernels import fft as K
from ..lowering import needs_index_64
from ..promotion import promote_types
from ..tensor import Tensor
from .aten_calls import positional_as_keywords
from .fft import (FORWARD, INVERSE, Framing, Signal, bound_key_rule, call_key, issue_planned, lookup_call, note_role,
                  planned_call, planned_launches, planned_scratch, signal, transform, transform_flops, transform_keys,
                  transform_workspace, _fft_dtype, _method)
from .plans import layout_key
from .registry import Cost, TensorMeta, family_samples, get, register
from .samples import Samples, by_name, operand, sample

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _op(name):
    return get(name).impl


# ---- stft -------------------------------------------------------------------------------------------

def _window_length(name: str, n_fft: int, hop_length, win_length) -> tuple:
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    return hop, win


def _stft_plan(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided, return_complex):
    """(output meta, the frames' dtype, (batch, padded length, frames, frequencies), onesided) of an stft,
    the call checked as torch checks it."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError("stft: expected a tensor of floating point or complex values")
    if len(x.shape) not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, got {len(x.shape)}D")
    n_fft = int(n_fft)
    hop, win = _window_length("stft", n_fft, hop_length, win_length)
    length = x.shape[-1]
    if center:
        if pad_mode not in _PAD_MODES:
            raise NotImplementedError(f"Unrecognised padding mode {pad_mode}")
        if pad_mode == "reflect" and n_fft // 2 >= max(length, 1):
            raise RuntimeError(f"stft: reflect padding of n_fft // 2 = {n_fft // 2} must be smaller than the signal's "
                               f"length {length}")
        if pad_mode in ("replicate", "circular") and not length:
            raise RuntimeError(f"stft: {pad_mode} padding needs a signal of at least one element")
        length += 2 * (n_fft // 2)
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(f"stft: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (len(window.shape) != 1 or window.shape[0] != win):
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length={win}, but got window with "
                           f"size {list(window.shape)}")
    dtype = x.dtype if window is None else promote_types(x.dtype, window.dtype)
    dtype = _fft_dtype(dtype)
    complex_frames = dtype.is_complex
    if return_complex is None:
        if not complex_frames:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                               "require that return_complex=True in a future PyTorch release.")
        return_complex = True
    onesided = (not complex_frames) if onesided is None else bool(onesided)
    if complex_frames and onesided:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    batch = x.shape[0] if len(x.shape) == 2 else 1
    frames = 1 + (length - n_fft) // hop
    frequencies = n_fft // 2 + 1 if onesided else n_fft
    shape = (*x.shape[:-1], frequencies, frames)
    complex_dtype = dtype.to_real().to_complex()
    meta = TensorMeta(shape, complex_dtype) if return_complex else TensorMeta((*shape, 2), dtype.to_real())
    return meta, dtype, (batch, length, frames, frequencies, hop, win)


def _stft_rules():
    def meta(a):
        return _stft_plan(a.input, a.n_fft, a.hop_length, a.win_length, a.window, a.center, a.pad_mode,
                          a.normalized, a.onesided, a.return_complex)[0]

    def cost(a):
        made, dtype, (batch, length, frames, frequencies, hop, win) = _stft_plan(
            a.input, a.n_fft, a.hop_length, a.win_length, a.window, a.center, a.pad_mode, a.normalized, a.onesided,
            a.return_complex)
        n_fft = int(a.n_fft)
        temporaries = [transform_workspace(batch * frames, n_fft, dtype.to_real(), windowed=True)]
        if a.window is not None or _method(n_fft).bluestein:  # at most: the window padded (strided, Bluestein)
            temporaries.append(workspace_bytes(n_fft * dtype.itemsize))
        return Cost(flops=transform_flops(batch * frames, n_fft, not dtype.is_complex) + batch * frames * n_fft,
                    bytes_read=batch * frames * n_fft * dtype.itemsize, bytes_written=S.numel(made.shape) *
                    made.dtype.itemsize, workspace=sum(temporaries))
    def keys(facts, a):
        _, dtype, (batch, _, frames, frequencies, _, _) = _stft_plan(
            a.input, a.n_fft, a.hop_length, a.win_length, a.window, a.center, a.pad_mode, a.normalized, a.onesided,
            a.return_complex)
        return transform_keys(facts, batch * frames, int(a.n_fft), dtype.to_real(),
                              K.INPUT_COMPLEX if dtype.is_complex else K.INPUT_REAL, K.OUTPUT_COMPLEX, frequencies)
    return dict(meta=meta, cost=cost, bound=True, key=bound_key_rule("stft", keys))


def _padded_window(window, n_fft: int, win: int, dtype, device):
    """The window zero-padded to n_fft, centred as torch centres it, in ``dtype`` (a contiguous one as long
    as the frame itself); None for a window of ones as long as the frame (no multiplication)."""
    if window is None and win == n_fft:
        return None
    if window is not None and win == n_fft and window.dtype is dtype and window.stride(0) == 1:
        return window  # read as it is
    padded = _op("fill_")(scratch_tensor((n_fft,), dtype, device), 0)
    middle = _op("narrow")(padded, 0, (n_fft - win) // 2, win)
    if window is None:
        _op("fill_")(middle, 1)
    else:
        _op("copy_")(middle, window)
    return padded


_FRAME_MODES = {"constant": K.FRAME_ZEROS, "reflect": K.FRAME_REFLECT, "replicate": K.FRAME_REPLICATE,
                "circular": K.FRAME_CIRCULAR}


def _window_table(window, n_fft: int, win: int, dtype, device):
    """(the table the transform's loads multiply by, its first element in the frame, its length): the window
    itself where it is contiguous and the transform takes it alone (the kernel zeros the frame outside it);
    else, made by ops, the window zero-padded to n_fft (Bluestein multiplies it by its chirp first)."""
    centred = (n_fft - win) // 2
    direct = window is None or window.stride(0) == 1
    if direct and not (_method(n_fft).bluestein and (window is not None or win < n_fft)):
        return window, centred, win
    return _padded_window(window, n_fft, win, dtype, device), 0, n_fft


def _windowed_call(name: str, input: Tensor, window, *options) -> tuple:
    """(the call key of op ``name`` on ``input`` with ``window`` and ``options``, the plan kept under it or
    None): a window that is no tensor makes no key."""
    key = call_key(name, input, *options)
    if key is not None and window is not None:
        key = (key, layout_key(window)) if type(window) is Tensor else None
    return key, lookup_call(key)


def _uncentred(args, kwargs):
    """aten::stft.default's arguments (no center, no pad_mode) as the implementation takes them."""
    args, kwargs = positional_as_keywords(5, "normalized", "onesided", "return_complex", "align_to_window")(args,
                                                                                                             kwargs)
    return args, {**kwargs, "center": False}


@register("stft", family="fft", aten=["aten::stft.center", "aten::stft.default"], methods=("stft",),
          adapters={"aten::stft.default": _uncentred}, **_stft_rules())
def stft(input: Tensor, n_fft: int, hop_length=None, win_length=None, window=None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided=None, return_complex=None,
         align_to_window=None) -> Tensor:
    """torch.stft: the transforms of a signal's (batch, length) frames of n_fft every hop_length, times the
    window, as (batch, frequencies, frames). The transform reads the frames straight from the signal, its
    center padding mapped in the loads, and the window as it is; a layout's later calls replay the first
    call's launches (``fft.planned_call``)."""
    key, execute = _windowed_call("stft", input, window, n_fft, hop_length, win_length, center, pad_mode, normalized,
                                  onesided, return_complex, align_to_window)
    if execute is not None:
        return execute(input, window)
    made, dtype, geometry = _stft_plan(input, n_fft, hop_length, win_length, window, center, pad_mode, normalized,
                                       onesided, return_complex)
    batch, _, frames, frequencies, hop, win = geometry
    n_fft, device = int(n_fft), input.device
    complex_dtype = dtype.to_real().to_complex()
    # torch's layout, frames innermost: (batch, frequencies, frames), without the batch dim for one signal
    out_shape, out_strides = (frequencies, frames), (1, frequencies)
    if len(input.shape) == 2:
        out_shape, out_strides = (batch, *out_shape), (frequencies * frames, *out_strides)

    def finished(out):
        return out if made.dtype.is_complex else _op("view_as_real")(out)

    def run(input, window):
        out = new_tensor(out_shape, complex_dtype, device, strides=out_strides)
        with scratch_scope():
            table, window_start, window_count = _window_table(window, n_fft, win, dtype, device)
            for name, t in (("src", input), ("out", out), ("window", table)):
                if t is not None:
                    note_role(name, t)
            _stft_transform(input, table, out, n_fft, dtype, geometry, center, pad_mode, normalized, window_start,
                            window_count)
        return finished(out)

    def replay(recorder, key, input, window):
        found = planned_launches(recorder)
        if found is None:
            return run
        launches, workspace, _ = found
        fresh_output = fresh_tensor_maker(out_shape, complex_dtype, device, strides=out_strides)
        pieces = bool(workspace.offsets)

        def execute(input, window):
            out = fresh_output()
            tensors = {"src": input, "out": out, "window": window}
            if window is not None and window.stride(0) != 1:  # a strided window is copied as the first call did
                with scratch_scope():
                    tensors["window"] = _window_table(window, n_fft, win, dtype, device)[0]
            if pieces:
                workspace.allocate(device, tensors)
            for launched in launches:
                launched(device, tensors)
            return finished(out)
        return execute
    return planned_call(key, (input, window), run, replay)


def _stft_transform(x: Tensor, table, out: Tensor, n_fft: int, dtype, geometry, center: bool, pad_mode: str,
                    normalized: bool, window_start: int, window_count: int) -> None:
    """The transforms of the frames of the signals ``x`` ((batch,) length, unpadded) times ``table`` (the
    window, from frame element ``window_start`` on) into ``out`` ((batch,) frequencies, frames)."""
    batch, _, frames, frequencies, hop, _ = geometry
    length = x.shape[-1]
    batch_stride = x.stride(0) if len(x.shape) == 2 else 0
    framing = Framing(_FRAME_MODES[pad_mode].value if center else K.FRAME_ZEROS.value, (0, hop),
                      n_fft // 2 if center else 0, length, window_start, window_count)
    source = Signal(x, (batch, frames), (batch_stride, 0), x.stride(-1), framing)
    target = out if len(out.shape) == 3 else _op("unsqueeze")(out, 0)
    scale = 1 / math.sqrt(n_fft) if normalized else 1.0
    transform(source, signal(_op("transpose")(target, 1, 2), 2), n_fft, FORWARD,
              input_kind=K.INPUT_COMPLEX if x.dtype.is_complex else K.INPUT_REAL, output_kind=K.OUTPUT_COMPLEX,
              in_count=n_fft, out_count=frequencies, scale=scale, window=table)


# ---- istft ------------------------------------------------------------------------------------------

def _istft_plan(x, n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex):
    """(output meta, frames' dtype, (batch, frames, frequencies, hop, win, onesided, expected length, start, kept))
    of an istft, the call checked as torch checks it."""
    if not x.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if not S.numel(x.shape):
        raise RuntimeError("istft: input tensor cannot be empty.")
    if len(x.shape) not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex dtype, but got "
                           f"{len(x.shape)}")
    n_fft = int(n_fft)
    hop, win = _window_length("istft", n_fft, hop_length, win_length)
    frequencies, frames = x.shape[-2:]
    onesided = frequencies != n_fft if onesided is None else bool(onesided)
    if onesided and n_fft // 2 + 1 != frequencies:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {frequencies}")
    if not onesided and n_fft != frequencies:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft when onesided=False, but got {frequencies}")
    if not 0 < hop <= win:
        raise RuntimeError("istft: expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        raise RuntimeError("istft: expected 0 < win_length <= n_fft")
    if window is not None and (len(window.shape) != 1 or window.shape[0] != win):
        raise RuntimeError("istft: Invalid window shape. window has to be 1D and length of `win_length`")
    if return_complex and onesided:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    if not return_complex and window is not None and window.dtype.is_complex:
        raise RuntimeError("Complex windows are incompatible with return_complex=False")
    frames_dtype = _fft_dtype(x.dtype) if return_complex else x.dtype.to_real()
    window_dtype = frames_dtype.to_real() if window is None else window.dtype
    dtype = promote_types(frames_dtype, window_dtype)
    expected = n_fft + hop * (frames - 1)
    start = n_fft // 2 if center else 0
    end = start + int(length) if length is not None else expected - n_fft // 2 if center else expected
    kept = max(0, min(end, expected) - start)
    batch = x.shape[0] if len(x.shape) == 3 else 1
    shape = (*x.shape[:-2], kept if length is None else int(length))
    return (TensorMeta(shape, dtype), frames_dtype, window_dtype,
            (batch, frames, frequencies, hop, win, onesided, expected, start, kept))


def _istft_temporaries(n_fft, frames_dtype, window_dtype, dtype, geometry, out_length: int) -> list:
    """The bytes of each temporary an istft makes, in the order it makes them: the frames, a contiguous
    window (a strided one), the overlap-add pass's least envelope a program."""
    batch, frames, _, _, _, _, _, _, _ = geometry
    return [batch * frames * n_fft * frames_dtype.itemsize, n_fft * window_dtype.itemsize,
            batch * (-(-out_length // _OVERLAP_BLOCK)) * dtype.to_real().itemsize]


def _istft_rules():
    def plan_of(a):
        return _istft_plan(a.input, a.n_fft, a.hop_length, a.win_length, a.window, a.center, a.normalized,
                           a.onesided, a.length, a.return_complex)

    def cost(a):
        made, frames_dtype, window_dtype, geometry = plan_of(a)
        batch, frames, _, _, _, _, expected, _, _ = geometry
        n_fft = int(a.n_fft)
        temporaries = _istft_temporaries(n_fft, frames_dtype, window_dtype, made.dtype, geometry, made.shape[-1])
        framed = batch * frames * n_fft
        return Cost(flops=transform_flops(batch * frames, n_fft, not frames_dtype.is_complex) + 4 * framed,
                    bytes_read=S.numel(a.input.shape) * a.input.dtype.itemsize + framed * frames_dtype.itemsize,
                    bytes_written=S.numel(made.shape) * made.dtype.itemsize + framed * frames_dtype.itemsize,
                    workspace=workspace_bytes(*temporaries) + transform_workspace(batch * frames, n_fft,
                                                                                  frames_dtype.to_real()))
    def keys(facts, a):
        _, frames_dtype, _, geometry = plan_of(a)
        n_fft = int(a.n_fft)
        kinds = (K.INPUT_COMPLEX, K.OUTPUT_COMPLEX) if frames_dtype.is_complex else (K.INPUT_HERMITIAN, K.OUTPUT_REAL)
        return transform_keys(facts, geometry[0] * geometry[1], n_fft, frames_dtype.to_real(), *kinds, n_fft)
    return dict(meta=lambda a: plan_of(a)[0], cost=cost, bound=True, key=bound_key_rule("istft", keys))


@register("istft", family="fft", aten=["aten::istft.default"], methods=("istft",), **_istft_rules())
def istft(input: Tensor, n_fft: int, hop_length=None, win_length=None, window=None, center: bool = True,
          normalized: bool = False, onesided=None, length=None, return_complex: bool = False) -> Tensor:
    """torch.istft: the signal whose stft ``input`` is, by overlap-add of the inverse transforms of its
    frames, times the window, divided by the window's squared envelope: the transform's pass, then one
    overlap-add pass (``kernels/fft.py``'s ``overlap_add``) that windows, sums and divides. A layout's later
    calls replay the first call's launches (``fft.planned_call``), then check the envelope as torch does."""
    key, execute = _windowed_call("istft", input, window, n_fft, hop_length, win_length, center, normalized, onesided,
                                  length, return_complex)
    if execute is not None:
        return execute(input, window)
    made, frames_dtype, window_dtype, geometry = _istft_plan(input, n_fft, hop_length, win_length, window, center,
                                                             normalized, onesided, length, return_complex)
    batch, count, frequencies, hop, win, onesided, expected, start, kept = geometry
    n_fft, device, dtype = int(n_fft), input.device, made.dtype

    def run(input, window):
        out = new_tensor(made.shape, dtype, device)
        with scratch_scope():
            spectra = _op("reshape")(input, (batch, frequencies, count))
            frames = planned_scratch((batch, count, n_fft), frames_dtype, device)
            if frames_dtype.is_complex:
                kinds = dict(input_kind=K.INPUT_COMPLEX, output_kind=K.OUTPUT_COMPLEX, in_count=n_fft)
            else:
                kinds = dict(input_kind=K.INPUT_HERMITIAN, output_kind=K.OUTPUT_REAL, in_count=n_fft // 2 + 1)
            transform(signal(spectra, 1), signal(frames, 2), n_fft, INVERSE, out_count=n_fft,
                      scale=1 / math.sqrt(n_fft) if normalized else 1 / n_fft, **kinds)
            table = _contiguous_window(window)
            for name, t in (("src", input), ("out", out), ("window", table)):
                if t is not None:
                    note_role(name, t)
            lowest = _overlap_add_pass(frames, table, _op("reshape")(out, (batch, made.shape[-1])), n_fft, win,
                                       geometry)
            _check_envelope(lowest, kept)
        return out

    def replay(recorder, key, input, window):
        found = planned_launches(recorder)
        if found is None:
            return run
        launches, workspace, slots = found
        fresh_output = fresh_tensor_maker(made.shape, dtype, device)
        lowest_slot = slots.get("lowest")

        def execute(input, window):
            out = fresh_output()
            with scratch_scope():
                tensors = {"src": input, "out": out, "window": _contiguous_window(window)}
                workspace.allocate(device, tensors)
                for launched in launches:
                    launched(device, tensors)
                if lowest_slot is not None:
                    _check_envelope(tensors[lowest_slot], kept)
            return out
        return execute
    return planned_call(key, (input, window), run, replay)


def _contiguous_window(window):
    """The window as ``overlap_add`` reads it: contiguous (a strided one copied)."""
    return window if window is None or window.stride(0) == 1 else _op("contiguous")(window)


def _check_envelope(lowest: Tensor, kept: int) -> None:
    """torch's check: the window's squared envelope must not vanish where the signal is kept (``lowest``:
    each overlap-add program's least magnitude; read back, as torch reads its own)."""
    smallest = float(lowest.numpy().min()) if kept and S.numel(lowest.shape) else 1.0
    if smallest < 1e-11:
        raise RuntimeError(f"istft: window overlap add min: {smallest} (the window's squared envelope vanishes; "
                           f"it must not, where the signal is rebuilt)")


_OVERLAP_BLOCK = 1024  # output positions a program of ``overlap_add`` writes


def _overlap_add_pass(frames: Tensor, window, out: Tensor, n_fft: int, win: int, geometry) -> Tensor:
    """``frames`` (batch, count, n_fft) windowed (a contiguous window), summed at hop apart and divided by the
    envelope into ``out`` (batch, length) by one ``overlap_add`` pass; each program's least envelope
    magnitude where the signal is kept."""
    batch, count, _, hop, _, _, _, start, kept = geometry
    out_length = out.shape[-1]
    block = min(_OVERLAP_BLOCK, 1 << max(out_length - 1, 1).bit_length())
    blocks = -(-out_length // block)
    lowest = planned_scratch((batch * blocks,), out.dtype.to_real(), out.device)
    note_role("lowest", lowest)
    if not batch * blocks:
        return lowest
    window_kind = K.PRE_NONE if window is None else K.PRE_COMPLEX if window.dtype.is_complex else K.PRE_REAL
    # component offsets (two a complex element), and a frame's components past the last
    index_64 = needs_index_64(count=2 * max(S.numel(frames.shape), S.numel(out.shape)) + 2 * n_fft)
    issue_planned(K.overlap_add, (batch * blocks,), out.device,
                  [frames, frames if window is None else window, out, lowest, count, n_fft, hop, start, kept,
                   out_length, (n_fft - win) // 2, win, count * n_fft, out.stride(0), blocks],
                  COMPLEX=out.dtype.is_complex, WINDOW=window_kind.value, OVERLAPS=-(-n_fft // hop), BLOCK=block,
                  INDEX_64=index_64)
    return lowest


# ---- samples ---------------------------------------------------------------------------------------

def _numpy_window(window, n_fft: int, win: int) -> np.ndarray:
    window = np.ones(win) if window is None else np.asarray(window)
    left = (n_fft - win) // 2
    return np.pad(window, (left, n_fft - win - left))


def _stft_reference(x, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
                    normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """Frames gathered by index from the NumPy-padded signal, windowed, and NumPy's float64 transform."""
    hop = n_fft // 4 if hop_length is None else hop_length
    signals = np.atleast_2d(x)
    if center:
        mode = {"replicate": "edge", "circular": "wrap"}.get(pad_mode, pad_mode)
        signals = np.pad(signals, ((0, 0), (n_fft // 2, n_fft // 2)), mode=mode)
    count = 1 + (signals.shape[1] - n_fft) // hop
    frames = signals[:, np.arange(count)[:, None] * hop + np.arange(n_fft)] * _numpy_window(
        window, n_fft, n_fft if win_length is None else win_length)
    onesided = not np.iscomplexobj(frames) if onesided is None else onesided
    spectra = (np.fft.rfft if onesided else np.fft.fft)(frames, axis=-1, norm="ortho" if normalized else None)
    spectra = np.swapaxes(spectra, 1, 2)[0 if np.ndim(x) == 1 else slice(None)]
    return spectra if return_complex or return_complex is None and np.iscomplexobj(frames) else np.stack([spectra.real, spectra.imag], axis=-1)


def _istft_reference(spectra, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
                     onesided=None, length=None, return_complex=False):
    """NumPy's float64 inverse transforms of the frames, windowed, added in place one by one and divided by
    the squared window's sum."""
    hop = n_fft // 4 if hop_length is None else hop_length
    batched = np.ndim(spectra) == 3
    spectra = np.swapaxes(spectra if batched else spectra[None], 1, 2)
    onesided = spectra.shape[-1] != n_fft if onesided is None else onesided
    inverse = np.fft.ifft if return_complex else np.fft.irfft
    frames = inverse(spectra, n=n_fft, axis=-1, norm="ortho" if normalized else None)
    window = _numpy_window(window, n_fft, n_fft if win_length is None else win_length)
    expected = n_fft + hop * (spectra.shape[1] - 1)
    signal_sum = np.zeros((spectra.shape[0], expected), frames.dtype)
    envelope = np.zeros(expected, window.dtype)  # a complex window's envelope is complex (torch squares it)
    for t in range(spectra.shape[1]):
        signal_sum[:, t * hop:t * hop + n_fft] += frames[:, t] * window
        envelope[t * hop:t * hop + n_fft] += window ** 2
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else expected - n_fft // 2 if center else expected
    rebuilt = signal_sum[:, start:end] / envelope[start:end]
    if length is not None and rebuilt.shape[1] < length:
        rebuilt = np.pad(rebuilt, ((0, 0), (0, length - rebuilt.shape[1])))
    return rebuilt if batched else rebuilt[0]


_POSITIVE_WINDOW = dict(values="positive")
_SAMPLES = {
    "stft": Samples((sample(operand(2, 40), 16, return_complex=True),
                     sample(operand(50), 12, 4, window=operand(12, **_POSITIVE_WINDOW), return_complex=True),
                     sample(operand(2, 30, layout="transposed"), 8, 3, 6, operand(6, dtype="float64"), center=False,
                            onesided=False, return_complex=False),
                     sample(operand(3, 33, dtype="complex64"), 10, pad_mode="constant", normalized=True),
                     sample(operand(40, layout="sliced"), 17, 5, pad_mode="replicate", return_complex=True)),
                    _stft_reference),
    "istft": Samples((sample(operand(2, 9, 5, dtype="complex64"), 16),
                      sample(operand(9, 7, dtype="complex64"), 16, 4, 12, operand(12, **_POSITIVE_WINDOW),
                             normalized=True, length=30),
                      sample(operand(2, 8, 6, dtype="complex128", layout="transposed"), 8, 4, center=False,
                             onesided=False, return_complex=True),
                      sample(operand(1, 9, 4, dtype="complex64"), 16, 8, window=operand(16, **_POSITIVE_WINDOW),
                             length=50)),
                     _istft_reference),
}
family_samples("fft", by_name(_SAMPLES))
