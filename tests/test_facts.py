"""Facts files: every device class says the same kinds of things, and a GPU is matched by capability."""
from types import SimpleNamespace

import pytest

from nbxtensor.device import facts
from nbxtensor.device.cuda import facts_for

REQUIRED = ("name", "match", "kernels", "tiles", "ladders", "memory", "sm_count_class")
GPU_REQUIRED = ("shared_memory_per_block_bytes", "matrix_unit", "native_bf16", "native_fp64", "native_fp8",
                "bandwidth_bytes_per_s", "flops_per_s")


@pytest.mark.parametrize("data", facts.all_facts(), ids=lambda d: d["name"])
def test_facts_file_is_complete(data):
    for key in REQUIRED:
        assert key in data, f"{data['name']} lacks {key}"
    assert data["kernels"]["elementwise_block"] & (data["kernels"]["elementwise_block"] - 1) == 0
    assert all(a < b for a, b in zip(data["ladders"]["rows"], data["ladders"]["rows"][1:]))
    if data["match"]["type"] == "cuda":
        for key in GPU_REQUIRED:
            assert key in data, f"{data['name']} lacks {key}"


def props(major, minor, name="NVIDIA Test GPU"):
    return SimpleNamespace(major=major, minor=minor, name=name.encode(), totalGlobalMem=16 << 30)


@pytest.mark.parametrize("cap,expected", [((9, 0), "hopper"), ((8, 9), "ada"), ((8, 0), "ampere"),
                                          ((8, 6), "ampere"), ((7, 5), "turing"), ((7, 0), "volta")])
def test_gpu_matched_by_capability(cap, expected):
    assert facts_for(props(*cap))["name"] == expected


def test_unknown_gpu_gets_derived_facts():
    derived = facts_for(props(12, 0, "NVIDIA Future"))
    assert derived["derived"] and "NVIDIA Future" in derived["name"]
    assert derived["kernels"]["elementwise_block"] > 0


def test_unknown_facts_file_names_known_ones():
    with pytest.raises(FileNotFoundError, match="known: .*hopper"):
        facts.load("no-such-gpu")


@pytest.mark.parametrize("data", facts.all_facts(), ids=lambda d: d["name"])
def test_rates_are_numbers(data):
    """YAML reads 4.8e12 as a string (it wants 4.8e+12): every rate must come back a number."""
    for table in ("bandwidth_bytes_per_s", "flops_per_s"):
        for key, value in data.get(table, {}).items():
            assert isinstance(value, (int, float)), f"{data['name']}.{table}.{key} = {value!r}"
