"""The CTC loss's forward (alpha) recursion in log space, one program per sample.

The extended label sequence interleaves blanks with the sample's targets (blank, y1, blank, y2, ...,
blank); alpha_t(s) is the log-probability of every alignment of the first t + 1 frames that ends at
position s. Each program keeps alpha_t in registers and passes it to the next step through two rows of
scratch memory (written at t, read shifted by one and two positions at t + 1), which a barrier orders."""
import triton
import triton.language as tl

_NEG_INF = tl.constexpr(float("-inf"))
_INF = tl.constexpr(float("inf"))


@triton.jit
def _log_add(a, b, c):
    """log(exp(a) + exp(b) + exp(c)), -inf where all three are."""
    top = tl.maximum(tl.maximum(a, b), c)
    finite = top != _NEG_INF
    shift = tl.where(finite, top, 0.0)
    total = tl.exp(a - shift) + tl.exp(b - shift) + tl.exp(c - shift)
    return tl.where(finite, shift + tl.log(total), _NEG_INF)


@triton.jit
def ctc_alpha(log_probs, targets, target_starts, input_lengths, target_lengths, alpha, loss,
              lp_t, lp_n, lp_c, blank, BLOCK: tl.constexpr):
    """loss[n] = -log p(targets of n | log_probs[:, n, :]); +inf where no alignment exists. ``log_probs``
    is (T, N, C) with strides (lp_t, lp_n, lp_c); the targets of n are ``targets[target_starts[n]:]``,
    ``target_lengths[n]`` of them; ``alpha`` is (N, 2, BLOCK) scratch."""
    n = tl.program_id(0)
    frames = tl.load(input_lengths + n)
    count = tl.load(target_lengths + n)
    start = tl.load(target_starts + n)
    s = tl.arange(0, BLOCK)
    width = 2 * count + 1
    inside = s < width
    is_label = (s % 2) == 1
    position = (s - 1) // 2
    labels = tl.where(is_label, tl.load(targets + start + position, mask=inside & is_label, other=0), blank)
    # a label may follow the label two positions back directly (skipping the blank) unless they repeat
    before = tl.load(targets + start + position - 1, mask=inside & is_label & (s >= 3), other=-1)
    skips = is_label & (s >= 3) & (labels != before)
    base = log_probs + n * lp_n
    rows = alpha + n * 2 * BLOCK
    current = tl.load(base + labels * lp_c, mask=inside & (s < 2) & (frames > 0), other=_NEG_INF)
    tl.store(rows + s, current)
    t = 1
    while t < frames:
        tl.debug_barrier()
        previous = rows + ((t - 1) % 2) * BLOCK
        one_back = tl.load(previous + s - 1, mask=s >= 1, other=_NEG_INF)
        two_back = tl.load(previous + s - 2, mask=skips, other=_NEG_INF)
        emitted = tl.load(base + t * lp_t + labels * lp_c, mask=inside, other=_NEG_INF)
        current = tl.where(inside, _log_add(current, one_back, two_back) + emitted, _NEG_INF)
        tl.store(rows + (t % 2) * BLOCK + s, current)
        t += 1
    ends = tl.where((s == width - 1) | (s == width - 2), current, _NEG_INF)
    top = tl.max(ends, 0)
    finite = top != _NEG_INF
    shift = tl.where(finite, top, 0.0)
    likelihood = shift + tl.log(tl.sum(tl.exp(ends - shift), 0))
    result = tl.where(finite, -likelihood, _INF)
    result = tl.where(frames == 0, tl.where(count == 0, 0.0, _INF), result)
    tl.store(loss + n, result)
