"""``nbxtensor.nn``: the functional layer API, as ``torch.nn``'s."""
from . import functional  # noqa: F401
