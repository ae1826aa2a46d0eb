"""``nbxtensor.nn.functional``: torch.nn.functional's names for the ops nbxtensor has.

Every name here is an op's ``functional=`` declaration in the registry; each takes torch's arguments,
``inplace=`` included where torch has it, and ``<name>_`` is the in-place form. The attention ops,
``act_and_mul`` and the fused norms are nbx extras.
"""
from ..ops.registry import bind_functional as _bind_functional

__all__ = _bind_functional(globals())
