"""Host memory that cannot be had raises nbx.OutOfMemoryError, saying what was asked, what the host
has and what to do, instead of NumPy's MemoryError."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import nbxtensor as nbx


@pytest.mark.parametrize("count, dtype", [(2 ** 50, "float32"), (2 ** 62, "float64")])
def test_an_allocation_beyond_any_address_space_raises_out_of_memory(count, dtype):
    # 4 PiB is past a 64-bit process's 47-bit address space, whatever the overcommit policy;
    # 2^65 bytes is past what NumPy can index
    with pytest.raises(nbx.OutOfMemoryError, match="cpu: out of memory asking for") as refused:
        nbx.empty(count, dtype=getattr(nbx, dtype), device="cpu")
    message = str(refused.value)
    assert "available on the host" in message and "To fit:" in message
    assert isinstance(refused.value, RuntimeError)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_the_process_memory_limit_is_reported():
    program = textwrap.dedent("""
        import resource
        import nbxtensor as nbx
        with open("/proc/self/status") as status:
            used_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
        limit = used_kib * 1024 + (256 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
        try:
            nbx.empty(1 << 30, dtype=nbx.uint8, device="cpu")
        except nbx.OutOfMemoryError as error:
            print("OOM", error)
        else:
            print("allocated")
        small = nbx.empty(1 << 20, dtype=nbx.uint8, device="cpu")  # the process goes on
        print("small", small.numel())
    """)
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert run.returncode == 0, run.stderr
    assert "OOM cpu: out of memory asking for 1.00 GiB" in run.stdout
    assert "RLIMIT_AS" in run.stdout
    assert "small 1048576" in run.stdout
