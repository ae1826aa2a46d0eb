"""Sorting kernels: one program sorts one segment of a row in registers.

Values become order-preserving unsigned keys (floats by their bits with the sign folded, NaN
largest, -0.0 equal to 0.0; signed integers with the sign bit flipped; descending by inverting),
packed above a validity bit and the lane number, so ``tl.sort`` of the packed words is a stable
sort that puts padding lanes after every real element. 64-bit keys take two stable passes (low
half, then high half).
"""
import triton
import triton.language as tl

from .copy import _decode

KEY_FLOAT = 0  # any float of at most 32 bits, read through FORMAT
KEY_SIGNED = 1  # signed integers of at most 32 bits
KEY_UNSIGNED = 2  # unsigned integers and bool
KEY_FLOAT64 = 3
KEY_INT64 = 4


@triton.jit
def _key_parts(v, KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr):
    """(high, low) uint32 halves of the order-preserving key of ``v`` (low is 0 for 32-bit kinds)."""
    if KIND == 0:
        f = _decode(v, FORMAT).to(tl.float32) + 0.0
        bits = f.to(tl.uint32, bitcast=True)
        key = tl.where((bits >> 31) != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)
        high = tl.where(f != f, 0xFFFFFFFF, key).to(tl.uint32)
        low = high * 0
    elif KIND == 1:
        high = v.to(tl.int32).to(tl.uint32, bitcast=True) ^ 0x80000000
        low = high * 0
    elif KIND == 2:
        high = v.to(tl.uint32)
        low = high * 0
    elif KIND == 3:
        f = v + 0.0
        bits = f.to(tl.uint64, bitcast=True)
        key = tl.where((bits >> 63) != 0, bits ^ 0xFFFFFFFFFFFFFFFF, bits | 0x8000000000000000)
        key = tl.where(f != f, 0xFFFFFFFFFFFFFFFF, key).to(tl.uint64)
        high = (key >> 32).to(tl.uint32)
        low = (key & 0xFFFFFFFF).to(tl.uint32)
    else:
        key = v.to(tl.uint64, bitcast=True) ^ 0x8000000000000000
        high = (key >> 32).to(tl.uint32)
        low = (key & 0xFFFFFFFF).to(tl.uint32)
    if DESCENDING:
        high = high ^ 0xFFFFFFFF
        low = low ^ 0xFFFFFFFF
    return high, low


@triton.jit
def _stable_order(key, valid, lane):
    """The lanes in the stable ascending order of ``key``, invalid lanes last."""
    key = tl.where(valid, key, tl.full(key.shape, 0xFFFFFFFF, tl.uint32))
    packed = (key.to(tl.uint64) << 32) | ((valid == 0).to(tl.uint64) << 31) | lane.to(tl.uint64)
    packed = tl.sort(packed)
    return (packed & 0x7FFFFFFF).to(tl.int32)


@triton.jit
def sort_segments(src, perm_in, index_out, values_out, src_row_len, m, out_row_len,
                  SEGMENT: tl.constexpr, LENGTH: tl.constexpr, K_OUT: tl.constexpr, HAS_PERM: tl.constexpr,
                  KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr, WRITE_VALUES: tl.constexpr,
                  INDEX_64: tl.constexpr):
    """Program (row, seg) sorts entries seg*SEGMENT .. of the row's list of ``m`` candidates (the
    row's positions 0..m-1, or ``perm_in``'s entries, -1 meaning none) by the values of ``src`` at
    those positions, and writes the first K_OUT positions (-1 past the end) to ``index_out`` at
    seg*K_OUT of the row, and their values to ``values_out`` when WRITE_VALUES."""
    row = tl.program_id(0)
    seg = tl.program_id(1)
    if INDEX_64:
        row = row.to(tl.int64)
    lane = tl.arange(0, LENGTH)
    local = seg * SEGMENT + lane
    valid = (lane < SEGMENT) & (local < m)
    if HAS_PERM:
        pos = tl.load(perm_in + row * m + local, mask=valid, other=-1)
        valid = valid & (pos >= 0)
    else:
        pos = local.to(tl.int64)
    pos = tl.where(valid, pos, 0)
    src_row = src + row * src_row_len
    high, low = _key_parts(tl.load(src_row + pos, mask=valid), KIND, FORMAT, DESCENDING)
    if KIND >= 3:
        first = _stable_order(low, valid, lane)
        pos_first = tl.gather(pos, first, 0)
        valid_first = tl.gather(valid.to(tl.int32), first, 0) != 0
        high_first, _ = _key_parts(tl.load(src_row + pos_first, mask=valid_first), KIND, FORMAT, DESCENDING)
        second = _stable_order(high_first, valid_first, lane)
        order = tl.gather(first, second, 0)
    else:
        order = _stable_order(high, valid, lane)
    chosen = tl.gather(pos, order, 0)
    chosen_valid = tl.gather(valid.to(tl.int32), order, 0) != 0
    keep = lane < K_OUT
    out_at = row * out_row_len + seg * K_OUT + lane
    tl.store(index_out + out_at, tl.where(chosen_valid, chosen, -1).to(tl.int64), mask=keep)
    if WRITE_VALUES:
        tl.store(values_out + out_at, tl.load(src_row + chosen, mask=keep & chosen_valid), mask=keep)


@triton.jit
def search_sorted(sorted_seq, values, out, n_values, seq_len, values_per_row, seq_row_stride,
                  KIND: tl.constexpr, FORMAT: tl.constexpr, RIGHT: tl.constexpr, STEPS: tl.constexpr,
                  INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """For each value, the insertion point in its row of the ascending ``sorted_seq``: the first
    position whose element is >= the value (> with RIGHT), by binary search over the keys."""
    pid = tl.program_id(0)
    if INDEX_64:
        idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        idx = pid * BLOCK + tl.arange(0, BLOCK)
    valid = idx < n_values
    row = idx // values_per_row
    base = sorted_seq + row * seq_row_stride
    v_high, v_low = _key_parts(tl.load(values + idx, mask=valid), KIND, FORMAT, False)
    lo = idx * 0
    hi = idx * 0 + seq_len
    for _ in tl.static_range(STEPS):
        active = lo < hi
        mid = (lo + hi) // 2
        e_high, e_low = _key_parts(tl.load(base + mid, mask=valid & active), KIND, FORMAT, False)
        if RIGHT:
            go_right = (e_high < v_high) | ((e_high == v_high) & (e_low <= v_low))
        else:
            go_right = (e_high < v_high) | ((e_high == v_high) & (e_low < v_low))
        lo = tl.where(active & go_right, mid + 1, lo)
        hi = tl.where(active & (go_right == 0), mid, hi)
    tl.store(out + idx, lo.to(tl.int64), mask=valid)
