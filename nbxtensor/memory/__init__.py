"""Device memory: the caching allocator and its out-of-memory error."""
from .caching import CachingAllocator, OutOfMemoryError, RawOutOfMemory, parse_bytes

__all__ = ["CachingAllocator", "OutOfMemoryError", "RawOutOfMemory", "parse_bytes"]
