"""The dtype objects, built from the one table in ``data/dtypes.yaml``."""
from __future__ import annotations

from importlib import resources

import ml_dtypes
import numpy as np
import yaml

__all__ = ["dtype", "get_dtype", "all_dtypes", "get_default_dtype", "set_default_dtype", "get_default_complex_dtype",
           "PromotionError"]


class PromotionError(TypeError, RuntimeError):
    """Two dtypes with no common type. A TypeError as Python expects, and a RuntimeError as torch
    raises for the same cases, so code written against either catches it."""


class dtype:
    """One element type. Instances are singletons: compare with ``is`` or ``==``."""

    __slots__ = ("name", "aliases", "itemsize", "kind", "numpy", "_triton_name", "safetensors",
                 "dlpack", "storage_only")

    def __init__(self, row: dict):
        self.name = row["name"]
        self.aliases = tuple(row.get("aliases", ()))
        self.itemsize = int(row["itemsize"])
        self.kind = row["kind"]
        self.numpy = _numpy_dtype(row["numpy"])
        self._triton_name = row["triton"]
        self.safetensors = row.get("safetensors")
        self.dlpack = tuple(row["dlpack"])
        self.storage_only = bool(row.get("storage_only", False))

    @property
    def is_floating_point(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float", "complex")

    @property
    def is_integral(self) -> bool:
        """Integer kinds, bool excluded (ATen's isIntegralType(t, includeBool=False))."""
        return self.kind in ("int", "uint")

    @property
    def bits(self) -> int:
        return self.itemsize * 8

    @property
    def triton(self):
        """The Triton element type a kernel sees through a pointer to this dtype."""
        import triton.language as tl
        return getattr(tl, self._triton_name)

    def to_real(self) -> "dtype":
        """The component type of a complex dtype; any other dtype is returned as is."""
        if self.is_complex:
            return _BY_NAME["float32" if self.itemsize == 8 else "float64"]
        return self

    def to_complex(self) -> "dtype":
        """The complex dtype with this dtype's components, as ATen's toComplexType: bfloat16 maps to
        complex64 (it has float32's range); float16 would need complex32, which nbxtensor lacks."""
        if self.is_complex:
            return self
        if self.name in ("float32", "bfloat16"):
            return _BY_NAME["complex64"]
        if self.name == "float64":
            return _BY_NAME["complex128"]
        if self.name == "float16":
            raise TypeError("the complex counterpart of float16 is complex32 (ComplexHalf), which nbxtensor does "
                            "not support; cast the float16 operand to float32 first")
        raise TypeError(f"there is no complex dtype with {self.name} components "
                        "(complex64 and complex128 are supported)")

    def __repr__(self) -> str:
        return f"nbxtensor.{self.name}"

    def __reduce__(self):
        return (get_dtype, (self.name,))


def _numpy_dtype(name: str) -> np.dtype:
    if hasattr(ml_dtypes, name) and not hasattr(np, name):
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def _load_table() -> list[dtype]:
    text = resources.files("nbxtensor").joinpath("data/dtypes.yaml").read_text()
    return [dtype(row) for row in yaml.safe_load(text)]


all_dtypes: tuple[dtype, ...] = tuple(_load_table())
_BY_NAME: dict[str, dtype] = {}
for _d in all_dtypes:
    for _n in (_d.name, *_d.aliases):
        _BY_NAME[_n] = _d
_BY_NUMPY: dict[np.dtype, dtype] = {d.numpy: d for d in all_dtypes}
_BY_SAFETENSORS: dict[str, dtype] = {d.safetensors: d for d in all_dtypes if d.safetensors}
_BY_DLPACK: dict[tuple[int, int], dtype] = {d.dlpack: d for d in all_dtypes}

_PREFIXES = ("torch.", "nbxtensor.", "nbx.", "numpy.", "np.")

# the dtype of a Python float (``set_default_dtype``); read directly by hot paths that key on it
_default_float = _BY_NAME["float32"]


def get_default_dtype() -> dtype:
    return _default_float


def set_default_dtype(d) -> None:
    global _default_float
    d = get_dtype(d)
    if d.name not in ("float32", "float64", "float16", "bfloat16"):
        raise TypeError(f"only floating-point types are supported as the default type, not {d.name}")
    _default_float = d


def get_default_complex_dtype() -> dtype:
    """The dtype of a Python complex: the complex counterpart of the default float dtype, as torch
    pairs them (bfloat16 gives complex64; float16 would give complex32, which nbxtensor lacks)."""
    try:
        return _default_float.to_complex()
    except TypeError as e:
        raise PromotionError(f"with {_default_float.name} as the default dtype: {e}") from None


def get_dtype(spec) -> dtype:
    """A dtype from a dtype, a name or alias (``"float16"``, ``"torch.float16"``, ``"half"``), a NumPy
    dtype or scalar type, a Python type (``float``, ``int``, ``bool``, ``complex``) or a torch dtype."""
    if isinstance(spec, dtype):
        return spec
    if spec is bool:
        return _BY_NAME["bool"]
    if spec is int:
        return _BY_NAME["int64"]
    if spec is float:
        return _default_float
    if spec is complex:
        return get_default_complex_dtype()
    if isinstance(spec, str):
        found = _BY_NAME.get(spec)  # a plain name or alias: the common case, no prefix to strip
        if found is not None:
            return found
        name = spec
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        found = _BY_NAME.get(name)
        if found is not None:
            return found
        raise TypeError(f"unknown dtype {spec!r}; valid names: {', '.join(d.name for d in all_dtypes)}")
    if type(spec).__module__ == "torch":
        return get_dtype(str(spec))
    try:
        npd = np.dtype(spec)
    except TypeError:
        raise TypeError(f"cannot interpret {spec!r} as a dtype; valid names: "
                        f"{', '.join(d.name for d in all_dtypes)}") from None
    found = _BY_NUMPY.get(npd.newbyteorder("=") if npd.byteorder == ">" else npd)
    if found is None:
        raise TypeError(f"NumPy dtype {npd} has no nbxtensor counterpart; valid: "
                        f"{', '.join(d.name for d in all_dtypes)}")
    return found


def from_safetensors_code(code: str) -> dtype:
    found = _BY_SAFETENSORS.get(code)
    if found is None:
        raise TypeError(f"unknown safetensors dtype {code!r}; known: {', '.join(sorted(_BY_SAFETENSORS))}")
    return found


def from_dlpack_code(code: int, bits: int, lanes: int = 1) -> dtype:
    found = _BY_DLPACK.get((code, bits))
    if found is None or lanes != 1:
        raise TypeError(f"unsupported DLPack dtype (code={code}, bits={bits}, lanes={lanes})")
    return found
