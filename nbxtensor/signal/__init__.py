"""``nbxtensor.signal``: torch.signal's namespace; its window functions are ``signal.windows``."""
from . import windows

__all__ = ["windows"]
