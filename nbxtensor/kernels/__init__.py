"""Pure Triton kernels, grouped by family. Nothing here allocates or checks arguments: the op
implementations in ``nbxtensor.ops`` do that and launch these through ``nbxtensor.launch``."""
