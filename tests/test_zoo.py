"""A model zoo: tiny configs of real architectures, exported with dynamic batch and sequence dims, loaded
by nbxtensor.graph and run for two (batch, seq) shapes, compared with torch in float32 on the CPU.

Tolerance: atol and rtol 1e-4. Every model has 2 layers of hidden size 32; the deepest float32
reduction is a 64-wide dot product (the MLP's down projection) or a softmax over at most 9 positions,
each rounding at about 6e-8 relative, and nbxtensor sums in a different order than torch. Norms keep
activations near unit size (at most about 3 here), so the differences seen are about 1e-6; 1e-4 leaves
room for the exp/erf/tanh implementations without hiding a wrong op, which is off by far more."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from nbxtensor import graph  # noqa: E402
from nbxtensor.export import export  # noqa: E402

from .conftest import cpu_kernels, matches_module  # noqa: E402

pytestmark = cpu_kernels
TOLERANCE = 1e-4
VOCAB = 100
SHAPES = [(2, 7), (3, 5)]  # (batch, seq): both dims differ between the runs
COMMON = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=VOCAB,
              max_position_embeddings=64)
T5 = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=VOCAB)


def _model(config_class, model_class, **config):
    return lambda: getattr(transformers, model_class)(getattr(transformers, config_class)(**config))


ENCODER_ONLY_OR_DECODER_ONLY = {
    "bert": _model("BertConfig", "BertModel", **COMMON),
    "roberta": _model("RobertaConfig", "RobertaModel", **COMMON),
    "distilbert": _model("DistilBertConfig", "DistilBertModel", dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                vocab_size=VOCAB, max_position_embeddings=64),
    "gpt2": _model("GPT2Config", "GPT2Model", n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB,
                          n_positions=64, bos_token_id=1, eos_token_id=2),
    "gpt_neox": _model("GPTNeoXConfig", "GPTNeoXModel", **COMMON),
    "llama": _model("LlamaConfig", "LlamaModel", **COMMON),
    "llama_gqa": _model("LlamaConfig", "LlamaModel", **COMMON, num_key_value_heads=2),
    "mistral": _model("MistralConfig", "MistralModel", **COMMON, num_key_value_heads=2),
    "qwen2": _model("Qwen2Config", "Qwen2Model", **COMMON, num_key_value_heads=2),
    "phi3": _model("Phi3Config", "Phi3Model", **COMMON, num_key_value_heads=2, pad_token_id=0),
    "gemma": _model("GemmaConfig", "GemmaModel", **COMMON, num_key_value_heads=2, head_dim=8),
    "opt": _model("OPTConfig", "OPTModel", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         ffn_dim=64, vocab_size=VOCAB, max_position_embeddings=64, word_embed_proj_dim=32),
    "t5_encoder": _model("T5Config", "T5EncoderModel", **T5),
    "clip_text": _model("CLIPTextConfig", "CLIPTextModel", **COMMON, bos_token_id=1, eos_token_id=2),
    # q and k normed head by head on transposed views, the result viewed as torch's pointwise chain lays it out
    "gemma3": _model("Gemma3TextConfig", "Gemma3TextModel", **COMMON, num_key_value_heads=2, head_dim=8,
                     sliding_window=64),
    # experts through transformers' own grouped-product op (torch's takes no float32 operands on the CPU)
    "mixtral": _model("MixtralConfig", "MixtralModel", **COMMON, num_key_value_heads=2, num_local_experts=4,
                      num_experts_per_tok=2),
    # ALiBi biases sliced to Max(0, 1 - seq) positions: a shape expression with Max
    "mpt": _model("MptConfig", "MptModel", d_model=32, n_heads=4, n_layers=2, vocab_size=VOCAB, max_seq_len=64),
}
ENCODER_DECODER = {
    "t5": _model("T5Config", "T5Model", **T5),
    "bart": _model("BartConfig", "BartModel", d_model=32, encoder_layers=2, decoder_layers=2,
                          encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, vocab_size=VOCAB, max_position_embeddings=64),
}


class LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


class DecoderLastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids).last_hidden_state


class Recurrent(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(8, 16, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def _seeded(make):
    torch.manual_seed(0)
    return make().eval()


def _export_and_load(module, example, dynamic_shapes, out_dir):
    export(module, example, out_dir, dynamic_shapes=dynamic_shapes)
    return graph.load(out_dir)


def _ids(batch, seq):
    return torch.randint(0, VOCAB, (batch, seq))


@pytest.mark.parametrize("name", sorted(ENCODER_ONLY_OR_DECODER_ONLY))
def test_architecture(name, tmp_path):
    module = LastHidden(_seeded(ENCODER_ONLY_OR_DECODER_ONLY[name]))
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=32)
    model = _export_and_load(module, (_ids(2, 7),), ({0: batch, 1: seq},), tmp_path)
    for shape in SHAPES:
        matches_module(model, module, (_ids(*shape),), TOLERANCE)


@pytest.mark.parametrize("name", sorted(ENCODER_DECODER))
def test_encoder_decoder_forward(name, tmp_path):
    module = DecoderLastHidden(_seeded(ENCODER_DECODER[name]))
    # torch.export refuses a minimum below 3 for BART's sequence dims
    batch = torch.export.Dim("batch", min=1, max=8)
    source, target = torch.export.Dim("source", min=3, max=32), torch.export.Dim("target", min=3, max=32)
    model = _export_and_load(module, (_ids(2, 7), _ids(2, 4)), ({0: batch, 1: source}, {0: batch, 1: target}),
                             tmp_path)
    for batch_size, seq in SHAPES:
        matches_module(model, module, (_ids(batch_size, seq), _ids(batch_size, seq - 2)), TOLERANCE)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent(kind, tmp_path):
    """torch.export unrolls nn.LSTM and nn.GRU over time into matmuls, sigmoids and tanhs, specialising the
    sequence length, so only the batch is dynamic."""
    module = _seeded(lambda: Recurrent(kind))
    batch = torch.export.Dim("batch", min=1, max=8)
    model = _export_and_load(module, (torch.randn(2, 5, 8),), ({0: batch},), tmp_path)
    for batch_size in (2, 3):
        matches_module(model, module, (torch.randn(batch_size, 5, 8),), TOLERANCE)


# fusions of 2 layers: rotary of q and k, the gated MLP, and grouped-query attention where keys are shared
FUSED = {"llama": {"rotate_half_embedding": 4, "act_and_mul": 2},
         **{name: {"rotate_half_embedding": 4, "act_and_mul": 2, "grouped_attention": 2}
            for name in ("llama_gqa", "mistral", "qwen2")}}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_graph_is_as_close_to_float32_as_the_unfused(name, dtype, tmp_path):
    """The graph as ``graph.load`` fuses it (RMSNorm, residual add and norm, rotary, the gated MLP, grouped
    attention) against the graph as exported, both against torch in float32 on the same
    (bfloat16-representable) weights, side by side with torch run in ``dtype``: the fused graph is at least
    as close (it rounds less), and far fewer steps. The slack, 2% of the unfused error, covers sums taken
    in another order."""
    reference = _seeded(ENCODER_ONLY_OR_DECODER_ONLY[name])
    reference.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in reference.state_dict().items()})
    module = LastHidden(reference if dtype == "float32" else _seeded(ENCODER_ONLY_OR_DECODER_ONLY[name]).to(
        torch.bfloat16))
    if dtype == "bfloat16":
        module.model.load_state_dict({k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()})
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=32)
    export(module, (_ids(2, 7),), tmp_path, dynamic_shapes=({0: batch, 1: seq},))
    fused, unfused = graph.load(tmp_path), graph.load(tmp_path, fuse=False)
    assert fused.fusions == {"rms_norm": 5, "add_rms_norm": 4, **FUSED[name]}
    assert len(fused.steps) <= len(unfused.steps) - 40 - 8 * FUSED[name].get("grouped_attention", 0)
    ids = _ids(2, 7)
    with torch.no_grad():
        want = LastHidden(reference)(ids).double().numpy()
        theirs = module(ids).double().numpy()

    def error(got):
        return float(np.abs(got.float().numpy().astype(np.float64) - want).max())
    fused_error, unfused_error = error(fused(ids.numpy())), error(unfused(ids.numpy()))
    assert fused_error <= unfused_error * 1.02 + 1e-6, (fused_error, unfused_error, np.abs(theirs - want).max())
