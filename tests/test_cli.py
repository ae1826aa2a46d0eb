"""The nbx command line."""
import subprocess
import sys


def run(*args):
    return subprocess.run([sys.executable, "-m", "nbxtensor.cli", *args], capture_output=True, text=True, check=True)


def test_info_names_versions_devices_and_facts():
    out = run("info").stdout
    for part in ("nbxtensor", "triton 3.6", "kernels:", "device cpu", "facts in force:", "elementwise_block"):
        assert part in out


def test_example_runs():
    out = run("example").stdout
    assert "x.T[1:, ::2]" in out and "float32" in out
