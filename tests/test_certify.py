"""Ahead-of-time tuning with certification (``certify.py``), certified-only runs and the tuning store
in one file (``tuning/store.py``), on the CPU: the interpreter times nothing, so certification there chooses
the first candidate that matches the float64 reference, and stores it like a GPU's timed choice."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from nbxtensor import certify, cli, graph, tuning
from nbxtensor.ops import convolution, matmul_plans
from nbxtensor.ops.plans import clear_all
from nbxtensor.tuning import cache as tuning_cache
from nbxtensor.tuning import store as tuning_store
from nbxtensor.certify import parse_key, representative_extents
from nbxtensor.device.facts import load as load_facts
from tests.conftest import TEST_DEVICE, cpu_kernels
from tests.test_census import _conv_block, _encoder, _inputs

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


def test_a_certified_conv_block_runs_certified_only(tmp_path):
    directory = _conv_block(str(tmp_path / "g"))
    model = graph.load(directory, device="cpu")
    inputs = _inputs(model, {"s": 2})
    with tuning.certified_only(), pytest.raises(graph.GraphError) as failed:  # nothing certified yet
        model(*inputs)
    refused = failed.value.__cause__
    assert isinstance(refused, tuning.TuningKeyMissing) and refused.key.startswith("conv|")
    assert refused.op == "convolution" and f"nbx tune --certify --key '{refused.key}'" in str(refused)
    reports = certify.certify_graph(graph.load(directory, weights=False), {"s": 2}, "cpu")
    assert {r["status"] for r in reports} == {"certified"}
    assert sorted(r["key"].split("|")[0] for r in reports) == ["conv", "conv", "direct_conv", "gemm"]
    for report in reports:  # each convolution key on its top rungs and on a ragged shape of its buckets
        entry = tuning.entries("cpu")[report["key"]]
        assert entry["refused"] == [] and len(entry["shapes"]) == 2, report["key"]
    clear_all()
    free = model(*inputs).numpy()
    clear_all()
    with tuning.certified_only():
        np.testing.assert_array_equal(model(*inputs).numpy(), free)


def _image(shape, dtype="float32", channels_last=False):
    """A random (N, C, *S) tensor, channels innermost in memory when asked."""
    values = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    if not channels_last:
        return nbx.tensor(values, device="cpu").to(dtype)
    dims = len(shape) - 2
    stored = nbx.tensor(np.ascontiguousarray(np.moveaxis(values, 1, -1)), device="cpu").to(dtype)
    return stored.permute(0, dims + 1, *range(1, dims + 1))


CONVOLUTIONS = {
    # every flag a key records and both kernels: the certifier's reference convolves, strides, groups and
    # transposes as the kernels do, and its operands form the key they were made for
    "1-d strided": lambda: F.conv1d(_image((2, 16, 30)), _image((17, 16, 5)), stride=2),
    "channels-last, float16": lambda: F.conv2d(_image((1, 16, 5, 5), "float16", True),
                                               _image((20, 16, 3, 3), "float16"), padding=1),
    "depthwise, bfloat16": lambda: F.conv2d(_image((1, 8, 5, 5), "bfloat16"), _image((8, 1, 3, 3), "bfloat16"),
                                            padding=1, groups=8),
    "depthwise, channels-last": lambda: F.conv2d(_image((1, 24, 6, 9), "float16", True),
                                                 _image((24, 1, 3, 3), "float16"), padding=1, groups=24),
    "grouped, strided": lambda: F.conv2d(_image((1, 36, 5, 6)), _image((24, 12, 3, 3)), stride=2, padding=1, groups=3),
    "3-d": lambda: F.conv3d(_image((1, 18, 4, 5, 3)), _image((16, 18, 3, 3, 3)), stride=(2, 1, 1), padding=1),
    "transposed": lambda: F.conv_transpose2d(_image((1, 16, 3, 4)), _image((16, 9, 2, 3)), stride=2),
    "transposed depthwise": lambda: F.conv_transpose2d(_image((1, 3, 4, 5)), _image((3, 1, 3, 3)), stride=2,
                                                       padding=1, groups=3),
    "1x1 read in place": lambda: F.conv2d(_image((1, 16, 4, 5), channels_last=True)[..., :4], _image((24, 16, 1, 1))),
    "one output position": lambda: F.conv2d(_image((1, 3, 3, 3)), _image((8, 3, 3, 3))),
    "one output position, 1x1 stride 2": lambda: F.conv2d(_image((1, 16, 2, 2)), _image((64, 16, 1, 1)), stride=2),
}


# a key's setting was chosen on its top rungs' candidates, whose K tile may differ from the one this call's
# channels would pick: two float32 sums of the same K <= 486 products in other orders differ by at most
# 2 * K * 2^-24 of their magnitudes' sum, here (random signs) about the largest output; half-float outputs
# may then round to a neighbour (2^-10, 2^-7 relative, twice for both results)
_REORDERED = {"float32": 6e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.mark.parametrize("call", sorted(CONVOLUTIONS))
def test_convolution_keys_certify_and_serve_certified_only(call):
    with tuning.recording() as formed:
        free = CONVOLUTIONS[call]()
    (key,) = formed
    assert key.split("|")[0] in ("conv", "direct_conv", "depthwise_conv")
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["op"] == "convolution" and report["refused"] == []
    clear_all()
    with tuning.certified_only():
        served = CONVOLUTIONS[call]().float().numpy()
    tolerance = _REORDERED[free.dtype.name] * np.abs(free.float().numpy()).max()
    np.testing.assert_allclose(served, free.float().numpy(), rtol=0, atol=tolerance)


def test_a_channels_last_depthwise_key_certifies_the_channels_inner_kernel():
    """A channels-last depthwise convolution forms a key of its own, which certification reads as a depthwise
    shape (one channel a group, more channels than a channel block holds): its candidates are the
    channels-inner kernel's too, so a certified-only run takes that kernel, with the bits of a free run."""
    from nbxtensor.kernels import conv as conv_kernels
    from nbxtensor.launch import capture
    call = CONVOLUTIONS["depthwise, channels-last"]
    with tuning.recording() as formed:
        free = call()
    (key,) = formed
    assert key.startswith("depthwise_conv|") and key.endswith("|channels_last=1|transposed=0|groups=1")
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["op"] == "convolution" and report["refused"] == []
    assert report["config"].get("CHANNELS_INNER")
    assert len(tuning.entries("cpu")[key]["shapes"]) == 2  # its top rung and a ragged shape of its buckets
    clear_all()
    with tuning.certified_only(), capture() as captured:
        served = call()
    assert conv_kernels.conv_depthwise_channels_inner in [launch[0] for launch in captured.launches]
    np.testing.assert_array_equal(served.float().numpy(), free.float().numpy())


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("groups", [1, 3])
def test_the_certifiers_convolution_reference_is_the_tests(transposed, groups):
    """``certify``'s float64 convolution against test_convolution's, written apart: 3-d, uneven strides and
    padding, groups, output padding."""
    from tests.test_convolution import reference
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 3, 5, 4))
    w = rng.standard_normal((6, 2, 2, 3, 2) if transposed else (6, 6 // groups, 2, 3, 2))
    b = rng.standard_normal(2 * groups if transposed else 6)
    stride, padding, output_padding = (1, 2, 3), (0, 1, 1), (0, 1, 2) if transposed else (0, 0, 0)
    want = reference(x, w, b, stride, padding, 1, groups, transposed, output_padding)
    got = certify._conv_reference(x, w, b, stride, padding, groups, transposed, want.shape[2:])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


STEM_KEY = "conv|M=64|N=64|K=16|float32|window=1x3x3|stride=1x1x1|channels_last=1|transposed=0|groups=0"
DEPTHWISE_KEY = "direct_conv|M=64|N=16|K=16|float32|window=1x3x3|stride=1x2x2|channels_last=0|transposed=0|groups=1"


@pytest.mark.parametrize("key", [STEM_KEY, DEPTHWISE_KEY])
def test_a_convolution_candidate_planted_to_compute_wrongly_is_refused(key, monkeypatch):
    """A candidate led in whose launches write nothing (BLOCK_M 8: a miscompiled tile, say)."""
    from nbxtensor.ops.plans import PlannedLaunch
    listed, call = convolution._Setting.candidates, PlannedLaunch.__call__
    monkeypatch.setattr(convolution._Setting, "candidates",
                        lambda self, facts, dtype: [dict(c, BLOCK_M=8) for c in listed(self, facts, dtype)[:1]]
                        + listed(self, facts, dtype))
    monkeypatch.setattr(PlannedLaunch, "__call__", lambda self, device, tensors: None
                        if self.constexprs.get("BLOCK_M") == 8 else call(self, device, tensors))
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["config"]["BLOCK_M"] != 8
    (refused,) = report["refused"]
    assert refused["config"]["BLOCK_M"] == 8
    assert re.match(r"(\d+) of \1 outputs outside the float64 reference's bound on shape \[64, ", refused["reason"])
    assert tuning.entries("cpu")[key]["refused"] == report["refused"]


@pytest.mark.parametrize("key, problem", [
    ("conv|M=64|N=64|K=16|float32|window=1x3x3", "no 'stride' flag"),
    ("conv|M=64|N=64|K=16|float32|window=3x3|stride=1x1x1|channels_last=0|transposed=0|groups=0",
     "window='3x3' is not three positive extents"),
    ("direct_conv|M=64|N=16|float32|window=1x3x3|stride=1x0x1|channels_last=0|transposed=0|groups=0",
     r"extents \['M', 'N'\] and dtypes \['float32'\], expected M, N, K"),
    ("depthwise_conv|M=64|N=16|K=16|float16|window=1x3x3|stride=1x1x1|channels_last=0|transposed=0|groups=1",
     "a depthwise_conv key is a forward, grouped, channels-last convolution's"),
])
def test_malformed_convolution_keys_are_refused_by_name(key, problem):
    with pytest.raises(ValueError, match=problem):
        certify.certify_key(key, "cpu")


def _plant(monkeypatch, wrong_block_k: int, good: bool = True, good_first: bool = False):
    """GEMM candidates led by one whose launches write nothing (a miscompiled tile, say), and the usual one
    after it unless ``good`` is False (before it with ``good_first``)."""
    usual = matmul_plans.gemm_candidates

    def candidates(facts, m, n, k, dtype, **options):
        first = usual(facts, m, n, k, dtype, **options)[0]
        wrong = [dict(first, BLOCK_K=wrong_block_k)]
        return [first] + wrong if good_first else wrong + ([first] if good else [])

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


def test_a_candidate_that_writes_nothing_is_refused_after_a_good_one_left_its_result_in_memory(monkeypatch):
    """The good candidate runs first and frees its output; the next one's output may take the same memory,
    which then already holds the right values. Outputs made while a candidate is judged start as NaN bits,
    so only what the candidate writes counts."""
    _plant(monkeypatch, wrong_block_k=16, good_first=True)
    report = certify.certify_key(PRODUCT_KEY, "cpu")
    assert report["status"] == "certified" and report["config"]["BLOCK_K"] != 16
    (refused,) = report["refused"]
    assert refused["config"]["BLOCK_K"] == 16 and "outside the float64 reference's bound" in refused["reason"]


def test_memory_allocated_while_poisoned_starts_as_nan_and_minus_one():
    from nbxtensor import allocation
    make = allocation.fresh_tensor_maker((2, 3), nbx.float32, nbx.device(TEST_DEVICE))
    with allocation.poisoned():
        floats = allocation.new_tensor((4,), nbx.bfloat16, nbx.device(TEST_DEVICE))
        ints = allocation.new_tensor((4,), nbx.int32, nbx.device(TEST_DEVICE))
        planned = make()
    assert np.isnan(floats.float().numpy()).all() and (ints.numpy() == -1).all()
    assert np.isnan(planned.numpy()).all()


def test_a_key_whose_every_candidate_is_wrong_stays_uncertified(monkeypatch):
    _plant(monkeypatch, wrong_block_k=16, good=False)
    report = certify.certify_key(PRODUCT_KEY, "cpu")
    assert report["status"] == "refused" and report["config"] is None and len(report["refused"]) == 1
    a, b = _product_of_key()
    with tuning.certified_only(), pytest.raises(tuning.TuningKeyMissing, match="refused every candidate"):
        nbx.mm(a, b)


def test_a_candidate_that_fails_to_run_is_refused_with_its_reason(monkeypatch, tmp_path):
    usual = matmul_plans.gemm_candidates
    monkeypatch.setattr(matmul_plans, "gemm_candidates", lambda facts, m, n, k, dtype, **options: [
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
    # keys that parse but lack what their kernel's operands need: refused in one line, not a traceback
    assert cli.main(["tune", "--certify", "--key", "gemm|M=4|float32"]) == 2
    assert cli.main(["tune", "--certify", "--key", "conv|M=4|N=8|K=8|bfloat16|window=1x3"]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 5 and all(line.startswith("nbx tune: ") for line in refused)
    assert SECRET not in refused[0]


@pytest.mark.parametrize("format, fp8_scales, fp8_activations", [
    ("int4", None, False), ("int8", None, False), ("fp8", "channel", False), ("fp8", "channel", True),
    ("fp8", "block", True)])
def test_quantized_keys_certify_and_serve_certified_only(format, fp8_scales, fp8_activations):
    from nbxtensor.ops.quant import quantized_linear
    from nbxtensor.quant import QuantizedWeight
    rng = np.random.default_rng(4)
    options = {"fp8_scales": fp8_scales} if fp8_scales else {}
    weight = QuantizedWeight.quantize(rng.standard_normal((40, 256)).astype(np.float32), format, device="cpu",
                                      **options)
    x = nbx.tensor(rng.standard_normal((3, 256)).astype(np.float32), device="cpu")
    with tuning.recording() as formed:
        free = quantized_linear(x, weight, fp8_activations=fp8_activations).numpy()
    (key,) = formed
    assert key.startswith({"channel": "fp8_gemm|", "block": "fp8_block_gemm|"}[fp8_scales] if fp8_activations
                          else "quantized_")
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["op"] == "quantized_linear"
    clear_all()
    with tuning.certified_only():
        np.testing.assert_array_equal(quantized_linear(x, weight, fp8_activations=fp8_activations).numpy(), free)


@pytest.mark.parametrize("op, dtype", [("rms_norm_linear", "float32"), ("add_rms_norm_linear", "bfloat16"),
                                       ("layer_norm_linear", "float32"), ("add_layer_norm_linear", "float16"),
                                       ("act_and_mul_linear", "float16")])
def test_prologue_keys_certify_refuse_a_wrong_candidate_and_serve_certified_only(op, dtype, monkeypatch):
    """The products with a norm or an activation in their prologue: their own keys and certifier (a float64
    reference of the norm or activation, then the product). A planted candidate whose splits stop a tile
    short of K is refused."""
    from nbxtensor.ops import matmul_prologue
    rng = np.random.default_rng(5)
    x, residual, norm, weight, gate_up = (_random(rng, dtype, *shape) for shape in ((3, 40), (3, 40), (40,),
                                                                                     (24, 40), (3, 80)))
    good = matmul_prologue.gemv_candidates
    monkeypatch.setattr(matmul_prologue, "gemv_candidates",
                        lambda facts, m, n, k: [dict(c, BLOCK_N=16, BLOCK_K=16, SPLITS=2) for c in good(facts, m, n, k)]
                        + good(facts, m, n, k))
    _certify_refusing_short_splits(monkeypatch, op, _prologue_call(op, x, residual, norm, gate_up, weight))


def _random(rng, dtype, *shape):
    return nbx.tensor(rng.standard_normal(shape).astype(np.float32), device="cpu").to(dtype)


def _prologue_call(op, x, residual, norm, gate_up, weight):
    """A call of the prologue product ``op`` on these operands (the sum of add_rms_norm_linear dropped)."""
    from nbxtensor.ops import matmul_prologue
    return {"rms_norm_linear": lambda: matmul_prologue.rms_norm_linear(x, norm, weight),
            "add_rms_norm_linear": lambda: matmul_prologue.add_rms_norm_linear(x, residual, norm, weight)[0],
            "layer_norm_linear": lambda: matmul_prologue.layer_norm_linear(x, norm, norm, weight),
            "add_layer_norm_linear": lambda: matmul_prologue.add_layer_norm_linear(x, residual, norm, norm,
                                                                                   weight)[0],
            "act_and_mul_linear": lambda: matmul_prologue.act_and_mul_linear(gate_up, weight)}[op]


def _certify_refusing_short_splits(monkeypatch, op, call) -> str:
    """Certifies the key ``call`` forms while each setting of two splits stops a tile short of K: that setting
    is refused, one of one split certified, and a certified-only call gives a free call's bits. The key."""
    from nbxtensor.ops import matmul_prologue
    real_split_k = matmul_prologue.split_k

    def planted_split_k(k, config):  # a split's K range one tile short: its last tile is never read
        k_per_split, splits = real_split_k(k, config)
        return (k_per_split - 16, splits) if config["SPLITS"] == 2 else (k_per_split, splits)
    monkeypatch.setattr(matmul_prologue, "split_k", planted_split_k)
    with tuning.recording() as formed:
        call()
    (key,) = formed
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["op"] == op and report["config"]["SPLITS"] == 1
    (refused,) = report["refused"]
    assert refused["config"]["SPLITS"] == 2 and "outside the float64 reference's bound" in refused["reason"]
    clear_all()
    free = call().numpy()
    clear_all()
    with tuning.certified_only():
        np.testing.assert_array_equal(call().numpy(), free)
    return key


@pytest.mark.parametrize("op, dtype, form", [("add_rms_norm_linear", "bfloat16", "int4"),
                                             ("rms_norm_linear", "float32", "int8"),
                                             ("add_layer_norm_linear", "bfloat16", "int8"),
                                             ("act_and_mul_linear", "float16", "fp8")])
def test_quantized_prologue_keys_certify_refuse_a_wrong_candidate_and_serve_certified_only(op, dtype, form,
                                                                                           monkeypatch):
    """One row's norm or activation in a quantized GEMV's prologue: keys of their own, certified against a
    weight rounded to nearest in the key's format (dequantized on the host); a planted candidate whose splits
    stop a tile short of K is refused."""
    from nbxtensor.ops import matmul_prologue
    from nbxtensor.quant import QuantizedWeight
    rng = np.random.default_rng(6)
    x, residual, norm, gate_up = (_random(rng, dtype, *shape) for shape in ((1, 64), (1, 64), (64,), (1, 128)))
    weight = QuantizedWeight.quantize(rng.standard_normal((24, 64)).astype(np.float32) * 0.05, form, group_size=64,
                                      device="cpu", dtype=dtype)
    good = matmul_prologue.decode_candidates
    monkeypatch.setattr(matmul_prologue, "decode_candidates",
                        lambda *args: [dict(c, BLOCK_N=16, BLOCK_K=16, SPLITS=2) for c in good(*args)] + good(*args))
    key = _certify_refusing_short_splits(monkeypatch, op, _prologue_call(op, x, residual, norm, gate_up, weight))
    assert key.startswith("quantized_gemv_") and f"|format={form}" in key


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
    # decode batches of up to 16 rows fold their norms and activations into the products' prologues
    assert {key.split("|")[0] for key in keys} == {"gemm", "gemv", "attention", "gemv_rms_norm", "gemv_act_and_mul"}
    assert elapsed < 5.0, elapsed  # about 0.5 s on two busy cores


def test_a_float32_attention_key_on_bfloat16_parts_certifies(monkeypatch):
    """Float32 attention on bfloat16 parts (forced: the CPU's facts list no matrix unit) stays inside the
    certifier's float32 attention bound, causal and with an additive mask; a certified-only run takes it."""
    monkeypatch.setattr(matmul_plans, "_by_planes", lambda dtype, facts: dtype.name == "float32")
    clear_all()
    key = "attention|L=32|S=64|E=64|float32|causal=1|mask=2|bf16_parts=1"
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["config"]["PRECISION"] == "bf16_parts", report
    assert report["refused"] == []
    rng = np.random.default_rng(5)
    q, k, v = (nbx.tensor(rng.standard_normal(shape).astype(np.float32), device="cpu")
               for shape in ((1, 2, 20, 64), (1, 2, 40, 64), (1, 2, 40, 64)))
    mask = nbx.tensor(rng.standard_normal((20, 40)).astype(np.float32), device="cpu")
    with tuning.certified_only(), tuning_cache.recording() as formed:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
    assert key in formed
