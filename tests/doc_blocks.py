"""The fenced code blocks of README.md and docs/*.md, for the tests that run them.

A block the tests cannot run (one that needs a GPU, say) is marked by the line just before its fence:
``<!-- not run by the tests: REASON -->``. It is listed, with its reason, and skipped."""
import json
import pathlib
import re
import shlex
from dataclasses import dataclass

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP_MARKER = re.compile(r"<!--\s*not run by the tests:\s*(.+?)\s*-->")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    language: str
    text: str
    skip_reason: str | None

    def __str__(self):
        return f"{self.document}:{self.line} ({self.language})"


def blocks_of(text: str, document: str) -> list[Block]:
    found = []
    for match in _FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = SKIP_MARKER.fullmatch(before.strip())
        found.append(Block(document, text.count("\n", 0, match.start()) + 1, match.group(1), match.group(2),
                           marker.group(1) if marker else None))
    return found


def all_blocks(language: str) -> list[Block]:
    return [block for path in DOCUMENTS for block in blocks_of(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
            if block.language == language]


def nbx_commands(shell: str) -> list[list[str]]:
    """The arguments of every ``nbx`` command in a shell block (after ``&&``, ``;`` or ``|``, and after
    environment assignments), comments dropped."""
    commands = []
    for line in shell.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        command: list[str] = []
        for word in words + ["&&"]:
            if word in ("&&", ";", "|", "||"):
                while command and re.fullmatch(r"\w+=.*", command[0]):
                    command.pop(0)
                if command and command[0] == "nbx":
                    commands.append(command[1:])
                command = []
            else:
                command.append(word)
    return commands


def write_graph_example(document: dict, directory: pathlib.Path, seed: int = 0) -> dict[str, np.ndarray]:
    """Write ``document`` as ``directory/graph.json`` with a ``model.safetensors`` of random weights for
    the tensors it reads from weights; returns those weights by key."""
    import nbxtensor as nbx
    from nbxtensor.io.safetensors import save_file

    rng = np.random.default_rng(seed)
    weights = {entry["weight"]: rng.standard_normal(entry["shape"]).astype(nbx.get_dtype(entry["dtype"]).numpy)
               for entry in document["tensors"].values() if "weight" in entry}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "graph.json").write_text(json.dumps(document))
    save_file({key: nbx.from_numpy(array) for key, array in weights.items()}, directory / "model.safetensors")
    return weights


def graph_format_example() -> dict:
    """The graph document docs/graph-format.md shows."""
    (block,) = [block for block in all_blocks("json") if block.document == "docs/graph-format.md"]
    return json.loads(block.text)
