"""nbxtensor never imports torch: it works where importing torch fails, and it leaves torch out of
sys.modules where torch is installed. Each check runs in a fresh interpreter."""
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import TEST_DEVICE

REPO_ROOT = Path(__file__).resolve().parent.parent

REFUSE_TORCH = """
import sys

class RefuseTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is forbidden in this process")
        return None

sys.meta_path.insert(0, RefuseTorch())
"""

RUN_OPS = """
import numpy as np
import nbxtensor as nbx

device = DEVICE
a = nbx.arange(12, device=device).reshape(3, 4)
b = nbx.zeros(3, 2, dtype=nbx.float16, device=device)
c = nbx.tensor([[1.5, 2.5]] * 3, device=device)
t = a.t().contiguous()
assert t.tolist() == np.arange(12).reshape(3, 4).T.tolist()
assert a[:, ::2].to(nbx.float32).tolist() == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
joined = nbx.cat([b.to(nbx.float32), c], dim=1)
assert joined.shape == (3, 4) and joined.tolist()[0] == [0.0, 0.0, 1.5, 2.5]
b.copy_(c)
assert b.tolist() == [[1.5, 2.5]] * 3
assert nbx.linspace(0, 1, 5, device=device).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
shared = nbx.from_numpy(np.arange(4, dtype=np.int32))
assert shared.numpy().tolist() == [0, 1, 2, 3]
assert nbx.ones(2, 2, device=device).new_zeros(2).tolist() == [0.0, 0.0]
assert nbx.eye(2, device=device).tolist() == [[1.0, 0.0], [0.0, 1.0]]
print("ops ok")
"""


def run_python(source):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=300)


def test_runs_where_importing_torch_fails():
    source = REFUSE_TORCH + RUN_OPS.replace("DEVICE", repr(TEST_DEVICE)) + textwrap.dedent("""
        try:
            import torch
        except ImportError:
            pass
        else:
            raise AssertionError("the hook did not refuse torch")
        assert "torch" not in sys.modules
    """)
    result = run_python(source)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "ops ok" in result.stdout


def test_leaves_an_installed_torch_unimported():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed, so nothing could import it")
    source = RUN_OPS.replace("DEVICE", repr(TEST_DEVICE)) + textwrap.dedent("""
        import sys
        leaked = sorted(name for name in sys.modules if name == "torch" or name.startswith("torch."))
        assert not leaked, leaked
    """)
    result = run_python(source)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "ops ok" in result.stdout


def test_cuda_bindings_without_a_driver_means_no_gpu(monkeypatch):
    """cuda-bindings installed on a machine with no NVIDIA driver raises from cuInit (it cannot load
    libcuda); that is "no CUDA device", not a failure to import nbxtensor."""
    import types

    from nbxtensor import _runtime

    def cu_init(flags):
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')

    driver = types.SimpleNamespace(cuInit=cu_init)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = driver
    monkeypatch.setitem(sys.modules, "cuda", sys.modules.get("cuda") or types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
    monkeypatch.delenv("NBX_DEVICE", raising=False)
    assert _runtime.cuda_device_count() == 0
