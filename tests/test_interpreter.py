"""Triton's interpreter as nbxtensor runs it on the CPU (``_runtime.lighten_nested_calls``,
``_runtime.drop_unasserted_overflow_checks``)."""
import numpy as np

import nbxtensor as nbx
from tests.conftest import cpu_kernels


@cpu_kernels
def test_nested_jit_calls_patch_the_language_once_a_run(monkeypatch):
    """Triton's interpreter re-patched ``triton.language`` on every call of a nested ``@triton.jit``
    helper; a run now patches each language module once. A softmax over four rows calls its helpers
    many times a program (one patch each before), and gives the same values."""
    from triton.runtime import interpreter
    patches = []
    real = interpreter._patch_lang

    def counting(fn):
        patches.append(fn.__name__)
        return real(fn)
    monkeypatch.setattr(interpreter, "_patch_lang", counting)
    x = np.random.default_rng(0).standard_normal((4, 300)).astype(np.float32)
    out = nbx.softmax(nbx.tensor(x, device="cpu"), -1).numpy()
    shifted = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(out, shifted / shifted.sum(-1, keepdims=True), rtol=1e-6, atol=1e-7)
    # the run's own patch, and at most one more for a module only a helper's globals hold
    assert 1 <= len(patches) <= 2, patches


@cpu_kernels
def test_interpreted_kernels_raise_no_numpy_warnings():
    """The interpreter computes with NumPy, which warns where IEEE arithmetic gives inf or NaN (a softmax's
    padding lanes meet -inf - -inf, a division by zero gives inf); a GPU does not, and neither does the
    CPU device."""
    import warnings
    x = nbx.tensor(np.random.default_rng(1).standard_normal((3, 300)).astype(np.float32), device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbx.softmax(x, -1).numpy()
        assert np.isinf((x / 0.0).numpy()).all()


@cpu_kernels
def test_integer_arithmetic_skips_the_overflow_checks_nothing_asserts(monkeypatch):
    """With the interpreter's debug off, ``device_assert`` does nothing, so the int64 shadow of every
    32-bit ``+``, ``-`` and ``*`` that Triton computes for it is never looked at: none is computed. Index
    arithmetic that wraps 32 bits still gives what it did (the kernels' own bounds are their business)."""
    from triton.language import semantic
    from triton.runtime import interpreter
    assert not interpreter.interpreter_builder.options.debug
    asserts = []
    real = semantic.TritonSemantic.device_assert

    def counting(self, cond, msg, mask):
        asserts.append(msg)
        return real(self, cond, msg, mask)
    monkeypatch.setattr(semantic.TritonSemantic, "device_assert", counting)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = (nbx.tensor(x, device="cpu").T * 2.0 + 1.0).numpy()
    np.testing.assert_array_equal(out, x.T * 2 + 1)
    ints = nbx.tensor(np.array([2 ** 31 - 1, 7], np.int32), device="cpu")
    np.testing.assert_array_equal((ints + 1).numpy(), np.array([-2 ** 31, 8], np.int32))
    assert not [msg for msg in asserts if "overflow detected" in msg]
