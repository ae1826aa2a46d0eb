"""Reading and writing tensors in files."""
from .safetensors import (SafetensorsError, TensorInfo, TensorSlice, load, load_file, safe_open, save,
                          save_file)

__all__ = ["SafetensorsError", "TensorInfo", "TensorSlice", "load", "load_file", "safe_open", "save", "save_file"]
