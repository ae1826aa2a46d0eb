"""torch's gradient-mode switches, for inference code written against torch: nbxtensor never records
operations for gradients, so ``no_grad`` and ``inference_mode`` hold always and cost nothing, and
anything asking for gradients is refused by name."""
from __future__ import annotations

import functools

__all__ = ["no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
           "is_inference_mode_enabled", "refuse_gradients", "refuse_requires_grad"]


def refuse_gradients(what: str) -> None:
    """The one refusal of anything that asks for gradients; a NotImplementedError, so a RuntimeError too."""
    raise NotImplementedError(f"{what}: gradients are not computed by nbxtensor, an inference library")


def refuse_requires_grad(requires_grad, where: str) -> None:
    """Refuse ``requires_grad=True`` given to ``where``; False (the default) passes."""
    if requires_grad:
        refuse_gradients(f"{where}(requires_grad=True)")


class _GradMode:
    """A context manager that is also a decorator, as torch's grad-mode classes are; entering it
    changes nothing, since the mode it names is the only one there is."""

    def __enter__(self):
        return None

    def __exit__(self, *exc_info) -> bool:
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class _BareDecoratorForm(type):
    """Lets ``@no_grad`` stand without parentheses, as torch allows: calling the class on a function
    decorates it."""

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], bool):
            return super().__call__()(args[0])
        return super().__call__(*args, **kwargs)


class no_grad(_GradMode, metaclass=_BareDecoratorForm):
    """``with nbx.no_grad():``, ``@nbx.no_grad()`` or ``@nbx.no_grad``: gradients are never computed."""


class inference_mode(_GradMode, metaclass=_BareDecoratorForm):
    """``with nbx.inference_mode():`` or as a decorator; ``mode=False`` would ask for autograd, which
    nbxtensor does not have."""

    def __init__(self, mode: bool = True):
        if not mode:
            refuse_gradients("inference_mode(False)")

    def clone(self):
        return inference_mode(True)


class enable_grad(_GradMode, metaclass=_BareDecoratorForm):
    """Refused on entry: nbxtensor computes no gradients."""

    def __enter__(self):
        refuse_gradients("enable_grad")


class set_grad_enabled(_GradMode):
    """``set_grad_enabled(False)`` as a call, a context manager or a decorator; True is refused."""

    def __init__(self, mode: bool):
        if mode:
            refuse_gradients("set_grad_enabled(True)")


def is_grad_enabled() -> bool:
    return False


def is_inference_mode_enabled() -> bool:
    return True
