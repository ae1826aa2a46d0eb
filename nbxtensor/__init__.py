"""nbxtensor: a torch-free, inference-first tensor library whose kernels are written in Triton."""
from . import _runtime  # settles interpreted or compiled kernels before anything imports triton

_runtime.keep_triton_off_torch()
_runtime.lighten_nested_calls()
_runtime.drop_unasserted_overflow_checks()
from ._version import __version__
from .device import default_device, device, register_backend, set_default_device
from .device.host import HostBackend
from .dtypes import all_dtypes, dtype, get_dtype
from .promotion import (can_cast, get_default_complex_dtype, get_default_dtype, promote_types, result_type,
                        set_default_dtype)
from .memory import OutOfMemoryError
from .shape import broadcast_shapes, memory_format
from .shape import MEMORY_FORMATS as _MEMORY_FORMATS
from .tensor import Size, Tensor, is_complex, is_floating_point, is_tensor, numel
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)

register_backend(HostBackend())
if _runtime.KERNEL_MODE == _runtime.COMPILED:
    from .device.cuda import CudaBackend as _CudaBackend, install_triton_driver as _install_triton_driver

    _cuda_backend = _CudaBackend()
    register_backend(_cuda_backend)
    _install_triton_driver(_cuda_backend)

from .ops import registry as _registry  # noqa: E402  (ops register themselves on import)
from .ops import copy as _copy_ops, creation as _creation_ops, views as _view_ops  # noqa: E402,F401
from .ops import pointwise_table as _pointwise_ops  # noqa: E402,F401
from .ops import reductions as _reduction_ops, normalization as _normalization_ops  # noqa: E402,F401
from .ops import selection as _selection_ops, advanced_indexing as _advanced_indexing_ops  # noqa: E402,F401
from .ops import gather_scatter as _gather_scatter_ops  # noqa: E402,F401
from .ops import shape_ops as _shape_ops, sorting as _sorting_ops  # noqa: E402,F401
from .ops import attention as _attention_ops, convolution as _convolution_ops  # noqa: E402,F401
from .ops import pooling as _pooling_ops, resample as _resample_ops, sampling as _sampling_ops  # noqa: E402,F401
from .ops import fold as _fold_ops  # noqa: E402,F401
from .ops import quant as _quant_ops, matmul_prologue as _matmul_prologue_ops  # noqa: E402,F401
from .quant import QuantizedWeight  # noqa: E402
from .ops import nn_composites as _nn_composite_ops, losses as _loss_ops  # noqa: E402,F401
from .ops import shape_composites as _shape_composite_ops, statistics as _statistics_ops  # noqa: E402,F401
from .ops import breadth_composites as _breadth_composite_ops  # noqa: E402,F401
from .ops import linalg_lu as _linalg_lu_ops, linalg_composites as _linalg_composite_ops  # noqa: E402,F401
from .ops import linalg_decompositions as _linalg_decomposition_ops  # noqa: E402,F401
from .ops import tensor_more as _tensor_more_ops  # noqa: E402,F401
from .ops import margin_losses as _margin_loss_ops  # noqa: E402,F401
from .ops import nn_more as _nn_more_ops  # noqa: E402,F401
from .ops import mha as _mha_ops  # noqa: E402,F401
from .ops import moe as _moe_ops  # noqa: E402,F401
from .ops import fft as _fft_ops, stft as _stft_ops  # noqa: E402,F401
from .ops import ctc as _ctc_ops  # noqa: E402,F401
from .ops import special_polynomials as _special_polynomial_ops  # noqa: E402,F401
from .ops import special_table as _special_table_ops  # noqa: E402,F401
from .ops.comparison import allclose, equal  # noqa: E402
from .ops.creation import as_tensor, from_numpy, tensor  # noqa: E402
from .ops.matmul import backends, get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402  (and nbx.tuning)
from .ops.random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: E402,E501

_registry.bind(globals(), Tensor)
globals().update(_MEMORY_FORMATS)  # nbx.channels_last, nbx.contiguous_format, ...


def where(condition, input=None, other=None, **kwargs):
    """``where(condition, input, other)`` picks elements; ``where(condition)`` is ``nonzero(as_tuple=True)``."""
    if input is None and other is None and not kwargs:
        return _selection_ops.where_condition(condition)
    return _registry.get("where").impl(condition, input, other, **kwargs)


from .interop import from_dlpack  # noqa: E402

from . import cuda  # noqa: E402
from . import nn  # noqa: E402
from . import linalg  # noqa: E402
from . import special  # noqa: E402
from . import io  # noqa: E402  (safetensors load_file, save_file, safe_open)
from . import masked  # noqa: E402
from . import signal  # noqa: E402  (signal.windows)
from . import fft  # noqa: E402  (torch.fft's functions)

for _d in all_dtypes:
    globals()[_d.name] = _d
del _d
# torch's short names for dtypes; set last because they shadow builtins inside this module
half, double, cfloat, cdouble, long, short = float16, float64, complex64, complex128, int64, int16  # noqa: F821
float, int = float32, int32  # noqa: F821,A001
