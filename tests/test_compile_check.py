"""The compile check: launches recorded under the interpreter compile for a Hopper target on a machine
with no GPU (the interpreter accepts code that Triton's GPU compiler refuses, so CPU runs alone cannot
show a kernel compiles)."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from .conftest import cpu_kernels
from .test_dependent_launch import DECODE_STEP_KERNELS

ROOT = Path(__file__).resolve().parents[1]


def compiled_output(program: str, cwd) -> object:
    """The JSON that ``program`` prints last, run in a process that compiles kernels for a GPU target
    (the interpreter switched off) with this checkout first on its path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=cwd,
                            timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
CHECK = ROOT / "scripts" / "compile_check.py"


def _record(tmp_path: Path, program: str) -> Path:
    records = tmp_path / "launches.jsonl"
    env = dict(os.environ, NBX_RECORD_LAUNCHES=str(records), NBX_DEVICE="cpu",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", textwrap.dedent(program)], check=True, env=env, cwd=tmp_path)
    return records


def _check(records: Path, tmp_path: Path, *options: str, **environment: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]),
               **environment)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, str(CHECK), str(records), "--jobs", "2", *options], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=900)


def _assert_every_one_compiles(records: Path, tmp_path: Path, kernels: set) -> None:
    """``records`` name each of ``kernels``, and every specialisation they hold compiles for sm_90."""
    assert kernels <= {json.loads(line)["kernel"] for line in records.read_text().splitlines()}
    result = _check(records, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"compiled (\d+) of \1 specialisations for sm_90 \(\d+ with programmatic dependent launch\); "
                     r"0 failed", result.stdout), result.stdout


@cpu_kernels
def test_recorded_library_kernels_compile_for_hopper(tmp_path):
    # the sort network, the lane sums and the radix select (k == 1) each ran under the interpreter yet
    # failed on the GPU once
    records = _record(tmp_path, """
        import nbxtensor as nbx
        x = nbx.arange(10.0)
        (x * 2).sum()
        nbx.sort(nbx.tensor([3.0, 1.0, 2.0]))
        from nbxtensor.ops import sorting
        sorting.SEGMENT_LIMIT = 16
        nbx.topk(nbx.arange(40.0), 1)  # a long row, k specialised to the constant 1
        nbx.sort(nbx.arange(40.0))  # a long row: radix passes
    """)
    _assert_every_one_compiles(records, tmp_path, {"pointwise", "reduce_rows", "sort_segments", "radix_histogram",
                                                   "radix_choose", "radix_count", "radix_gather",
                                                   "radix_sort_histogram", "radix_sort_scatter"})


@cpu_kernels
def test_a_product_through_float32_planes_is_recorded(tmp_path):
    # the planes' split launches take module constants (``tl.constexpr`` objects) as constexprs, which
    # the record once failed to write, failing the product itself
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        from nbxtensor.ops import matmul_plans
        matmul_plans._by_planes = lambda dtype, facts: dtype.name == "float32"  # the CPU's facts name no matrix unit
        a = nbx.tensor(np.ones((37, 45), np.float32))
        (a @ nbx.tensor(np.ones((45, 29), np.float32))).numpy()  # parts in registers: the interpreter's form
        listed = matmul_plans.gemm_candidates
        matmul_plans.gemm_candidates = lambda *args, parts=False, **kwargs: [] if parts else listed(*args, **kwargs)
        (a @ nbx.tensor(np.ones((45, 30), np.float32))).numpy()  # planes in memory, the one form left
    """)
    kernels = [json.loads(line) for line in records.read_text().splitlines()]
    splits = [record for record in kernels if record["kernel"] == "split_bf16_planes"]
    assert splits and all(isinstance(record["constexprs"]["P0"], int) for record in splits)
    assert [record["constexprs"]["PRECISION"] for record in kernels if record["kernel"] == "gemm"][0] == "bf16_parts"


@cpu_kernels
def test_batched_parts_split_k_and_short_float32_attention_tiles_compile_for_hopper(tmp_path):
    """GPU settings forced on the interpreter: a float32 batch on bfloat16 parts in the smallest tiles (the
    16-row one below the wgmma shape) and in true float32, a split-K GEMM and its combine over row blocks,
    and float32 attention in a 16-query tile against 32 keys."""
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        from nbxtensor.ops import attention, matmul_plans
        from nbxtensor.ops.plans import clear_all
        matmul_plans._by_planes = lambda dtype, facts: dtype.name == "float32"  # the CPU's facts name no matrix unit
        tiles = dict(num_stages=2, GROUP_M=8)
        settings = [dict(tiles, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, num_warps=2),
                    dict(tiles, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, PRECISION="ieee"),
                    dict(tiles, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4, SPLITS=3)]
        rng = np.random.default_rng(0)
        a = nbx.tensor(rng.standard_normal((3, 40, 64)).astype(np.float32))
        x = nbx.tensor(rng.standard_normal((70, 1000)).astype(np.float32)).to(nbx.bfloat16)
        for setting in settings:
            matmul_plans.tuning.choose_timed = lambda key, facts, candidates, prepare, chosen=setting: chosen
            clear_all()
            (nbx.bmm(a, a.transpose(1, 2)) if "SPLITS" not in setting else x @ x.transpose(0, 1)[:, :40]).numpy()
        attention.interpreted_forward_config = lambda length, keys, heads: dict(BLOCK_M=16, BLOCK_N=32, num_warps=1,
                                                                                 num_stages=2)
        q = nbx.tensor(rng.standard_normal((1, 2, 40, 64)).astype(np.float32))
        nbx.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).numpy()
    """)
    kernels = [json.loads(line) for line in records.read_text().splitlines()]
    gemms = [record["constexprs"] for record in kernels if record["kernel"] == "gemm"]
    assert [(g["PRECISION"], g["SPLIT"]) for g in gemms] == [("bf16_parts", False), ("ieee", False),
                                                             ("ieee", True)]
    assert {"gemv_combine", "attention_forward"} <= {record["kernel"] for record in kernels}
    result = _check(records, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout


_REFUSED_HEADER = textwrap.dedent("""
    import nbxtensor  # settles Triton's mode first
    import triton
    import triton.language as tl

    SCALE = 3.0  # a plain global: the interpreter reads it, the compiler refuses it
""")


def _refused_kernel(name: str) -> str:
    """A kernel the interpreter runs and the compiler refuses (it reads ``SCALE``)."""
    return textwrap.dedent(f"""

        @triton.jit
        def {name}(x, n, BLOCK: tl.constexpr):
            i = tl.arange(0, BLOCK)
            tl.store(x + i, tl.load(x + i, mask=i < n) * SCALE, mask=i < n)
    """)


@cpu_kernels
def test_a_kernel_the_interpreter_runs_but_the_compiler_refuses_is_reported(tmp_path):
    (tmp_path / "refused_kernel.py").write_text(_REFUSED_HEADER + _refused_kernel("scale"))
    records = _record(tmp_path, """
        import nbxtensor as nbx
        from nbxtensor.launch import launch
        from refused_kernel import scale
        x = nbx.ones(4)
        launch(scale, (1,), x.device, [x, 4], BLOCK=8)
        assert x.tolist() == [3.0] * 4
    """)
    result = _check(records, tmp_path)
    assert result.returncode == 1
    assert "FAIL refused_kernel.scale" in result.stdout and "SCALE" in result.stdout
    assert "1 failed" in result.stdout



@cpu_kernels
def test_an_interpreter_only_kernel_is_skipped_and_the_rest_still_compile(tmp_path):
    """A kernel its module lists in ``INTERPRETER_ONLY`` is never compiled; a refused kernel beside it is
    still reported (the check must not settle the workers' Triton as interpreted by importing modules)."""
    (tmp_path / "mixed_kernels.py").write_text(_REFUSED_HEADER + 'INTERPRETER_ONLY = ("scale_on_the_cpu",)\n'
                                               + _refused_kernel("scale_on_the_cpu") + _refused_kernel("scale"))
    records = _record(tmp_path, """
        import nbxtensor as nbx
        from nbxtensor.launch import launch
        from mixed_kernels import scale, scale_on_the_cpu
        x = nbx.ones(4)
        launch(scale_on_the_cpu, (1,), x.device, [x, 4], BLOCK=8)
        launch(scale, (1,), x.device, [x, 4], BLOCK=8)
    """)
    result = _check(records, tmp_path)
    assert result.returncode == 1
    assert "FAIL mixed_kernels.scale:" in result.stdout and "scale_on_the_cpu" not in result.stdout
    assert "1 failed; 1 interpreter-only skipped" in result.stdout

@cpu_kernels
def test_a_resident_row_sums_in_the_same_layout_alone_or_in_a_batch(tmp_path):
    """Softmax and norms sum a row with ``tl.sum`` (cumsum with ``tl.associative_scan``), in an order that
    follows the layout of the reduced tile, which the compiler derives from what it knows of the
    addresses. A row alone and in a batch of 9 must reduce in the same layout so that they round alike on
    a GPU: rows of 301 floats (no vector loads; row 3 starts off a 16-byte boundary) and of 304 (vector
    loads), aligned or not (a view one float into its buffer: copied to an aligned one), and softmax over
    the columns of a transposed batch (whose output rows are strided, a column alone's are not: the store
    may differ, the reduction may not). A specialised row count or shape may differ; it changes no layout."""
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        F = nbx.nn.functional
        for length in (301, 304):
            x = nbx.from_numpy(np.ones((9, length), np.float32))
            shifted = nbx.from_numpy(np.ones(9 * length + 1, np.float32))[1:].reshape(9, length)
            for rows in (x, x[0:1], x[3:4], shifted, shifted[2:3]):
                nbx.softmax(rows, -1)
                F.layer_norm(rows, (length,))
                F.rms_norm(rows, (length,))
                rows.cumsum(-1)
            for columns in (x.T, x.T[:, 3:4]):
                nbx.softmax(columns, 0)
    """)
    program = textwrap.dedent(f"""
        import importlib, json, re, sys
        sys.path.insert(0, {str(ROOT / "scripts")!r})
        import compile_check
        compile_check._worker_init(90)
        layouts = {{}}
        for line in open({str(records)!r}):
            record = json.loads(line)
            if record["kernel"] not in ("softmax_rows", "norm_rows", "scan_rows"):
                continue  # the copies that align a shifted view
            record["args"] = [compile_check._representative(a) for a in record["args"]]
            args, constexprs = compile_check._arguments(record)
            kernel = getattr(importlib.import_module(record["module"]), record["kernel"])
            ttgir = kernel.warmup(*args, grid=(1,), **constexprs).asm["ttgir"]
            defined = dict(re.findall(r"^(#\\w+) = (#ttg\\.\\w+<.*>)$", ttgir, re.M))
            reduced = re.findall(r'"tt\\.(?:reduce|scan)"\\(.*?\\}}\\) : \\((tensor<[^)]*)\\)', ttgir, re.S)
            assert reduced, ttgir[:2000]
            resolved = [re.sub(r"#\\w+", lambda m: defined.get(m.group(0), m.group(0)), t) for t in reduced]
            # the same constexprs: every layout alike; another way of storing the output: the reductions'
            key = record["kernel"] + json.dumps(record["constexprs"], sort_keys=True, default=str)
            layouts.setdefault(key, set()).add(json.dumps(sorted(defined.values())))
            shared = {{k: v for k, v in record["constexprs"].items() if k not in ("DST_UNIT", "DST_ALIGN")}}
            key = "reductions of " + record["kernel"] + json.dumps(shared, sort_keys=True, default=str)
            layouts.setdefault(key, set()).add(json.dumps(resolved))
        print(json.dumps([[key.split("{{")[0], len(seen)] for key, seen in layouts.items()]))
    """)
    variants = compiled_output(program, tmp_path)
    assert {name.removeprefix("reductions of ") for name, _ in variants} == {"softmax_rows", "norm_rows", "scan_rows"}
    assert all(count == 1 for _, count in variants), variants


@cpu_kernels
def test_the_wgmma_attention_kernel_compiles_for_hopper(tmp_path):
    # the Gluon kernels never run on the CPU (their launches are taken on Hopper GPUs only), so CI compiles
    # the largest and smallest settings of each, causal and not, from records written here
    def record(head_dim, block_m, block_n, warps, stages, causal, in_registers):
        pointer = {"pointer": "bf16", "aligned": True}
        ints = [{"value": v} for v in (300, 300, 2)] + [{"value": 1.5}] + [{"value": v} for v in
                                                                       (4 * 300 * head_dim, 300 * head_dim, head_dim) * 4]
        return {"module": "nbxtensor.kernels.attention_wgmma", "kernel": "attention_forward_wgmma",
                "args": [pointer] * 4 + ints,
                "constexprs": dict(HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, STAGES=stages, CAUSAL=causal,
                                   Q_IN_REGISTERS=in_registers, num_warps=warps)}
    def warp_specialised(head_dim, block_n, stages, causal):
        described = record(head_dim, 128, block_n, 4, stages, causal, False)
        del described["constexprs"]["Q_IN_REGISTERS"]
        described["constexprs"]["maxnreg"] = 168
        return described | {"kernel": "attention_forward_wgmma_ws"}
    records = tmp_path / "launches.jsonl"
    records.write_text("\n".join(
        [json.dumps(record(*shape)) for shape in ((128, 128, 128, 8, 2, True, False), (64, 64, 64, 4, 3, False, True))]
        + [json.dumps(warp_specialised(*shape)) for shape in ((128, 128, 2, True), (64, 64, 3, False))]) + "\n")
    result = _check(records, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "compiled 4 of 4" in result.stdout


@cpu_kernels
def test_the_decode_step_kernels_wait_first_when_compiled_with_dependent_launch(tmp_path):
    """Recorded under the interpreter with ``PDL`` false, the decode step's kernels compile for Hopper
    with it true (its facts allow it), and each one's PTX waits before it touches global memory."""
    records = _record(tmp_path, """
        import numpy as np
        from nbxtensor.ops import matmul_gemv, matmul_prologue
        from tests.test_dependent_launch import run_decode_step_ops, split_products_in_two
        matmul_gemv.gemv_candidates = split_products_in_two(matmul_gemv.gemv_candidates)
        matmul_prologue.gemv_candidates = matmul_gemv.gemv_candidates
        run_decode_step_ops(np.random.default_rng(0), "cpu")
    """)
    launches = [json.loads(line) for line in records.read_text().splitlines()]
    assert {record["kernel"] for record in launches} == DECODE_STEP_KERNELS
    assert all(record["constexprs"]["PDL"] is False for record in launches)  # the interpreter never takes it
    result = _check(records, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "compiled 11 of 11 specialisations for sm_90 (11 with programmatic dependent launch); 0 failed" \
        in result.stdout


@cpu_kernels
def test_the_prologue_products_compile_for_hopper_in_every_form(tmp_path):
    """The products with a norm or an activation in their prologue, beyond the decode step's one float32
    row: several rows (the matrix unit's tiles) in bfloat16 and float16, a bias, split K, gelu_tanh; with
    dependent launch, each waiting before it touches memory."""
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        from nbxtensor.ops import matmul_prologue as P
        from tests.test_dependent_launch import split_products_in_two
        P.gemv_candidates = split_products_in_two(P.gemv_candidates)
        rng = np.random.default_rng(0)

        def t(*shape, dtype="bfloat16"):
            return nbx.tensor(rng.standard_normal(shape).astype(np.float32)).to(dtype)
        P.rms_norm_linear(t(3, 40), t(40), t(24, 40), t(24), 1e-6)
        x, residual, norm, weight = (t(*shape, dtype="float16") for shape in ((16, 40), (16, 40), (40,), (24, 40)))
        P.add_rms_norm_linear(x, residual, norm, weight, None, 1e-6)
        P.act_and_mul_linear(t(2, 80), t(24, 40), activation="gelu_tanh")
    """)
    _assert_every_one_compiles(records, tmp_path, {"gemv_prologue"})


@cpu_kernels
def test_the_quantized_prologue_products_compile_for_hopper_in_every_form(tmp_path):
    """``quantized_gemv_prologue`` over each one-row path (int4 words whole, int4 act-order, int8, fp8), each
    prologue and rows' dtype, K split; with dependent launch, each waiting before it touches memory."""
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        from nbxtensor.ops import matmul_prologue as P
        from nbxtensor.quant import QuantizedWeight
        from tests.test_quant import _random_int4
        offered = P.decode_candidates
        P.decode_candidates = lambda *args: [dict(offered(*args)[0], BLOCK_N=32, BLOCK_K=32, SPLITS=2)]
        rng = np.random.default_rng(0)

        def t(*shape, dtype):
            return nbx.tensor(rng.standard_normal(shape).astype(np.float32)).to(dtype)
        q, zeros, scales, g_idx = _random_int4(rng, 96, 40, 32, True)
        weights = [QuantizedWeight.int4(q, scales, zeros, g_idx, group_size=32)] + [
            QuantizedWeight.quantize(rng.standard_normal((40, 96)).astype(np.float32), form, group_size=32)
            for form in ("int4", "int8", "fp8")]
        for dtype in ("bfloat16", "float16", "float32"):
            for weight in weights:
                P.add_rms_norm_linear(t(1, 96, dtype=dtype), t(1, 96, dtype=dtype), t(96, dtype=dtype), weight, None,
                                      1e-6)
                P.act_and_mul_linear(t(1, 192, dtype=dtype), weight, t(40, dtype=dtype), activation="silu")
    """)
    _assert_every_one_compiles(records, tmp_path, {"quantized_gemv_prologue"})


@cpu_kernels
def test_a_kernel_compiled_with_dependent_launch_that_does_not_wait_first_is_reported(tmp_path):
    (tmp_path / "dependent_kernels.py").write_text(textwrap.dedent("""
        import nbxtensor  # settles Triton's mode first
        import triton
        import triton.language as tl
        from nbxtensor.kernels.dependent_launch import await_predecessors

        @triton.jit
        def waits_first(x, n, BLOCK: tl.constexpr, PDL: tl.constexpr):
            await_predecessors(PDL)
            i = tl.arange(0, BLOCK)
            tl.store(x + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)

        @triton.jit
        def loads_first(x, n, BLOCK: tl.constexpr, PDL: tl.constexpr):
            i = tl.arange(0, BLOCK)
            y = tl.load(x + i, mask=i < n)
            await_predecessors(PDL)
            tl.store(x + i, y * 2, mask=i < n)

        @triton.jit
        def never_waits(x, n, BLOCK: tl.constexpr, PDL: tl.constexpr):
            i = tl.arange(0, BLOCK)
            tl.store(x + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)
    """))
    records = _record(tmp_path, """
        import nbxtensor as nbx
        from nbxtensor.launch import launch
        from dependent_kernels import loads_first, never_waits, waits_first
        x = nbx.ones(4)
        for kernel in (waits_first, loads_first, never_waits):
            launch(kernel, (1,), x.device, [x, 4], BLOCK=8, PDL=False)
        assert x.tolist() == [8.0] * 4
    """)
    result = _check(records, tmp_path)
    assert result.returncode == 1
    assert "FAIL dependent_kernels.loads_first: RuntimeError: compiled with PDL, it touches global memory before " \
           "griddepcontrol.wait" in result.stdout
    assert "FAIL dependent_kernels.never_waits: RuntimeError: compiled with PDL, it has no griddepcontrol.wait" \
        in result.stdout
    assert "(3 with programmatic dependent launch); 2 failed" in result.stdout


@cpu_kernels
def test_an_fp8_weight_gemv_compiles_for_ampere_reading_bytes(tmp_path):
    """Triton refuses the e4m3 type below sm_89: for Ampere the check compiles a recorded fp8-weight GEMV with its
    weight as bytes, as an Ampere GPU passes it (facts ``native_fp8``), decoded by their bits in the kernel."""
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        from nbxtensor.ops import quant
        from nbxtensor.quant import QuantizedWeight
        offered = quant.decode_candidates
        quant.decode_candidates = lambda *args: [dict(offered(*args)[0], BLOCK_N=32, BLOCK_K=64, SPLITS=1)]
        rng = np.random.default_rng(0)
        weight = QuantizedWeight.quantize(rng.standard_normal((40, 96)).astype(np.float32), "fp8")
        nbx.quantized_linear(nbx.tensor(rng.standard_normal((1, 96)).astype(np.float32)), weight)
    """)
    launches = [json.loads(line) for line in records.read_text().splitlines()]
    assert [record["kernel"] for record in launches] == ["quantized_gemv"]
    assert {"pointer": "fp8e4nv", "aligned": True} in launches[0]["args"]
    result = _check(records, tmp_path, "--target", "80")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "compiled 1 of 1 specialisations for sm_80" in result.stdout, result.stdout


def test_the_compile_check_sets_pdl_and_pointer_types_as_the_target_class_facts_do():
    spec = importlib.util.spec_from_file_location("compile_check", CHECK)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    assert check.target_settings(90)["PDL"] is True
    assert check.target_settings(80)["PDL"] is False  # Ampere: no programmatic dependent launch
    assert check.target_settings(120)["PDL"] is False  # no facts file: derived ones, which do not claim it
    assert check.target_pointer_types(90) == {} and check.target_pointer_types(89) == {}
    assert check.target_pointer_types(80) == {"fp8e4nv": "uint8"}  # no float8 conversions: e4m3 as bytes


_CODED_KERNEL = textwrap.dedent("""
    import nbxtensor  # settles Triton's mode first
    import triton
    import triton.language as tl
    {codes}

    @triton.jit
    def coded(x, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        value = tl.load(x + i, mask=i < n)
        if MODE == {doubled}:
            value = value * 2
        tl.store(x + i, value, mask=i < n)
""")


@cpu_kernels
def test_the_ptx_of_each_specialisation_is_written_for_comparison(tmp_path):
    """``--ptx-dir`` writes each specialisation's PTX under its kernel's name and a hash of its record, so
    two versions of a kernel's source compile to files compared one by one: a code compared as a literal
    and as a named constexpr global (without line information) compile alike."""
    literal, named = tmp_path / "literal", tmp_path / "named"
    for folder, codes, doubled in ((literal, "", "1"), (named, "MODE_DOUBLED = tl.constexpr(1)", "MODE_DOUBLED")):
        folder.mkdir()
        (folder / "coded_kernel.py").write_text(_CODED_KERNEL.format(codes=codes, doubled=doubled))
    records = _record(literal, """
        import nbxtensor as nbx
        from nbxtensor.launch import launch
        from coded_kernel import coded
        x = nbx.ones(4)
        for mode in (0, 1):
            launch(coded, (1,), x.device, [x, 4], MODE=mode, BLOCK=8)
    """)
    written = {}
    for folder in (literal, named):
        result = _check(records, folder, "--ptx-dir", str(folder / "ptx"), TRITON_DISABLE_LINE_INFO="1")
        assert result.returncode == 0, result.stdout + result.stderr
        written[folder] = {path.name: path.read_text() for path in (folder / "ptx").iterdir()}
    coded = [ptx for name, ptx in written[literal].items() if name.startswith("coded_kernel.coded.")]
    assert len(coded) == 2 and all(".entry coded" in ptx for ptx in coded)  # one per MODE; ones() adds a fill
    assert written[named] == written[literal]


@cpu_kernels
def test_a_converted_dot_operand_shorter_than_four_k_widths_is_reported(tmp_path):
    """Triton 3.6 gives a float16 tile unpacked in registers from the nibbles of uint8 words (joined, then
    reshaped along K) the MMA v2 operand layout with kWidth 8; over a K tile of 16 (under 4 x 8) the lowered
    ``mma.m16n8k16`` counts half of K twice, which the check reports; a K tile of 32 is sound. (An int8 tile
    converted directly gets kWidth 4, sound over 16 inputs.)"""
    (tmp_path / "converted_dot.py").write_text(textwrap.dedent("""
        import nbxtensor  # settles Triton's mode first
        import triton
        import triton.language as tl

        @triton.jit
        def nibble_dot(words, b, out, K: tl.constexpr):
            i = tl.arange(0, 16)
            k = tl.arange(0, K)
            packed = tl.load(words + i[:, None] * (K // 2) + tl.arange(0, K // 2)[None, :])
            x = tl.reshape(tl.join(packed & 15, packed >> 4), (16, K)).to(tl.float16)
            y = tl.load(b + k[:, None] * 16 + i[None, :])
            tl.store(out + i[:, None] * 16 + i[None, :], tl.dot(x, y))
    """))
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        from nbxtensor.launch import launch
        from converted_dot import nibble_dot
        out = nbx.zeros((16, 16))
        for k in (16, 32):
            words = nbx.from_numpy(np.full((16, k // 2), 0x21, np.uint8))  # nibbles 1 and 2
            launch(nibble_dot, (1,), out.device, [words, nbx.ones((k, 16)).to(nbx.float16), out], K=k)
            assert out.numpy().tolist() == [[1.5 * k] * 16] * 16
    """)
    result = _check(records, tmp_path)
    assert result.returncode == 1
    failures = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failures) == 1 and failures[0].startswith("FAIL converted_dot.nibble_dot: RuntimeError: MMA v2 "
                                                         "dot operands with a K tile under 4 x kWidth"), result.stdout
    assert "(0, 'f16', 16, 8)" in failures[0] and "'K': 16" in failures[0], failures[0]
    assert "1 failed" in result.stdout
