"""The codes the pointwise kernels and their callers share, as ``tl.constexpr`` globals (a kernel compares
its constexprs with them by name; the host passes their ``.value``): how each operand reaches the kernel,
and the compute category a body branches on."""
import triton.language as tl

# how an operand reaches the skeleton
OPERAND_ABSENT = tl.constexpr(0)
OPERAND_TENSOR = tl.constexpr(1)
OPERAND_SCALAR = tl.constexpr(2)  # passed by its bits as a kernel argument
OPERAND_COMPLEX_TENSOR = tl.constexpr(3)  # complex kernel only: a (re, im) pair per element

# the compute category: what a body's arithmetic is; bodies rely on the order (bool and integers below
# CAT_FLOAT32, floats from it)
CAT_BOOL = tl.constexpr(0)
CAT_INT = tl.constexpr(1)
CAT_UINT = tl.constexpr(2)
CAT_FLOAT32 = tl.constexpr(3)
CAT_FLOAT64 = tl.constexpr(4)
