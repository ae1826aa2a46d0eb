"""Launch keys and the tuning cache: keys are pure functions of shapes and dtypes, a tuned choice is
stored per device class and reused by a fresh process, and certified-only mode refuses to tune."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import nbxtensor as nbx
from nbxtensor import _runtime, launch, tuning
from nbxtensor.device.facts import load as load_facts
from nbxtensor.ops.matmul import gemm_candidates, gemv_candidates
from tests.conftest import cpu_kernels

HOPPER = load_facts("hopper")
CANDIDATES = [{"BLOCK_M": 64}, {"BLOCK_M": 128}, {"BLOCK_M": 256}]


def test_bucketing_follows_the_ladder():
    ladder = HOPPER["ladders"]["rows"]
    assert [tuning.bucket(n, ladder) for n in (1, 3, 16, 17, 4000, 65536)] == [1, 4, 16, 32, 4096, 65536]
    assert tuning.bucket(70000, ladder) == 131072  # past the top rung: the next power of two


def test_keys_are_pure_functions_of_shapes_dtypes_and_layout():
    def key(m, n, k, dtype=nbx.bfloat16, a_k_unit=True):
        return tuning.launch_key("gemm", HOPPER, rows={"M": m}, cols={"N": n, "K": k}, dtypes=(dtype, dtype),
                                 flags={"a_k_unit": a_k_unit})
    assert key(4096, 4096, 4096) == key(4096, 4096, 4096) == "gemm|M=4096|N=4096|K=4096|bfloat16,bfloat16|a_k_unit=1"
    assert key(3000, 4000, 4096) == key(4096, 4096, 4096)  # same buckets
    assert key(4097, 4096, 4096) != key(4096, 4096, 4096)
    assert key(4096, 4096, 4096, nbx.float16) != key(4096, 4096, 4096)
    assert key(4096, 4096, 4096, a_k_unit=False) != key(4096, 4096, 4096)


def test_candidates_come_from_the_facts_ceilings():
    hopper = gemm_candidates(HOPPER, 4096, 4096, 4096, nbx.bfloat16)
    assert hopper[0]["BLOCK_N"] == 256 and len(hopper) > 4
    for c in hopper:
        staged = (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 * c["num_stages"]
        assert staged <= HOPPER["shared_memory_per_block_bytes"] and c["num_warps"] <= 8
    # the interpreter pays per program and operation: one wide tile, whatever the ceilings
    cpu = gemm_candidates(load_facts("cpu"), 4096, 4096, 4096, nbx.bfloat16)
    assert [(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["num_warps"], c["num_stages"]) for c in cpu] == \
        [(128, 1024, 512, 1, 1)]
    assert gemm_candidates(load_facts("cpu"), 5, 20, 3, nbx.int8)[0]["BLOCK_K"] == 32
    small = gemm_candidates(HOPPER, 5, 20, 3, nbx.float32)
    assert all(c["BLOCK_M"] == 16 and c["BLOCK_N"] == 32 and c["BLOCK_K"] == 16 for c in small)
    assert all(c["SPLITS"] >= 1 for c in gemv_candidates(HOPPER, 1, 14336, 4096))


def test_interpreted_devices_take_the_first_candidate_and_store_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))

    def never(config):
        raise AssertionError("nothing is timed under the interpreter")
    assert tuning.choose("k|M=1", "cpu", CANDIDATES, never, interpreted=True) == CANDIDATES[0]
    assert not list(tmp_path.iterdir())


@cpu_kernels
def test_a_product_on_the_interpreter_stores_no_tuning(tmp_path, monkeypatch):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    a = nbx.ones(20, 20, device="cpu")
    nbx.mm(a, a)
    assert not list(tmp_path.iterdir()) and tuning.entries("cpu") == {}


def test_tuned_choice_persists_and_a_fresh_process_reuses_it(tmp_path, monkeypatch):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    times = {64: 3.0, 128: 1.0, 256: 2.0}
    broken = {"BLOCK_M": 512}  # a candidate that fails to run is skipped, not fatal

    def measure(config):
        if config is broken:
            raise RuntimeError("out of shared memory")
        return times[config["BLOCK_M"]]
    chosen = tuning.choose("gemm|M=128", "testgpu", [broken, *CANDIDATES], measure, interpreted=False)
    assert chosen == {"BLOCK_M": 128}
    stored = json.loads((tmp_path / "testgpu.json").read_text())
    assert stored["entries"]["gemm|M=128"]["config"] == {"BLOCK_M": 128}
    assert stored["entries"]["gemm|M=128"]["certified"] is False
    script = textwrap.dedent("""
        from nbxtensor import tuning
        def measure(config):
            raise AssertionError("a stored key is not tuned again")
        print(tuning.choose("gemm|M=128", "testgpu", [{"BLOCK_M": 64}], measure, interpreted=False)["BLOCK_M"])
        with tuning.certified_only():  # tuned, not certified: a certified-only run refuses it
            try:
                tuning.choose("gemm|M=128", "testgpu", [{"BLOCK_M": 64}], measure, interpreted=False)
            except tuning.TuningKeyMissing as refused:
                assert "not certified" in str(refused)
            else:
                raise AssertionError("an uncertified entry served a certified-only run")
    """)
    # a process of this one's kind (compiling or interpreting): an entry stamps the GPU driver's version,
    # which an interpreting process has none of
    env = dict(os.environ, NBX_TUNING_DIR=str(tmp_path))
    if _runtime.KERNEL_MODE == _runtime.INTERPRETED:
        env["NBX_DEVICE"] = "cpu"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "128"


def test_certified_only_refuses_to_tune_and_names_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    monkeypatch.setenv("NBX_TUNING", "certified-only")
    with pytest.raises(tuning.TuningKeyMissing, match=r"gemm\|M=4096\|N=4096.*testgpu.json"):
        tuning.choose("gemm|M=4096|N=4096", "testgpu", CANDIDATES, lambda c: 1.0, interpreted=False)
    monkeypatch.setenv("NBX_TUNING", "sometimes")
    with pytest.raises(ValueError, match="certified-only"):
        tuning.mode()


def test_certify_hook_rejects_settings_before_they_are_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    chosen = tuning.choose("k|M=8", "testgpu", CANDIDATES, lambda c: c["BLOCK_M"], interpreted=False,
                           certify=lambda c: c["BLOCK_M"] != 64)
    assert chosen == {"BLOCK_M": 128}
    assert tuning.cache_for("testgpu").entries()["k|M=8"]["certified"] is True


def test_timed_candidates_are_planned_once_and_their_launches_timed(tmp_path, monkeypatch):
    """``choose_timed`` plans each candidate once and times only the function it returns: timed calls that
    re-planned would be paced by the host (a decode tuner chose a setting 7% slower that way)."""
    from nbxtensor.tuning import timing
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    planned, issued = [], []

    def prepare(config):
        planned.append(config["n"])
        return lambda: issued.append(config["n"])

    def timed(fn, **kwargs):
        for _ in range(5):
            fn()
        return {1: 2.0, 2: 1.0}[issued[-1]]
    monkeypatch.setattr(timing, "device_time_ms", timed)
    monkeypatch.setattr(launch, "_AHEAD_SETTING", "0")  # no build pass before the timing (its own test)
    chosen = tuning.choose_timed("k|once", {"name": "testgpu", "kernels": {}}, [{"n": 1}, {"n": 2}], prepare)
    assert chosen == {"n": 2} and planned == [1, 2]
    assert issued == [1] * 5 + [2] * 5 + [2] * 5 + [1] * 5 + [1] * 5 + [2] * 5 + [2] * 5 + [1] * 5


def test_every_candidate_is_built_ahead_before_any_is_timed(tmp_path, monkeypatch):
    """On a compiling device ``choose_timed`` first issues every candidate inside ``launch.compiling_ahead``
    (its kernels compile on a pool of threads, nothing runs), then times them: compiling one candidate after
    another as each was first timed made a cold 1.1B-parameter LLM's first call spend minutes in Triton. A
    key planned inside a candidate while it is being built takes its first setting and stores nothing."""
    pytest.importorskip("triton.runtime._async_compile")
    from nbxtensor.tuning import timing
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    monkeypatch.setattr(launch, "_AHEAD_SETTING", "1")
    facts = {"name": "testgpu", "kernels": {}}
    events = []

    def prepare(config):
        def issue():
            inner = tuning.choose("k|inner", "testgpu", [{"i": 1}, {"i": 2}], lambda c: 1.0, interpreted=False)
            events.append(("built" if launch.compiling_ahead_active() else "ran", config["n"], inner["i"]))
        return issue

    monkeypatch.setattr(timing, "device_time_ms", lambda fn, **kwargs: (fn(), {1: 2.0, 2: 1.0}[events[-1][1]])[1])
    assert tuning.choose_timed("k|ahead", facts, [{"n": 1}, {"n": 2}], prepare) == {"n": 2}
    assert events[:2] == [("built", 1, 1), ("built", 2, 1)]
    assert all(kind == "ran" for kind, _, _ in events[2:]) and len(events) == 2 + 2 * tuning.TIMING_ROUNDS
    # the inner key was tuned once, outside the build pass, and stored
    assert "k|inner" in tuning.cache_for("testgpu").entries()


def test_compiling_ahead_off_or_nested_does_nothing(monkeypatch):
    """``NBX_COMPILE_AHEAD=0`` leaves launches running as usual; a block inside a block adds no pool."""
    monkeypatch.setattr(launch, "_AHEAD_SETTING", "0")
    with launch.compiling_ahead() as building:
        assert building is False and not launch.compiling_ahead_active()
    pytest.importorskip("triton.runtime._async_compile")
    monkeypatch.setattr(launch, "_AHEAD_SETTING", "1")
    with launch.compiling_ahead() as outer:
        with launch.compiling_ahead() as inner:
            assert outer is True and inner is False and launch.compiling_ahead_active()
    assert not launch.compiling_ahead_active()


def test_timed_candidates_read_their_operands_past_the_l2_cache(tmp_path, monkeypatch):
    """Each timed call follows an overwrite of twice the device's L2 cache: a decode step's weights stream
    from device memory, and timed against a warm L2 the GEMV tuner chose tiles that starved the device on
    weights under 50 MiB (an output projection at a quarter of the bandwidth its final tiles reach)."""
    from nbxtensor.tuning import timing
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    flushes = []

    def timed(fn, flush_bytes=0, **kwargs):
        flushes.append(flush_bytes)
        return 1.0
    monkeypatch.setattr(timing, "device_time_ms", timed)
    tuning.choose_timed("k|l2", {"name": "testgpu", "kernels": {}, "l2_cache_bytes": 50 * 2 ** 20}, [{"n": 1}],
                        lambda config: lambda: None)
    tuning.choose_timed("k|l2-unknown", {"name": "testgpu", "kernels": {}}, [{"n": 1}], lambda config: lambda: None)
    assert set(flushes[:tuning.TIMING_ROUNDS]) == {100 * 2 ** 20}
    assert set(flushes[tuning.TIMING_ROUNDS:]) == {2 * timing.DEFAULT_L2_BYTES}


def test_interleaved_rounds_cancel_a_steady_drift_of_the_device(tmp_path, monkeypatch):
    """Candidates measured while the device slows steadily (heat): measured one after another, the first
    would win by its head start; over rounds in alternating order the truly fastest wins."""
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    true_ms = {"slow": 1.05, "fast": 1.0}
    calls = []

    def measure(config):
        calls.append(config["name"])
        return true_ms[config["name"]] + 0.1 * (len(calls) - 1)
    candidates = [{"name": "slow"}, {"name": "fast"}]
    assert tuning.choose("k|drift1", "testgpu", candidates, measure, interpreted=False)["name"] == "slow"
    calls.clear()
    assert tuning.choose("k|drift4", "testgpu", candidates, measure, interpreted=False, rounds=4)["name"] == "fast"
    assert calls == ["slow", "fast", "fast", "slow", "slow", "fast", "fast", "slow"]


def test_a_candidate_failing_in_a_later_round_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    seen = []

    def measure(config):
        seen.append(config["BLOCK_M"])
        if config["BLOCK_M"] == 64 and seen.count(64) == 2:
            raise RuntimeError("out of resources")
        return {64: 0.5, 128: 1.0}[config["BLOCK_M"]]
    chosen = tuning.choose("k|flaky", "testgpu", [{"BLOCK_M": 64}, {"BLOCK_M": 128}], measure,
                           interpreted=False, rounds=4)
    assert chosen == {"BLOCK_M": 128} and seen.count(64) == 2
