"""The int4 conversions by inline PTX (``kernels/quant.py``: ``_int4_tile_packed``, ``_sixteen_plus_nibbles``)
against the portable forms, bit for bit, on a GPU: both form the same exact values and round once to the
rows' type after the same scale, so every output must have the same bits (no tolerance). The interpreter runs
no PTX, so that test runs only where the suite runs on CUDA (``NBX_TEST_DEVICE=cuda``); on the host the PTX
strings themselves are checked by an emulator of the instructions they use.
"""
import textwrap

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.ops import quant as quant_ops
from nbxtensor.ops.plans import PlanCache
from nbxtensor.quant import QuantizedWeight

from .conftest import TEST_DEVICE, cpu_kernels, to_nbx
from .test_compile_check import ROOT, _record, compiled_output
from .test_quant import _bound, _random_int4, _reference_int4

cuda_only = pytest.mark.skipif(not str(TEST_DEVICE).startswith("cuda"), reason="inline PTX runs only on CUDA")

NP_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# (rows, settings): one row and the GEMV's several rows (a K tile inside one group of 64 and 128 inputs,
# factored, also swapped; across two groups of 32, scaled tiles), and a prefill GEMM; narrow tiles of 16 inputs
# (two word rows; several rows take 32, ``ops/quant.py``'s MIN_CONVERTED_DOT_K) and of 64 over three splits
CASES = [(1, dict(BLOCK_N=64, BLOCK_K=64, SPLITS=2, num_warps=4)),
         (4, dict(BLOCK_N=64, BLOCK_K=64, SPLITS=2, num_warps=4)),
         (16, dict(BLOCK_N=128, BLOCK_K=64, SPLITS=1, num_warps=4)),
         (16, dict(BLOCK_N=64, BLOCK_K=128, SPLITS=2, num_warps=4)),
         (4, dict(BLOCK_N=128, BLOCK_K=64, SPLITS=2, num_warps=4, SWAPPED=True)),
         (16, dict(BLOCK_N=64, BLOCK_K=64, SPLITS=1, num_warps=4, SWAPPED=True)),
         (40, dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=64, num_stages=2, num_warps=4))]
CASES += [(rows, dict(BLOCK_N=16, BLOCK_K=block_k, SPLITS=splits, num_warps=4))
          for rows in (1, 4, 16) for block_k, splits in ((16, 1), (64, 3))]


def _run(monkeypatch, x, weight, settings, inline):
    monkeypatch.setattr(quant_ops.tuning, "choose_timed", lambda key, facts, candidates, prepare: settings)
    monkeypatch.setattr(quant_ops, "inline_nibbles", lambda facts, dtype: inline)
    monkeypatch.setattr(quant_ops, "_plans", PlanCache())
    return nbx.quantized_linear(x, weight).numpy()


@cuda_only
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("rows, settings", CASES)
@pytest.mark.parametrize("scales_like_rows", [True, False])
def test_inline_nibbles_give_the_portable_bits(rng, monkeypatch, dtype, group_size, rows, settings,
                                               scales_like_rows):
    """Odd N; every nibble against every zero point (random); scales of the rows' type (the PTX scales the
    tile) or float32 (the PTX leaves scaled tiles to the portable path, factored ones it still builds)."""
    facts = backend_for(nbx.device(TEST_DEVICE)).facts
    assert quant_ops.inline_nibbles(facts, dtype), "the inline PTX path is not taken on this device"
    k, n = 256, 77
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, False)
    scales = scales.astype(NP_DTYPES[dtype] if scales_like_rows else np.float32)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=group_size, device=TEST_DEVICE, dtype=dtype)
    x = to_nbx(rng.standard_normal((rows, k)).astype(NP_DTYPES[dtype]))
    inline = _run(monkeypatch, x, weight, settings, True)
    portable = _run(monkeypatch, x, weight, settings, False)
    assert np.isfinite(portable.astype(np.float32)).all()
    np.testing.assert_array_equal(inline.view(np.uint16), portable.view(np.uint16))
    # the same bits can be the same wrong bits (a miscompiled dot takes both forms alike): against float64 too,
    # within ``test_quant.py``'s bound (exact weights, a float32 sum, one rounding to the rows' type)
    held = x.numpy().astype(np.float64)
    reference = _reference_int4(q, zeros, scales, g_idx)
    excess = np.abs(inline.astype(np.float64) - held @ reference.T) - _bound(held, reference, k, dtype)
    assert excess.max() <= 0, f"worst error beyond the bound: {excess.max()}"


# ---- the PTX itself, emulated on the host ----------------------------------------------------------------
# The interpreter runs no PTX, so the strings the kernels hand to ``inline_asm_elementwise`` are checked here by
# a small emulator of the instructions they use (PTX ISA semantics; packed 16-bit multiply-adds computed exactly
# in float64 and rounded once to the half type, as ``fma.rn`` does).
HALF_TYPES = {"f16x2": np.float16, "bf16x2": ml_dtypes.bfloat16}


def _lop3(a, b, c, table):
    out = 0
    for term in range(8):
        if table >> term & 1:
            out |= (a if term & 4 else ~a) & (b if term & 2 else ~b) & (c if term & 1 else ~c)
    return out & 0xFFFFFFFF


def _prmt(a, b, selector):
    source = a | b << 32
    return sum(((source >> (8 * (selector >> (4 * i) & 7))) & 0xFF) << (8 * i) for i in range(4))


def _halves(value, kind):
    return np.array([value & 0xFFFF, value >> 16], np.uint16).view(HALF_TYPES[kind]).astype(np.float64)


def _fma_halves(a, b, c, kind):
    result = (_halves(a, kind) * _halves(b, kind) + _halves(c, kind)).astype(HALF_TYPES[kind])
    bits = result.view(np.uint16).astype(np.uint32)
    return int(bits[0] | bits[1] << 16)


def _run_ptx(text, operands):
    """The registers after ``text`` runs with ``operands`` ({'$n': 32-bit value}) as its inputs."""
    registers = dict(operands)
    value = lambda token: int(token, 0) if token[0].isdigit() else registers[token]  # noqa: E731
    for line in text.replace("{", "").replace("}", "").split(";"):
        words = line.replace(",", " ").split()
        if not words or words[0] == ".reg":
            continue
        op, target, args = words[0], words[1], [value(t) for t in words[2:]]
        if op == "mov.b32":
            registers[target] = args[0]
        elif op == "shl.b32":
            registers[target] = args[0] << args[1] & 0xFFFFFFFF
        elif op == "shr.u32":
            registers[target] = args[0] >> args[1]
        elif op == "prmt.b32":
            registers[target] = _prmt(*args)
        elif op == "lop3.b32":
            registers[target] = _lop3(*args)
        elif op.startswith("fma.rn."):
            registers[target] = _fma_halves(*args, op.split(".")[-1])
        else:
            raise AssertionError(f"the emulator has no {op}")
    return registers


def _half_bits(values, kind):
    bits = np.asarray(values, np.float64).astype(HALF_TYPES[kind]).view(np.uint16).astype(np.uint32)
    return int(bits[0] | bits[1] << 16)


@pytest.mark.parametrize("kind, magic", [("f16x2", 1024.0), ("bf16x2", 128.0)])
@pytest.mark.parametrize("scaled", [False, True])
def test_nibble_ptx_gives_each_nibble_less_zero_times_scale(rng, kind, magic, scaled):
    """Two words as ``_int4_tile_packed`` hands them over (each beside itself shifted right by 4, one column's
    zero point and scale each): output j holds nibbles 2j and 2j + 1 less the zero point, times the scale,
    rounded once to the half type; every value, zero point and nibble position over the draws."""
    from nbxtensor.kernels import quant as K
    ptx = {("f16x2", False): K.F16_NIBBLES, ("f16x2", True): K.F16_NIBBLES_SCALED,
           ("bf16x2", False): K.BF16_NIBBLES, ("bf16x2", True): K.BF16_NIBBLES_SCALED}[kind, scaled].value
    for _ in range(200):
        word = int(rng.integers(0, 2 ** 32))
        zero, scale = int(rng.integers(0, 16)), float(rng.uniform(-2, 2))
        scale = float(np.float64(scale).astype(HALF_TYPES[kind]))
        shifted = (word - (1 << 32) if word >> 31 else word) >> 4 & 0xFFFFFFFF  # int32 >> 4, as Triton's
        operands = {"$4": word, "$5": shifted, "$6": _half_bits([-(magic + zero)] * 2, kind),
                    "$7": _half_bits([scale] * 2, kind)}
        registers = _run_ptx(ptx, operands)
        for j in range(4):
            nibbles = [word >> (8 * j) & 0xF, word >> (8 * j + 4) & 0xF]
            expected = [(n - zero) * (scale if scaled else 1.0) for n in nibbles]
            assert registers[f"${j}"] == _half_bits(expected, kind), (hex(word), zero, scale, j)


def test_sixteen_plus_nibbles_ptx_gives_the_portable_bits(rng):
    """``_sixteen_plus_nibbles``' PTX: output i holds the float32 bits of 16 + nibble i, as the portable form
    builds them (0x41800000 | nibble << 19)."""
    from nbxtensor.kernels import quant as K
    for word in [0, 0xFFFFFFFF, 0x76543210, 0xFEDCBA98] + [int(w) for w in rng.integers(0, 2 ** 32, 200)]:
        registers = _run_ptx(K.SIXTEEN_PLUS_NIBBLES.value, {"$8": word})
        for i in range(8):
            nibble = word >> (4 * i) & 0xF
            assert registers[f"${i}"] == 0x41800000 | nibble << 19, (hex(word), i)
            assert np.array([registers[f"${i}"]], np.uint32).view(np.float32)[0] == 16 + nibble


# ---- the matrix-unit operand layouts Triton gives the dequantized tiles, compiled on the host ----------------
@cpu_kernels
def test_dequantized_dot_operands_cover_their_k_tile(tmp_path):
    """Compiled for sm_90, every MMAv2 operand of the quantized products of 16-bit rows spreads its K tile over
    distinct threads: 4 threads along K each hold kWidth inputs, so a K tile under 4 * kWidth leaves threads
    that repeat inputs, and Triton's lowering then reads half the tile twice (a dequantized int4 tile gets
    kWidth 8, wrong for the 16-input tiles of ``test_quant_tiles.py`` on an H100). Settings forced to 16-input
    tiles; bfloat16 rows compiled with the bfloat16 dot a GPU takes (the interpreter records float32)."""
    records = _record(tmp_path, """
        import numpy as np
        import ml_dtypes
        import nbxtensor as nbx
        from nbxtensor.ops import quant as quant_ops
        from nbxtensor.quant import QuantizedWeight

        def chosen(key, facts, candidates, prepare):
            if key.startswith("quantized_gemv"):
                return dict(BLOCK_N=16, BLOCK_K=16, SPLITS=1, num_warps=4)
            return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_stages=1, num_warps=4)
        quant_ops.tuning.choose_timed = chosen
        rng = np.random.default_rng(0)
        k, n = 64, 16
        q = rng.integers(0, 16, (k, n)).astype(np.uint8)
        zeros = rng.integers(0, 16, (2, n)).astype(np.uint8)
        act_order = np.tile(np.arange(2), k // 2)
        for dtype, np_dtype in (("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16)):
            scales = np.full((2, n), 0.5, np_dtype)
            weights = [QuantizedWeight.int4(q, scales, zeros, group_size=32, dtype=dtype),
                       QuantizedWeight.int4(q, scales, zeros, act_order, group_size=32, dtype=dtype),
                       QuantizedWeight.int8(rng.integers(-127, 128, (n, k)).astype(np.int8),
                                            np.full((n, 1), 0.01, np.float32)),
                       QuantizedWeight.fp8(rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn),
                                           np.full((n,), 0.01, np.float32))]
            for weight in weights:
                for rows in (4, 24):
                    nbx.quantized_linear(nbx.from_numpy(np.ones((rows, k), np_dtype)), weight).numpy()
    """)
    program = textwrap.dedent(f"""
        import importlib, json, re, sys
        sys.path.insert(0, {str(ROOT / "scripts")!r})
        import compile_check
        compile_check._worker_init(90)
        dots = []
        for line in open({str(records)!r}):
            record = json.loads(line)
            if record["kernel"] not in ("int4_gemv", "int4_gemm", "quantized_gemv", "quantized_gemm"):
                continue
            if record["constexprs"]["BLOCK_M"] == 1:
                continue  # one row multiplies without the matrix unit
            if record["constexprs"]["DECODE_BF16"]:
                record["constexprs"]["DOT"] = {{"dtype": "bf16"}}
            record["args"] = [compile_check._representative(a) for a in record["args"]]
            args, constexprs = compile_check._arguments(record)
            constexprs.update({{name: value for name, value in compile_check.target_settings(90).items()
                               if name in constexprs}})
            kernel = getattr(importlib.import_module(record["module"]), record["kernel"])
            ttgir = kernel.warmup(*args, grid=(1,), **constexprs, launch_pdl=constexprs.get("PDL") is True).asm["ttgir"]
            defined = dict(re.findall(r"^(#\\w+) = (#ttg\\.\\w+<.*>)$", ttgir, re.M))
            for shape, element, parent, width in re.findall(
                    r"tensor<(\\d+x\\d+)x(\\w+), #ttg\\.dot_op<\\{{opIdx = 0, parent = (#\\w+), kWidth = (\\d+)\\}}>>",
                    ttgir):
                if "versionMajor = 2" in defined.get(parent, ""):
                    dots.append([record["kernel"], element, int(shape.split("x")[1]), int(width)])
        print(json.dumps(dots))
    """)
    dots = compiled_output(program, tmp_path)
    assert {kernel for kernel, *_ in dots} == {"int4_gemv", "int4_gemm", "quantized_gemv", "quantized_gemm"}
    assert {element for _, element, *_ in dots} == {"f16", "bf16"}
    short = [dot for dot in dots if dot[2] < 4 * dot[3]]
    assert not short, f"(kernel, type, K tile, kWidth) with threads repeating K inputs: {short}"


@cpu_kernels
def test_rows_gemv_prefetches_each_tiles_scales_and_zero_points(tmp_path):
    """Compiled for sm_90 (``scripts/int4_sass.py``'s cases), the int4 GEMV at 2-16 rows with K tiles inside one
    group prefetches into L1 the scales and the zero points of the tile two steps ahead (two ``prefetch`` a
    step: the compiler pipelines the words and the rows only); one row, tiles spanning groups and the prefill
    GEMM read theirs as before."""
    program = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / "scripts")!r})
        import compile_check, int4_sass
        compile_check._worker_init(90)
        from nbxtensor.kernels import quant
        counts = {{}}
        for name in ("gemv 16 rows bf16 128x128 w4 one group", "gemv 16 rows fp16 128x128 w4 one group",
                     "gemv 16 rows bf16 128x128 w4 one group swapped", "gemv 16 rows bf16 256x64 w4 groups of 32",
                     "gemv 1 row bf16 128x128 w4 one group", "gemm bf16 128x256x64 w8 one group"):
            kernel, rows, constexprs = int4_sass.CASES[name]
            positional, named = compile_check._arguments(int4_sass.record(kernel, rows, constexprs, True))
            compiled = getattr(quant, kernel).warmup(*positional, grid=(1,), **named,
                                                     launch_pdl=named.get("PDL") is True)
            counts[name] = compiled.asm["ptx"].count("prefetch.global.L1")
        print(json.dumps(counts))
    """)
    counts = compiled_output(program, tmp_path)
    assert counts == {"gemv 16 rows bf16 128x128 w4 one group": 2, "gemv 16 rows fp16 128x128 w4 one group": 2,
                      "gemv 16 rows bf16 128x128 w4 one group swapped": 2,
                      "gemv 16 rows bf16 256x64 w4 groups of 32": 0, "gemv 1 row bf16 128x128 w4 one group": 0,
                      "gemm bf16 128x256x64 w8 one group": 0}
