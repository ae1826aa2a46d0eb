"""Writing graph directories from PyTorch modules (needs torch; used once, offline). The runtime
that loads and runs them, ``nbxtensor.graph``, never imports torch."""
from __future__ import annotations


class ExportError(ValueError):
    """A module that cannot be written as an nbxtensor graph; the message says which ops or values."""


class CommandError(ValueError):
    """A command line or checkpoint directory that ``nbx export`` cannot act on; the CLI prints it as one
    line."""


def export(module, example_args, out_dir, dynamic_shapes=None, **options) -> str:
    """Export ``module`` called on ``example_args`` into ``out_dir`` (``graph.json`` and
    ``model.safetensors``) and return ``out_dir``. ``dynamic_shapes`` is passed to ``torch.export.export``."""
    from .exporter import export as _export  # torch is imported only here

    return _export(module, example_args, out_dir, dynamic_shapes=dynamic_shapes, **options)


__all__ = ["CommandError", "ExportError", "export"]
