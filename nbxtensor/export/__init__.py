"""Writing graph directories from PyTorch modules (needs torch; used once, offline). The runtime
that loads and runs them, ``nbxtensor.graph``, never imports torch."""
from __future__ import annotations


class ExportError(ValueError):
    """A module that cannot be written as an nbxtensor graph; the message says which ops or values."""


def first_line(error: BaseException) -> str:
    """The error's type and the first non-empty line of its message (torch's and transformers' go on with
    advice and dumps), at most 300 characters."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0].rstrip('.')}" if lines else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class TraceError(ExportError):
    """torch.export could not trace the module on the example inputs (a shape or dtype ``forward`` does not
    take, too many or too few inputs, a dynamic dimension's bounds that exclude the example, control flow
    on tensor values). ``reason`` is the first line of torch's message; the error it raised is the cause."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"torch.export could not trace the module on the example inputs: {reason}")


class CommandError(ValueError):
    """A command line or checkpoint directory that ``nbx export`` cannot act on; the CLI prints it as one
    line."""


def export(module, example_args, out_dir, dynamic_shapes=None, **options) -> str:
    """Export ``module`` called on ``example_args`` into ``out_dir`` (``graph.json`` and
    ``model.safetensors``) and return ``out_dir``. ``dynamic_shapes`` is passed to ``torch.export.export``."""
    from .exporter import export as _export  # torch is imported only here

    return _export(module, example_args, out_dir, dynamic_shapes=dynamic_shapes, **options)


__all__ = ["CommandError", "ExportError", "TraceError", "export"]
