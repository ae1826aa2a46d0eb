"""Counter-based random streams: Philox 4x32-10 keyed by the generator's seed.

Counter ``c`` yields four 32-bit words. A launch starts at counter ``counter_base`` (the generator's
offset / 4) and program lanes take consecutive counters, so element ``i`` of a draw depends only on
(seed, offset, i): never on the grid, the block size or the order of launches. Each counter fills
PER_COUNTER consecutive elements: 4 when an element needs one word, 2 when it needs two (float64
uniforms and normals, integer ranges of 2^32 or more).
"""
import triton
import triton.language as tl

from .formats import decode, encode

# MODE: what a draw computes (the host passes the ``.value``)
MODE_UNIFORM = tl.constexpr(0)  # a + (b - a) * u
MODE_NORMAL = tl.constexpr(1)  # a + b * z
MODE_RANDINT = tl.constexpr(2)  # int_low + word % int_range
MODE_BERNOULLI = tl.constexpr(3)  # u < a
MODE_BERNOULLI_TENSOR = tl.constexpr(4)  # u < p[i]
MODE_EXPONENTIAL = tl.constexpr(5)  # -log(1 - u) / a
MODE_DROPOUT = tl.constexpr(6)  # x[i] * b where u >= a, else 0

_TWO_PI = tl.constexpr(6.283185307179586)


@triton.jit
def _uniform(word, DIGITS: tl.constexpr):
    """A float32 in [0, 1) with DIGITS significant bits, so the value is exact in the output type
    (24 for float32, 11 for float16, 8 for bfloat16) and rounding can never reach 1."""
    return (word >> (32 - DIGITS)).to(tl.float32) * (1.0 / (1 << DIGITS))


@triton.jit
def _uniform64(high, low):
    """A float64 in [0, 1) with 53 significant bits from two words."""
    mantissa = ((high >> 5).to(tl.uint64) << 26) | (low >> 6).to(tl.uint64)
    return mantissa.to(tl.float64) * (1.0 / 9007199254740992.0)


@triton.jit
def _box_muller(u_radius, u_angle):
    """Two independent standard normals from two uniforms in [0, 1); the radius uses 1 - u in (0, 1]."""
    radius = tl.sqrt(-2.0 * tl.log(1.0 - u_radius))
    angle = u_angle * _TWO_PI
    return radius * tl.cos(angle), radius * tl.sin(angle)


@triton.jit
def _slot_uniform(r0, r1, r2, r3, SLOT: tl.constexpr, PER_COUNTER: tl.constexpr, DIGITS: tl.constexpr):
    """The uniform of element SLOT of a counter: one word each (4 per counter) or two (float64)."""
    if PER_COUNTER == 2:
        if SLOT == 0:
            return _uniform64(r0, r1)
        else:
            return _uniform64(r2, r3)
    else:
        if SLOT == 0:
            return _uniform(r0, DIGITS)
        elif SLOT == 1:
            return _uniform(r1, DIGITS)
        elif SLOT == 2:
            return _uniform(r2, DIGITS)
        else:
            return _uniform(r3, DIGITS)


@triton.jit
def _slot_normal(r0, r1, r2, r3, SLOT: tl.constexpr, PER_COUNTER: tl.constexpr):
    """Normals: the four words make two Box-Muller pairs in float32 (four normals), or two float64
    uniforms and so one pair (two normals)."""
    if PER_COUNTER == 2:
        z0, z1 = _box_muller(_uniform64(r0, r1), _uniform64(r2, r3))
        if SLOT == 0:
            return z0
        else:
            return z1
    else:
        if SLOT < 2:
            z0, z1 = _box_muller(_uniform(r0, 24), _uniform(r1, 24))
        else:
            z0, z1 = _box_muller(_uniform(r2, 24), _uniform(r3, 24))
        if SLOT % 2 == 0:
            return z0
        else:
            return z1


@triton.jit
def _slot_word(r0, r1, r2, r3, SLOT: tl.constexpr, PER_COUNTER: tl.constexpr):
    """The random integer of element SLOT as uint64: one word, or two words for wide ranges."""
    if PER_COUNTER == 2:
        if SLOT == 0:
            return (r0.to(tl.uint64) << 32) | r1.to(tl.uint64)
        else:
            return (r2.to(tl.uint64) << 32) | r3.to(tl.uint64)
    else:
        if SLOT == 0:
            return r0.to(tl.uint64)
        elif SLOT == 1:
            return r1.to(tl.uint64)
        elif SLOT == 2:
            return r2.to(tl.uint64)
        else:
            return r3.to(tl.uint64)


@triton.jit
def random_fill(out, src, n, seed, counter_base, a_bits, b_bits, int_low, int_range,
                MODE: tl.constexpr, PER_COUNTER: tl.constexpr, DIGITS: tl.constexpr, COMPUTE: tl.constexpr,
                SRC_FORMAT: tl.constexpr, OUT_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                FLOAT_TO_INT: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Fill the ``n`` contiguous elements of ``out`` with draws of MODE; ``src`` is the probability
    tensor (MODE_BERNOULLI_TENSOR) or the input (MODE_DROPOUT), contiguous like ``out``. The float
    parameters a and b arrive as the bits of float64 values."""
    pid = tl.program_id(0)
    if INDEX_64:
        group = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        group = pid * BLOCK + tl.arange(0, BLOCK)
    counter = group.to(tl.int64) + counter_base
    r0, r1, r2, r3 = tl.randint4x(seed, counter)
    zero64 = tl.full([BLOCK], 0, tl.int64)
    a = (zero64 + a_bits).to(tl.float64, bitcast=True).to(COMPUTE)
    b = (zero64 + b_bits).to(tl.float64, bitcast=True).to(COMPUTE)
    for slot in tl.static_range(PER_COUNTER):
        idx = group * PER_COUNTER + slot
        mask = idx < n
        if MODE == MODE_NORMAL:
            value = a + b * _slot_normal(r0, r1, r2, r3, slot, PER_COUNTER).to(COMPUTE)
        elif MODE == MODE_RANDINT:
            word = _slot_word(r0, r1, r2, r3, slot, PER_COUNTER)
            value = (word % (zero64 + int_range).to(tl.uint64)).to(tl.int64) + int_low
        else:
            u = _slot_uniform(r0, r1, r2, r3, slot, PER_COUNTER, DIGITS).to(COMPUTE)
            if MODE == MODE_UNIFORM:
                value = a + (b - a) * u
                value = tl.where(value >= b, a, value)  # keep the interval half-open, as ATen does
            elif MODE == MODE_BERNOULLI:
                value = (u < a).to(COMPUTE)
            elif MODE == MODE_BERNOULLI_TENSOR:
                p = decode(tl.load(src + idx, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
                value = (u < p).to(COMPUTE)
            elif MODE == MODE_EXPONENTIAL:
                value = -tl.log(1.0 - u) / a
            else:  # MODE_DROPOUT
                x = decode(tl.load(src + idx, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
                value = tl.where(u >= a, x * b, 0.0)
        tl.store(out + idx, encode(value, out.dtype.element_ty, OUT_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)
