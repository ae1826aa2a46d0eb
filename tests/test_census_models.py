"""The census against real models' runs: graphs of the zoo (tiny configs of real architectures, exported
with torch) and the LLM engine's prefill chunks and decode buckets (tiny Hugging Face checkpoints). A shadow
run must form exactly the keys the census names; once certified, the same runs go through certified-only."""
from __future__ import annotations

import numpy as np
import pytest

from nbxtensor import census as C
from nbxtensor import certify, cli, graph, llm, tuning
from nbxtensor.device.facts import load as load_facts
from nbxtensor.llm.census import engine_census
from nbxtensor.llm.checkpoint import read_json
from nbxtensor.llm.model import DecoderConfig
from nbxtensor.ops.plans import clear_all
from tests.conftest import TEST_DEVICE, cpu_kernels

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.test_zoo import ENCODER_ONLY_OR_DECODER_ONLY, LastHidden, _seeded  # noqa: E402

pytestmark = [cpu_kernels, pytest.mark.skipif(TEST_DEVICE != "cpu", reason="compares with the CPU's facts")]
CPU = load_facts("cpu")
# the zoo's graphs exported here: an encoder, a decoder with grouped heads and one with fused projections
ZOO = ("bert", "llama_gqa", "gpt2")


@pytest.fixture(autouse=True)
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path / "store"))
    clear_all()
    yield
    clear_all()


@pytest.fixture(scope="module", params=ZOO)
def zoo_graph(request, tmp_path_factory):
    from nbxtensor.export import export
    module = LastHidden(_seeded(ENCODER_ONLY_OR_DECODER_ONLY[request.param]))
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=32)
    directory = str(tmp_path_factory.mktemp(request.param))
    export(module, (torch.randint(0, 100, (2, 7)),), directory, dynamic_shapes=({0: batch, 1: seq},))
    return directory


@pytest.mark.parametrize("batch, seq", [(2, 7), (3, 20)])
def test_zoo_census_equals_the_shadow_run(zoo_graph, batch, seq):
    model = graph.load(zoo_graph, device="cpu")
    values = model.bind([(batch, seq)])
    keys = C.census(graph.load(zoo_graph, weights=False), values, CPU)
    with C.shadow() as formed:
        model(np.random.default_rng(0).integers(0, 100, (batch, seq)))
    assert keys and set(keys) == set(formed)


def test_a_certified_zoo_graph_runs_certified_only(zoo_graph):
    model = graph.load(zoo_graph, device="cpu")
    ids = np.random.default_rng(1).integers(0, 100, (3, 20))
    free = model(ids).numpy()
    reports = certify.certify_graph(graph.load(zoo_graph, weights=False), model.bind([ids.shape]), "cpu")
    assert {r["status"] for r in reports} == {"certified"}
    clear_all()
    with tuning.certified_only():
        certified = model(ids).numpy()
    # the free run took each key's first candidate at the shapes it met, certification chose at the bucket's
    # top rung, where tiles clamp less (the products' K in one step of 64 instead of two of 32): float32 sums
    # rounded in another order, so the outputs agree to sums over the hidden size (64 terms: 64 units of
    # 2^-24 of the magnitudes), not bit for bit
    np.testing.assert_allclose(certified, free, rtol=64 * 2.0 ** -24, atol=64 * 2.0 ** -24 * np.abs(free).max())


LLM_COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, eos_token_id=None, bos_token_id=None,
                  pad_token_id=None)
LLMS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    # sliding windows and capped scores: prefill keys of the windowed and capped kernels
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16, "sliding_window": 8,
                                                     "attn_logit_softcapping": 0.5, "final_logit_softcapping": 2.0}),
}
PROMPTS = [[5, 17, 3, 44, 9], [8, 2, 60], [1, 90, 33, 33, 12, 70, 4, 21, 7, 7]]
CHUNK = 4  # prompts past it prefill in chunks, whose attention reads the cached keys at an offset


@pytest.fixture(scope="module", params=sorted(LLMS))
def checkpoint(request, tmp_path_factory):
    config_name, model_name, extra = LLMS[request.param]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**LLM_COMMON, **extra)).eval()
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    return str(directory)


def _serve(model, prompts):
    """The engine's tokens for ``prompts`` served together, three new tokens each."""
    engine = llm.Engine(model.model, cache_tokens=512)
    requests = [engine.add(prompt, llm.SamplingParams(max_new_tokens=3)) for prompt in prompts]
    while engine.busy:
        engine.step()
    return [r.tokens for r in requests]


def _census(directory, prompts, batch_sizes):
    config = DecoderConfig.from_hf(read_json(directory, "config.json"), directory)
    return engine_census(config, config.dtype, CPU, prompts=[len(p) for p in prompts], batch_sizes=batch_sizes,
                         prefill_chunk=CHUNK)


@pytest.mark.parametrize("served", [PROMPTS[:1], PROMPTS])
def test_engine_census_equals_the_shadow_run(checkpoint, served):
    model = llm.load(checkpoint, device="cpu", prefill_chunk=CHUNK)
    with C.shadow() as formed:
        _serve(model, served)
    # every request runs to the same length: the batch keeps its size to the end
    assert set(_census(checkpoint, served, [len(served)])) == set(formed)


# families whose steps differ from the Llama lineage's: OLMo 2 normalises after attention and after the MLP only
# (its one-row steps fold no norm); GPT-2's LayerNorms fold into the products after them (its plain MLP's
# activation runs apart; biases on every product); Phi's and Cohere's parallel blocks fold nothing (Phi's head
# has a bias, Cohere's MLP is gated)
OTHER_STEPS = {"olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
            "gpt2": ("GPT2Config", "GPT2LMHeadModel", {"n_inner": 96, "num_key_value_heads": 4}),
            "phi": ("PhiConfig", "PhiForCausalLM", {}),
            "cohere": ("CohereConfig", "CohereForCausalLM", {})}


@pytest.mark.parametrize("name", sorted(OTHER_STEPS))
def test_a_family_census_of_other_steps_equals_the_shadow_run(tmp_path, name):
    """The census counts the products each family's steps form, folded or not."""
    config_name, model_name, extra = OTHER_STEPS[name]
    torch.manual_seed(0)
    getattr(transformers, model_name)(getattr(transformers, config_name)(**{**LLM_COMMON, **extra})).eval() \
        .save_pretrained(tmp_path)
    model = llm.load(tmp_path, device="cpu", prefill_chunk=CHUNK)
    with C.shadow() as formed:
        _serve(model, PROMPTS[:1])
    assert set(_census(str(tmp_path), PROMPTS[:1], [1])) == set(formed)


def test_a_certified_engine_serves_certified_only(checkpoint):
    model = llm.load(checkpoint, device="cpu", prefill_chunk=CHUNK)
    free = _serve(model, PROMPTS)
    reports = certify.certify_keys(_census(checkpoint, PROMPTS, [3]), "cpu")
    assert {r["status"] for r in reports} == {"certified"}
    clear_all()
    with tuning.certified_only():
        assert _serve(llm.load(checkpoint, device="cpu", prefill_chunk=CHUNK), PROMPTS) == free
        with pytest.raises(tuning.TuningKeyMissing, match="nbx tune --certify --key '") as refused:
            _serve(model, [list(range(1, 30))])  # a longer prompt: buckets never certified
    assert refused.value.key in str(refused.value) and refused.value.op in ("matmul", "prefill_attention")


def test_cli_census_and_tune_of_a_checkpoint(checkpoint, capsys):
    assert cli.main(["census", checkpoint, "--facts", "hopper", "--batch-sizes", "1", "3", "--context", "64"]) == 0
    printed = capsys.readouterr().out
    assert "LLM checkpoint" in printed and "gemv|M=4|" in printed and "attention|" in printed
    assert cli.main(["tune", checkpoint, "--certify", "--batch-sizes", "1", "--context", "6", "--prefill-chunk",
                     str(CHUNK)]) == 0
    assert "0 refused" not in capsys.readouterr().out
    assert cli.main(["census", checkpoint, "--dims", "s=3"]) == 2
    assert cli.main(["census", checkpoint, "--context", "100000"]) == 2
    assert cli.main(["census", checkpoint, "--prefill-chunk", "0"]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 3 and all(line.startswith("nbx census: ") for line in refused)
