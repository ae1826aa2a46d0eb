"""Exchange with other array libraries. Importing this package gives ``Tensor`` its DLPack methods."""
from .dlpack import from_dlpack, to_dlpack

__all__ = ["from_dlpack", "to_dlpack"]
