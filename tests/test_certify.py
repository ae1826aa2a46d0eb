"""Ahead-of-time tuning with certification (``certify.py``), certified-only runs and the tuning store
in one file (``tuning/store.py``), on the CPU: the interpreter times nothing, so certification there chooses
the first candidate that matches the float64 reference, and stores it like a GPU's timed choice."""
from __future__ import annotations

import json

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import certify, cli, graph, tuning
from nbxtensor.ops import matmul_plans
from nbxtensor.ops.plans import clear_all
from nbxtensor.tuning import cache as tuning_cache
from nbxtensor.tuning import store as tuning_store
from nbxtensor.certify import parse_key, representative_extents
from nbxtensor.device.facts import load as load_facts
from tests.conftest import TEST_DEVICE, cpu_kernels
from tests.test_census import _encoder, _inputs

pytestmark = [cpu_kernels, pytest.mark.skipif(TEST_DEVICE != "cpu", reason="certifies the CPU's device class")]

PRODUCT_KEY = "gemm|B=1|M=32|N=64|K=64|float32,float32|a_k_unit=1|b_n_unit=1"


@pytest.fixture(autouse=True)
def store(tmp_path, monkeypatch):
    """A store of this test's own; plans made under another store's settings are forgotten."""
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path / "store"))
    for name in ("NBX_TUNING", "NBX_CERTIFIED_ONLY"):
        monkeypatch.delenv(name, raising=False)
    clear_all()
    yield tmp_path / "store"
    clear_all()


def _product_of_key():
    """Operands forming PRODUCT_KEY (M 20 and N 40 fall in the key's buckets of 32 and 64)."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((20, 64)).astype(np.float32), rng.standard_normal((64, 40)).astype(np.float32)
    return nbx.tensor(a, device="cpu"), nbx.tensor(b, device="cpu")


def test_keys_parse_and_name_their_representative_shapes():
    assert parse_key(PRODUCT_KEY) == ("gemm", {"B": 1, "M": 32, "N": 64, "K": 64}, ("float32", "float32"),
                                      {"a_k_unit": "1", "b_n_unit": "1"})
    top, ragged = representative_extents("gemm", parse_key(PRODUCT_KEY)[1], load_facts("hopper"))
    assert top == {"B": 1, "M": 32, "N": 64, "K": 64}
    ladders = load_facts("hopper")["ladders"]
    for name, extent in ragged.items():  # the smallest extent of each bucket: still the same key
        ladder = ladders["rows" if name in ("B", "M") else "cols"]
        assert tuning.bucket(extent, ladder) == top[name]
        assert extent == 1 or tuning.bucket(extent - 1, ladder) < top[name]
    with pytest.raises(ValueError, match="no dtypes part"):
        parse_key("gemm|M=4")


def test_a_certified_graph_runs_certified_only(tmp_path):
    directory = _encoder(str(tmp_path / "g"))
    reports = certify.certify_graph(graph.load(directory, weights=False), {"s": 20}, "cpu")
    assert {r["status"] for r in reports} == {"certified"} and {r["op"] for r in reports} == {
        "matmul", "scaled_dot_product_attention"}
    for key, entry in tuning.entries("cpu").items():
        assert entry["certified"] and entry["device_class"] == "cpu" and entry["versions"] == tuning.versions()
        assert entry["refused"] == [] and len(entry["shapes"]) >= 1
    model = graph.load(directory, device="cpu")
    inputs = _inputs(model, {"s": 20})
    free = model(*inputs).numpy()
    clear_all()
    with tuning.certified_only():
        np.testing.assert_array_equal(model(*inputs).numpy(), free)  # the same settings: the same bits
        with pytest.raises(graph.GraphError) as failed:  # s = 50: other buckets, never certified
            model(*_inputs(model, {"s": 50}))
    refused = failed.value.__cause__
    assert isinstance(refused, tuning.TuningKeyMissing)
    message = str(refused)
    assert refused.key in message and f"op {refused.op}" in message
    assert f"nbx tune --certify --key '{refused.key}'" in message and "NBX_TUNING_DIR=" in message
    again = certify.certify_graph(graph.load(directory, weights=False), {"s": 20}, "cpu")
    assert {r["status"] for r in again} == {"kept"}  # certified entries of these versions are not redone


def _plant(monkeypatch, wrong_block_k: int, good: bool = True):
    """GEMM candidates led by one whose launches write nothing (a miscompiled tile, say), and the usual one
    after it unless ``good`` is False."""
    usual = matmul_plans.gemm_candidates

    def candidates(facts, m, n, k, dtype, single=False):
        first = usual(facts, m, n, k, dtype, single=single)[0]
        return [dict(first, BLOCK_K=wrong_block_k)] + ([first] if good else [])

    def launch(kernel, grid, args, constexprs):
        real = tuning_plans.PlannedLaunch(kernel, grid, args, constexprs)
        return (lambda dev, tensors: None) if constexprs.get("BLOCK_K") == wrong_block_k else real
    from nbxtensor.ops import plans as tuning_plans
    monkeypatch.setattr(matmul_plans, "gemm_candidates", candidates)
    monkeypatch.setattr(matmul_plans, "PlannedLaunch", launch)


def test_a_candidate_planted_to_compute_wrongly_is_refused(monkeypatch):
    _plant(monkeypatch, wrong_block_k=16)
    report = certify.certify_key(PRODUCT_KEY, "cpu")
    assert report["status"] == "certified" and report["config"]["BLOCK_K"] != 16
    (refused,) = report["refused"]
    assert refused["config"]["BLOCK_K"] == 16 and "outside the float64 reference's bound" in refused["reason"]
    entry = tuning.entries("cpu")[PRODUCT_KEY]
    assert entry["refused"] == report["refused"] and entry["candidates"] == 2
    a, b = _product_of_key()
    with tuning.certified_only():
        np.testing.assert_allclose(nbx.mm(a, b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)


def test_a_key_whose_every_candidate_is_wrong_stays_uncertified(monkeypatch):
    _plant(monkeypatch, wrong_block_k=16, good=False)
    report = certify.certify_key(PRODUCT_KEY, "cpu")
    assert report["status"] == "refused" and report["config"] is None and len(report["refused"]) == 1
    a, b = _product_of_key()
    with tuning.certified_only(), pytest.raises(tuning.TuningKeyMissing, match="refused every candidate"):
        nbx.mm(a, b)


def test_a_candidate_that_fails_to_run_is_refused_with_its_reason(monkeypatch, tmp_path):
    usual = matmul_plans.gemm_candidates
    monkeypatch.setattr(matmul_plans, "gemm_candidates", lambda facts, m, n, k, dtype, single=False: [
        dict(usual(facts, m, n, k, dtype)[0], BLOCK_K=24), *usual(facts, m, n, k, dtype)])  # not a power of two
    report = certify.certify_key(PRODUCT_KEY, "cpu")
    assert report["status"] == "certified"
    assert report["refused"][0]["reason"].startswith("failed to run on shape [1, 32, 64, 64]")
    assert tuning.export_store(tmp_path / "shipped.json") == 1  # the reason is one line a store file holds


def _restamp(store, versions):
    path = store / "cpu.json"
    document = json.loads(path.read_text())
    for entry in document["entries"].values():
        entry["versions"] = versions
    path.write_text(json.dumps(document))
    tuning_cache._caches.clear()  # as a fresh process reads it


def test_stale_entries_are_certified_again_never_used(store, monkeypatch):
    certify.certify_key(PRODUCT_KEY, "cpu")
    _restamp(store, dict(tuning.versions(), triton="0.0.1"))
    a, b = _product_of_key()
    with tuning.certified_only(), pytest.raises(tuning.TuningKeyMissing, match="other versions.*triton 0.0.1"):
        nbx.mm(a, b)
    # a run free to tune ignores the stale setting (one that cannot run, planted to show it is not taken)
    document = json.loads((store / "cpu.json").read_text())
    document["entries"][PRODUCT_KEY]["config"]["BLOCK_K"] = 24
    (store / "cpu.json").write_text(json.dumps(document))
    tuning_cache._caches.clear()
    np.testing.assert_allclose(nbx.mm(a, b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)
    report = certify.certify_key(PRODUCT_KEY, "cpu")
    assert report["status"] == "certified" and report["config"]["BLOCK_K"] != 24
    assert tuning.entries("cpu")[PRODUCT_KEY]["versions"] == tuning.versions()


def test_certified_only_switches(monkeypatch):
    assert tuning.mode() == tuning.MODE_TUNE
    monkeypatch.setenv("NBX_CERTIFIED_ONLY", "1")
    assert tuning.mode() == tuning.MODE_CERTIFIED_ONLY
    with tuning.certified_only(False):
        assert tuning.mode() == tuning.MODE_TUNE
    monkeypatch.setenv("NBX_CERTIFIED_ONLY", "yes")
    with pytest.raises(ValueError, match="NBX_CERTIFIED_ONLY='yes'"):
        tuning.mode()
    monkeypatch.delenv("NBX_CERTIFIED_ONLY")
    tuning.set_certified_only(True)
    try:
        assert tuning.mode() == tuning.MODE_CERTIFIED_ONLY
        a, b = _product_of_key()
        with pytest.raises(tuning.TuningKeyMissing, match=r"gemm\|B=1\|M=32.*has no entry"):
            nbx.mm(a, b)
    finally:
        tuning.set_certified_only(None)
    assert tuning.mode() == tuning.MODE_TUNE


def test_the_store_exports_to_one_file_and_imports_back(tmp_path, monkeypatch):
    certify.certify_key(PRODUCT_KEY, "cpu")
    before = tuning.entries("cpu")
    shipped = tmp_path / "model.tuning.json"
    assert tuning.export_store(shipped) == 1
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path / "elsewhere"))
    assert tuning.entries("cpu") == {}
    assert tuning.import_store(shipped) == {"cpu": 1}
    assert tuning.entries("cpu") == before
    clear_all()
    a, b = _product_of_key()
    with tuning.certified_only():
        nbx.mm(a, b)


SECRET = "s3cr3t-c0ntent"


def _document(**entry_fields):
    entry = {"config": {"BLOCK_M": 32}, "ms": None, "candidates": 1, "certified": True, "device_class": "cpu",
             "versions": {"nbxtensor": "0", "triton": "0", "driver": "none"}, "refused": [], "shapes": [[1, 2]]}
    entry.update(entry_fields)
    return {"format": "nbxtensor-tuning", "version": 1, "stores": {"cpu": {PRODUCT_KEY: entry}}}


HOSTILE = {
    "not JSON": SECRET.encode() + b"{",
    "not UTF-8": b"\xff\xfe" + SECRET.encode(),
    "a list": json.dumps([SECRET]).encode(),
    "another format": json.dumps({"format": SECRET, "version": 1, "stores": {}}).encode(),
    "another version": json.dumps({"format": "nbxtensor-tuning", "version": 99, "stores": {}}).encode(),
    "extra fields": json.dumps({**_document(), SECRET: 1}).encode(),
    "a class that walks out of the store": json.dumps(
        {"format": "nbxtensor-tuning", "version": 1, "stores": {"../" + SECRET: {}}}).encode(),
    "a nested setting": json.dumps(_document(config={"BLOCK_M": {SECRET: 1}})).encode(),
    "an unknown entry field": json.dumps(_document(**{SECRET: 1})).encode(),
    "an infinite time": json.dumps(_document(ms=float("inf"))).encode(),
    "a tile of a billion": json.dumps(_document(config={"BLOCK_M": 1 << 30})).encode(),
    "a refused candidate without reason": json.dumps(_document(refused=[{"config": {}}])).encode(),
    "a certified flag that is text": json.dumps(_document(certified=SECRET)).encode(),
    "a class stamped into another": json.dumps(_document(device_class=SECRET)).encode(),
    "versions missing one": json.dumps(_document(versions={"nbxtensor": SECRET})).encode(),
    "deep nesting": b"[" * 100000 + b"]" * 100000,
}


@pytest.mark.parametrize("problem", sorted(HOSTILE))
def test_hostile_store_files_are_refused_cleanly(problem, tmp_path, store):
    path = tmp_path / "hostile.json"
    path.write_bytes(HOSTILE[problem])
    with pytest.raises(tuning.StoreFileError) as refused:
        tuning.import_store(path)
    message = str(refused.value)
    assert message.startswith(f"tuning store file {path}: ") and SECRET not in message
    assert not store.exists()  # nothing was imported


def test_an_oversized_store_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_document()))
    monkeypatch.setattr(tuning_store, "MAX_STORE_BYTES", 64)
    with pytest.raises(tuning.StoreFileError, match="more than the 64 a store may have"):
        tuning.import_store(path)
    with pytest.raises(tuning.StoreFileError, match="cannot be read"):
        tuning.import_store(tmp_path / "missing.json")


def test_cli_tune_run_export_import(tmp_path, capsys, monkeypatch):
    directory = _encoder(str(tmp_path / "g"))
    model = graph.load(directory, device="cpu")
    np.save(tmp_path / "x.npy", _inputs(model, {"s": 20})[0])
    np.save(tmp_path / "x50.npy", _inputs(model, {"s": 50})[0])
    run = ["run", directory, "--certified-only", "--out", str(tmp_path / "out")]
    assert cli.main([*run, "--input", f"x={tmp_path / 'x.npy'}"]) == 2  # nothing certified yet
    assert "nbx tune --certify --key 'gemm|" in capsys.readouterr().err
    assert cli.main(["tune", directory, "--certify", "--dims", "s=20", "--export", str(tmp_path / "t.json")]) == 0
    printed = capsys.readouterr().out
    assert "certified  attention|L=32|S=64" in printed and "exported 2 entries" in printed
    clear_all()
    assert cli.main([*run, "--input", f"x={tmp_path / 'x.npy'}"]) == 0
    assert cli.main([*run, "--input", f"x={tmp_path / 'x50.npy'}"]) == 2
    refusal = capsys.readouterr().err.strip().splitlines()[-1]
    assert refusal.startswith("nbx run: certified-only run: launch key 'gemm|B=1|M=64")
    assert refusal.endswith(f"nbx tune {directory} --certify --dims s=50")
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path / "fresh"))
    assert cli.main(["tune", "--import", str(tmp_path / "t.json")]) == 0
    assert "imported 2 entries" in capsys.readouterr().out and len(tuning.entries("cpu")) == 2
    assert cli.main(["tune", "--certify", "--key", PRODUCT_KEY]) == 0
    assert "certified  " + PRODUCT_KEY in capsys.readouterr().out
    (tmp_path / "bad.json").write_text(SECRET)
    assert cli.main(["tune", "--import", str(tmp_path / "bad.json")]) == 2
    assert cli.main(["tune", directory]) == 2  # no --certify
    assert cli.main(["tune", "--certify", "--key", "gemm|M=4"]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 3 and all(line.startswith("nbx tune: ") for line in refused)
    assert SECRET not in refused[0]


@pytest.mark.parametrize("format", ["int4", "int8", "fp8"])
def test_quantized_keys_certify_and_serve_certified_only(format):
    from nbxtensor.ops.quant import quantized_linear
    from nbxtensor.quant import QuantizedWeight
    rng = np.random.default_rng(4)
    weight = QuantizedWeight.quantize(rng.standard_normal((40, 256)).astype(np.float32), format, device="cpu")
    x = nbx.tensor(rng.standard_normal((3, 256)).astype(np.float32), device="cpu")
    with tuning.recording() as formed:
        free = quantized_linear(x, weight).numpy()
    (key,) = formed
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["op"] == "quantized_linear"
    clear_all()
    with tuning.certified_only():
        np.testing.assert_array_equal(quantized_linear(x, weight).numpy(), free)


def test_the_census_of_a_1b_llm_over_its_buckets_is_quick():
    """TinyLlama-1.1B's shape: every prompt length up to its 2048 context, every batch size to 256."""
    import time

    from nbxtensor.llm.census import engine_census
    from nbxtensor.llm.model import DecoderConfig
    config = DecoderConfig.from_hf({"architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
                                    "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
                                    "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048},
                                   "tinyllama")
    start = time.perf_counter()
    keys = engine_census(config, "bfloat16", load_facts("hopper"), context=2048, batch_sizes=range(1, 257))
    elapsed = time.perf_counter() - start
    assert {key.split("|")[0] for key in keys} == {"gemm", "gemv", "attention"}
    assert elapsed < 5.0, elapsed  # about 0.5 s on two busy cores
