"""Exchange with other array libraries (``Tensor.__dlpack__`` and ``__dlpack_device__`` are
``dlpack.tensor_dlpack`` and ``dlpack.tensor_dlpack_device``, attached with the ops' methods)."""
from .dlpack import from_dlpack, to_dlpack

__all__ = ["from_dlpack", "to_dlpack"]
