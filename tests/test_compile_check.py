"""The compile check: launches recorded under the interpreter compile for a Hopper target on a machine
with no GPU (the interpreter accepts code that Triton's GPU compiler refuses, so CPU runs alone cannot
show a kernel compiles)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import cpu_kernels

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "scripts" / "compile_check.py"


def _record(tmp_path: Path, program: str) -> Path:
    records = tmp_path / "launches.jsonl"
    env = dict(os.environ, NBX_RECORD_LAUNCHES=str(records), NBX_DEVICE="cpu",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", textwrap.dedent(program)], check=True, env=env, cwd=tmp_path)
    return records


def _check(records: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, str(CHECK), str(records), "--jobs", "2"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=900)


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
    """)
    kernels = {json.loads(line)["kernel"] for line in records.read_text().splitlines()}
    assert {"pointwise", "reduce_rows", "sort_segments", "radix_select"} <= kernels
    result = _check(records, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout


@cpu_kernels
def test_a_kernel_the_interpreter_runs_but_the_compiler_refuses_is_reported(tmp_path):
    (tmp_path / "refused_kernel.py").write_text(textwrap.dedent("""
        import nbxtensor  # settles Triton's mode first
        import triton
        import triton.language as tl

        SCALE = 3.0  # a plain global: the interpreter reads it, the compiler refuses it

        @triton.jit
        def scale(x, n, BLOCK: tl.constexpr):
            i = tl.arange(0, BLOCK)
            tl.store(x + i, tl.load(x + i, mask=i < n) * SCALE, mask=i < n)
    """))
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
