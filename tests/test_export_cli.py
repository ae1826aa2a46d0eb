"""`nbx export` on Hugging Face checkpoint directories: tiny BERT and GPT-2 written by save_pretrained,
exported for a task, run by nbxtensor and compared with transformers; the inferred and user-named
dynamic symbols; the refusals, each one line and exit code 2."""
import contextlib
import io
import logging
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from nbxtensor import graph  # noqa: E402
from nbxtensor.cli import main  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402

from .conftest import cpu_kernels  # noqa: E402

pytestmark = cpu_kernels
VOCAB, POSITIONS = 64, 40
# float32 on both sides, the same op order per layer: 32- and 37-long dot products through two layers
# differ by a few ulp of values of size ~4; 1e-5 is ~100 ulp there, far below any real mistake (O(0.1))
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def _export(*argv):
    """``nbx export ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["export", *map(str, argv)])
    return code, out.getvalue(), err.getvalue()


def _one_line_refusal(code, err):
    assert code == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("nbx export:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, max_position_embeddings=POSITIONS)
    directory = tmp_path_factory.mktemp("bert")
    transformers.BertModel(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=POSITIONS,
                                     bos_token_id=0, eos_token_id=0)
    directory = tmp_path_factory.mktemp("gpt2")
    transformers.GPT2LMHeadModel(config).save_pretrained(directory)
    return directory


def _exported(model_dir, out, task):
    """``nbx export`` of a checkpoint folder into ``out`` for ``task``, which succeeds: (out, its stdout)."""
    code, stdout, _ = _export(model_dir, out, "--task", task)
    assert code == 0
    return out, stdout


@pytest.fixture(scope="module")
def bert_graph(bert_dir, tmp_path_factory):
    return _exported(bert_dir, tmp_path_factory.mktemp("bert_graph"), "feature-extraction")


@pytest.fixture(scope="module")
def gpt2_graph(gpt2_dir, tmp_path_factory):
    return _exported(gpt2_dir, tmp_path_factory.mktemp("gpt2_graph"), "causal-lm")


def _token_ids(shape, seed):
    return torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [(1, 3), (3, 11)])  # neither is the traced (2, 8)
def test_feature_extraction_matches_the_bert_model(bert_dir, bert_graph, shape):
    reference = transformers.AutoModel.from_pretrained(bert_dir, local_files_only=True).eval()
    ids = _token_ids(shape, seed=shape[1])
    with torch.no_grad():
        want = reference(input_ids=ids).last_hidden_state.numpy()
    got = graph.load(bert_graph[0], device="cpu")(ids.numpy()).numpy()
    assert got.shape == shape + (32,)
    np.testing.assert_allclose(got, want, **TOLERANCE)


@pytest.mark.parametrize("shape", [(1, 3), (3, 11)])
def test_causal_lm_matches_the_gpt2_model(gpt2_dir, gpt2_graph, shape):
    reference = transformers.AutoModelForCausalLM.from_pretrained(gpt2_dir, local_files_only=True).eval()
    ids = _token_ids(shape, seed=shape[1])
    with torch.no_grad():
        want = reference(input_ids=ids, use_cache=False).logits.numpy()
    got = graph.load(gpt2_graph[0], device="cpu")(ids.numpy()).numpy()
    assert got.shape == shape + (VOCAB,)
    np.testing.assert_allclose(got, want, **TOLERANCE)


def test_seq2seq_takes_decoder_ids_of_their_own_length(tmp_path):
    torch.manual_seed(0)
    config = transformers.BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37,
                                     decoder_ffn_dim=37, max_position_embeddings=POSITIONS)
    transformers.BartForConditionalGeneration(config).save_pretrained(tmp_path / "bart")
    assert _export(tmp_path / "bart", tmp_path / "graph", "--task", "seq2seq")[0] == 0
    model = graph.load(tmp_path / "graph", device="cpu")
    assert model.inputs == ["input::input_ids", "input::decoder_input_ids"]
    assert model.tensors["input::decoder_input_ids"]["shape"] == ["batch", "decoder_seq"]
    assert model.symbols["decoder_seq"].max == POSITIONS
    ids, decoder_ids = _token_ids((2, 5), seed=1), _token_ids((2, 3), seed=2)
    reference = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "bart", local_files_only=True).eval()
    with torch.no_grad():
        want = reference(input_ids=ids, decoder_input_ids=decoder_ids, use_cache=False).logits.numpy()
    np.testing.assert_allclose(model(ids.numpy(), decoder_ids.numpy()).numpy(), want, **TOLERANCE)


def test_inferred_symbols_are_batch_and_seq_bounded_by_the_config(bert_graph, gpt2_graph):
    for out, stdout in (bert_graph, gpt2_graph):
        model = graph.load(out, device="cpu")
        assert set(model.symbols) == {"batch", "seq"}
        assert model.tensors["input::input_ids"] == {"shape": ["batch", "seq"], "dtype": "int64"}
        batch, seq = model.symbols["batch"], model.symbols["seq"]
        assert (batch.min, batch.max, batch.trace) == (1, None, 2)
        assert (seq.min, seq.max, seq.trace) == (1, POSITIONS, 8)  # max_position_embeddings / n_positions
        peak = model.plan({"batch": 2, "seq": 8}).arena_bytes
        assert f"{len(model.steps)} ops, {model.weight_bytes()} bytes of weights" in stdout
        assert f"planned activation peak (batch=2, seq=8): {peak} bytes" in stdout


def test_nbx_plan_takes_the_inferred_symbols(bert_graph, capsys):
    assert main(["plan", str(bert_graph[0]), "--dim", "batch=2", "--dim", "seq=5"]) == 0
    assert "symbols: {'batch': 2, 'seq': 5}" in capsys.readouterr().out


def test_dynamic_renames_an_inferred_symbol_and_the_mask_shares_it(gpt2_dir, tmp_path):
    out = tmp_path / "graph"
    code, _, _ = _export(gpt2_dir, out, "--task", "causal-lm", "--with-attention-mask",
                         "--dynamic", "input_ids.1=tokens:2:16")
    assert code == 0
    model = graph.load(out, device="cpu")
    assert model.inputs == ["input::input_ids", "input::attention_mask"]
    assert model.tensors["input::attention_mask"]["shape"] == ["batch", "tokens"]
    assert set(model.symbols) == {"batch", "tokens"} and model.symbols["tokens"].max == 16
    ids, mask = _token_ids((2, 5), seed=5), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    reference = transformers.AutoModelForCausalLM.from_pretrained(gpt2_dir, local_files_only=True).eval()
    with torch.no_grad():
        want = reference(input_ids=ids, attention_mask=mask, use_cache=False).logits.numpy()
    np.testing.assert_allclose(model(ids.numpy(), mask.numpy()).numpy(), want, **TOLERANCE)


def test_module_form_keeps_the_dynamic_symbol_names(tmp_path, capsys):
    (tmp_path / "factory.py").write_text("import torch\n"
                                         "def make():\n"
                                         "    return torch.nn.Linear(4, 3)\n")
    out = tmp_path / "graph"
    assert _export(f"{tmp_path / 'factory.py'}:make", "--input", "x=float32[3,4]",
                   "--dynamic", "x.0=batch:1:32", "--out", out)[0] == 0
    assert set(graph.load(out, device="cpu").symbols) == {"batch"}
    assert main(["plan", str(out), "--dim", "batch=8"]) == 0
    assert "symbols: {'batch': 8}" in capsys.readouterr().out


def test_exporter_names_a_derived_dims_symbol_after_its_root(tmp_path):
    from nbxtensor.export import export

    class Pairs(torch.nn.Module):
        def forward(self, pairs, values):
            return pairs.reshape(-1, 2).sum(1) + values

    n = torch.export.Dim("n", min=2, max=64)
    example = (torch.randn(6), torch.randn(3))
    model = graph.load(export(Pairs(), example, tmp_path / "graph", dynamic_shapes=({0: 2 * n}, {0: n})), device="cpu")
    assert set(model.symbols) == {"n"} and model.tensors["input::pairs"]["shape"] == ["2*n"]
    pairs, values = np.arange(8, dtype=np.float32), np.ones(4, dtype=np.float32)
    np.testing.assert_array_equal(model(pairs, values).numpy(), pairs.reshape(4, 2).sum(1) + values)


def test_unsupported_ops_are_listed_on_one_line(bert_dir, tmp_path, monkeypatch):
    lookup = registry.lookup
    lacking = ("aten::gelu.default", "aten::layer_norm.default")

    def lookup_without(name):
        if name in lacking:
            raise KeyError(name)
        return lookup(name)
    monkeypatch.setattr(registry, "lookup", lookup_without)
    code, _, err = _export(bert_dir, tmp_path / "graph", "--task", "feature-extraction")
    line = _one_line_refusal(code, err)
    assert "registry lacks 2 op(s)" in line and all(name in line for name in lacking)
    assert not (tmp_path / "graph" / "graph.json").exists()


@pytest.mark.parametrize("config_text, task, message", [
    (None, "causal-lm", "no config.json"),
    ("not json {", "causal-lm", "not a config transformers can read"),
    ('{"model_type": "no_such_model"}', "causal-lm", "model_type is missing or not one transformers"),
    ('{"model_type": "bert"}', "sparkle", "unknown task 'sparkle'; tasks: feature-extraction, causal-lm, seq2seq"),
    ('{"model_type": "bert"}', None, "a checkpoint needs --task"),
    ('{"model_type": "bert"}', "seq2seq", "has no seq2seq model (AutoModelForSeq2SeqLM) for model type 'bert'"),
    ('{"model_type": "bert"}', "feature-extraction", "could not load the feature-extraction model"),  # no weights
])
def test_bad_checkpoints_are_refused_on_one_line(tmp_path, config_text, task, message):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    if config_text is not None:
        (checkpoint / "config.json").write_text(config_text)
    code, _, err = _export(checkpoint, tmp_path / "graph", *(["--task", task] if task else []))
    assert message in _one_line_refusal(code, err)


def test_bad_command_lines_are_refused_on_one_line(bert_dir, tmp_path):
    cases = [((bert_dir, "--task", "feature-extraction"), "no output folder"),
             ((bert_dir, tmp_path / "a", "--out", tmp_path / "b", "--task", "causal-lm"), "two output folders"),
             ((bert_dir, tmp_path, "--task", "causal-lm", "--input", "x=float32[2]"), "takes no --input"),
             (("torch.nn:Identity", tmp_path, "--task", "causal-lm"), "go with a checkpoint directory"),
             (("torch.nn:Identity", tmp_path, "--input", "x=float32[2]", "--dynamic", "x.0=2batch"), "INPUT.AXIS=")]
    for argv, message in cases:
        code, _, err = _export(*argv)
        assert message in _one_line_refusal(code, err), argv


def test_without_transformers_the_refusal_names_it(bert_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers raises ImportError
    code, _, err = _export(bert_dir, tmp_path, "--task", "feature-extraction")
    assert "needs transformers" in _one_line_refusal(code, err)


def test_without_torch_the_refusal_names_it(bert_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delitem(sys.modules, "nbxtensor.export.command")
    code, _, err = _export(bert_dir, tmp_path, "--task", "feature-extraction")
    assert "needs PyTorch" in _one_line_refusal(code, err)


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "factory.py"
    path.write_text("import torch\n"
                    "def make():\n"
                    "    return torch.nn.Linear(4, 3)\n")
    return path


@pytest.mark.parametrize("argv, message", [
    (("--input", "x=float32[3,5]"), "RuntimeError: a and b must have same reduction dim"),  # Linear(4, 3)
    (("--input", "x=float32[3,4]", "--input", "y=float32[2]"), "TypeError: too many positional arguments"),
    (("--input", "x=float32[3,4]", "--dynamic", "x.0=batch:1:2"), "ConstraintViolationError: 3 not in range"),
])
def test_module_that_torch_export_cannot_trace_is_refused_on_one_line(factory_file, tmp_path, argv, message):
    logged = []
    handler = logging.Handler()
    handler.emit = logged.append
    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")  # logs a failed meta with its traceback
    fake_tensor_log.addHandler(handler)
    try:
        code, _, err = _export(f"{factory_file}:make", *argv, "--out", tmp_path / "graph")
    finally:
        fake_tensor_log.removeHandler(handler)
    line = _one_line_refusal(code, err)
    assert "torch.export could not trace the module on the example inputs" in line and message in line
    assert "check that each --input has the dtype and shape forward takes" in line
    assert not logged and logging.getLogger("torch").level != logging.CRITICAL  # held back, then restored


def test_module_refusals_name_the_missing_module_or_file(factory_file, tmp_path):
    cases = [(("no_such_package.models:make", "--input", "x=float32[3,4]"),
              "no module named 'no_such_package': install it or put it on PYTHONPATH"),
             ((f"{factory_file}:make", "--input", f"x={tmp_path / 'absent.npy'}"), "absent.npy': no file"),
             ((f"{factory_file}:unmade", "--input", "x=float32[3,4]"), "has no 'unmade'")]
    for argv, message in cases:
        code, _, err = _export(*argv, "--out", tmp_path / "graph")
        assert message in _one_line_refusal(code, err), argv


def test_module_with_ops_the_registry_lacks_is_refused_with_the_remedy(factory_file, tmp_path, monkeypatch):
    lookup = registry.lookup

    def lookup_without_linear(name):
        if name == "aten::linear.default":
            raise KeyError(name)
        return lookup(name)
    monkeypatch.setattr(registry, "lookup", lookup_without_linear)
    code, _, err = _export(f"{factory_file}:make", "--input", "x=float32[3,4]", "--out", tmp_path / "graph")
    line = _one_line_refusal(code, err)
    assert "registry lacks 1 op(s) this model needs: aten::linear.default (nodes linear)" in line
    assert "add these to the registry" in line
