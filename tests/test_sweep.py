"""benchmarks/sweep.py: the case table it builds from the model and op-form tables, and a few cases scaled
down run end to end on the CPU device (torch is the comparison there: those tests skip without it)."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import cpu_kernels

ROOT = Path(__file__).resolve().parent.parent


def _load_sweep():
    spec = importlib.util.spec_from_file_location("sweep", ROOT / "benchmarks" / "sweep.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sweep", module)  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


sweep = _load_sweep()
DECODER = {"gemm", "gemv", "attention_prefill", "attention_decode", "norm", "softmax", "pointwise", "reduction",
           "scan", "arg_topk", "embedding"}
ENCODER = {"gemm", "bmm", "attention_prefill", "norm", "softmax", "pointwise", "reduction"}
# the families each required model must form cases in
EXPECTED = {
    "gpt-2": DECODER,
    "llama-2-7b": DECODER | {"rotary"},
    "llama-3-8b": DECODER | {"rotary"},
    "llama-3-70b-tp8": DECODER | {"rotary"},
    "mistral-7b": DECODER | {"rotary"},
    "qwen2.5-7b": DECODER | {"rotary"},
    "phi-3-mini": DECODER | {"rotary"},
    "gemma-2-9b": DECODER | {"rotary"},
    "bert-base": ENCODER | {"embedding"},
    "vit-b16": ENCODER | {"conv"},
    "whisper-small": ENCODER | DECODER | {"conv"},
    "clip-vit-l14": ENCODER | {"conv"},
}


@pytest.fixture(scope="module")
def table():
    workloads, models = sweep.load_table()
    return workloads, models, sweep.build_cases(models, workloads)


def test_every_required_model_forms_its_families(table):
    _, models, cases = table
    assert {m.name for m in models} == set(EXPECTED)
    for name, families in EXPECTED.items():
        formed = {c.family for c in cases if name in c.models()}
        assert formed == families, f"{name}: missing {families - formed}, unexpected {formed - families}"
    assert {m.dtype for m in models} == {"float32", "float16", "bfloat16"}
    assert set(sweep.FAMILIES) == {c.family for c in cases}


def test_published_shapes_reach_the_cases(table):
    workloads, _, cases = table
    shapes = {(c.op, c.shape(), c.dtype) for c in cases}
    # Llama-3-70B on one of 8 GPUs: 8 query heads and 1 KV head of 128, a 3584-wide MLP, 16032 vocabulary rows
    assert ("linear", "1x1280x8192", "bfloat16") in shapes
    assert ("linear", "64x7168x8192", "bfloat16") in shapes
    assert ("linear", "1x16032x8192", "bfloat16") in shapes
    # Qwen2.5's biased q/k/v, Phi-3's head dim of 96 in a ragged prefill, Gemma-2's 256k vocabulary
    assert ("linear", "1000x4608x3584 +bias", "bfloat16") in shapes
    assert ("sdpa", "B1 32q/32kv S1000 D96 causal", "bfloat16") in shapes
    assert ("softmax", "64x256000", "bfloat16") in shapes
    assert ("embedding", "1000 ids from 152064x3584", "bfloat16") in shapes
    # patch embeddings and Whisper's front convolutions over 3000 mel frames
    assert ("conv2d", "32x3x224^2 -> 768 k16 s16", "float32") in shapes
    assert ("conv2d", "1x3x224^2 -> 1024 k14 s14", "float16") in shapes
    assert ("conv1d", "8x80x3000 -> 768 k3 s1", "float16") in shapes
    assert ("paged_attention", "B1 32q/8kv ctx32768 D128 pages of 16", "bfloat16") in shapes
    contexts = {c.p["context"] for c in cases if c.op == "paged_attention"}
    assert min(contexts) == 128 and max(contexts) == 32768
    assert {c.p["m"] for c in cases if c.op == "linear" and c.family == "gemv"} == {1, 8, 64}
    prefill = {c.p["seq"] for c in cases if c.op == "sdpa" and c.p["causal"]}
    assert prefill == {t for t in workloads["prefill_tokens"] if t > 1}


def test_cases_are_deduplicated_across_models(table):
    _, _, cases = table
    assert len({c.key for c in cases}) == len(cases)
    shared = next(c for c in cases if c.op == "linear" and c.shape() == "128x6144x4096")
    assert shared.models() == ["llama-3-8b", "mistral-7b"]
    assert any("mistral-7b: qkv projection (prefill 128)" == user for user in shared.users)


def test_context_is_clipped_to_the_model(table):
    workloads, models, cases = table
    for model in models:
        for setting in sweep.settings(model, workloads):
            if setting.phase == "decode_attention" and model.kind == "decoder":
                assert setting.context <= model.max_positions, (model.name, setting)
    whisper = {c.p["context"] for c in cases if c.op == "paged_attention" and "whisper-small" in c.models()}
    assert whisper == {128, 1500}  # its own 448-token context, then cross-attention over 1500 frames


def test_selection_spreads_over_families(table):
    _, _, cases = table
    quick = sweep.select(cases, quick=True)
    assert {c.family for c in quick} == set(sweep.FAMILIES)
    assert max(sum(c.family == f for c in quick) for f in sweep.FAMILIES) <= sweep.QUICK_PER_FAMILY
    # families take turns, so that a run the budget stops early still covers each
    assert len({c.family for c in quick[:len(sweep.FAMILIES)]}) == len(sweep.FAMILIES)
    only = sweep.select(cases, families={"scan"}, models=["gemma-2-9b"])
    assert only and all(c.family == "scan" and "gemma-2-9b" in c.models() for c in only)
    assert len(sweep.select(cases, limit=5)) == 5


def test_unknown_names_are_refused():
    with pytest.raises(SystemExit, match="unknown family"):
        sweep.main(["--list", "--family", "gemmm"])
    with pytest.raises(SystemExit, match="unknown model"):
        sweep.main(["--list", "--model", "llama-4"])


def test_floor_rates_prefer_this_parts_measured_figure():
    facts = {"flops_per_s": {"bfloat16_dense": 9.9e14, "float32": 6.7e13, "measured_h200_bf16_mm": 7.2e14},
             "bandwidth_bytes_per_s": {"datasheet_h200": 4.8e12, "datasheet_h100": 3.35e12,
                                       "measured_h200_copy": 4.14e12}}
    flops, bandwidth = sweep.floor_rates(facts, "NVIDIA H200")
    assert (flops["bfloat16"], flops["float32"], bandwidth) == (7.2e14, 6.7e13, 4.14e12)
    flops, bandwidth = sweep.floor_rates(facts, "NVIDIA H100 80GB HBM3")
    assert (flops["bfloat16"], bandwidth) == (9.9e14, 3.35e12)
    assert sweep.floor_rates({}, "cpu") == ({"bfloat16": None, "float16": None, "float32": None}, None)


@cpu_kernels
def test_cpu_smoke_runs_cases_end_to_end(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("NBX_DEVICE", "cpu")
    assert sweep.main(["--cpu-smoke", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "sweep.json").read_text())
    rows = result["rows"]
    assert [r["family"] for r in rows] == ["gemm", "attention_decode", "norm"]
    assert all(r["status"] == "ok" and r["check_ok"] and r["ratio"] > 0 for r in rows), rows
    assert result["geomean"] > 0
    table = (tmp_path / "sweep.md").read_text()
    assert "| gemm | linear |" in table and "llama-3-8b" in table


@cpu_kernels
def test_a_failing_case_is_reported_and_the_sweep_goes_on(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("NBX_DEVICE", "cpu")

    def broken(env, p, dtype):
        raise RuntimeError("no such kernel")
    def torch_refuses(env, p, dtype):
        built = linear(env, p, dtype)

        def theirs():
            raise RuntimeError("torch has no kernel for this")
        return sweep.Built(built.ours, theirs, built.nbytes, built.flops, built.rtol)
    linear = sweep.BUILDERS["linear"]
    monkeypatch.setitem(sweep.BUILDERS, "rms_norm", broken)
    monkeypatch.setitem(sweep.BUILDERS, "linear", torch_refuses)
    assert sweep.main(["--cpu-smoke", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "sweep.json").read_text())
    rows = {r["family"]: r for r in result["rows"]}
    assert rows["norm"]["status"] == "error" and "no such kernel" in rows["norm"]["error"]
    assert rows["gemm"]["status"] == "torch failed" and "no kernel" in rows["gemm"]["torch_error"]
    assert rows["gemm"]["ours_ms"] > 0 and rows["gemm"]["ratio"] is None
    assert rows["attention_decode"]["status"] == "ok"
    assert result["geomean"] == pytest.approx(rows["attention_decode"]["ratio"])
    assert "torch failed: RuntimeError: torch has no kernel" in (tmp_path / "sweep.md").read_text()


@cpu_kernels
def test_the_budget_stops_the_run_and_the_tables_are_still_written(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("NBX_DEVICE", "cpu")
    monkeypatch.setenv("NBX_SWEEP_BUDGET_S", "0")
    assert sweep.main(["--cpu-smoke", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "sweep.json").read_text())
    assert [r["status"] for r in result["rows"]] == ["not run"] * 3 and result["geomean"] is None
    assert "not run" in (tmp_path / "sweep.md").read_text()


@cpu_kernels
def test_precompile_runs_first_calls_in_worker_processes(monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.setenv("NBX_DEVICE", "cpu")
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # where a spawned worker finds this module
    workloads, models = sweep.load_table()
    cases = sweep.select(sweep.build_cases([sweep.smoke_model(m) for m in models], sweep.SMOKE_WORKLOADS),
                         {"norm"}, ["llama-3-8b"])[:1]
    sweep.precompile(cases, 1, "cpu", 60.0)
    assert "precompiled 1 of 1 cases' first calls" in capsys.readouterr().out
