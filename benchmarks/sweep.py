"""Performance on the shapes real models form, against torch on the same inputs, in the same run.

Cases are the product of two tables: the models (``sweep_models.yaml``: published config values, the dtype
each runs in, the prefill lengths and decode (batch, context) pairs swept) and the op forms below (``FORMS``:
which op each model forms in which phase, with which shape). Cases that form the same op, shapes and dtype
in several models are timed once and name every model and role that forms them.

Each case runs our call and torch's on the same memory (torch CUDA tensors shared with ours through
DLPack), checks our result against torch's within a tolerance set by the dtype and the reduction depth,
and times both in alternating batches (``timing.gpu_pair_ms``), every call after an L2 flush so that
operands come from device memory as a model step reads its weights. The floor of a case is the larger of
its bytes over the device's bandwidth and its FLOPs over its peak rate (``nbxtensor/device/facts``).

Prints per op family the geometric mean of torch/ours, the worst row and its shape and the count below
0.9x, then the whole sweep's geometric mean; then the host cost of small ops through operators, methods
and functions against torch's. Writes ``sweep.md`` (the full table) and ``sweep.json`` under $OUT.

    python benchmarks/sweep.py [--quick] [--family gemm,norm] [--model llama-3-8b] [--limit N]
                               [--seconds-per-case S] [--precompile WORKERS] [--list] [--cpu-smoke]

Before anything is timed, worker processes make every case's first call (compiling its kernels into
Triton's disk cache, tuning into a scratch store), so that the timed run loads kernels instead of
compiling them. A failing case prints its error and the sweep goes on; a case only torch fails is timed
alone and marked.
``NBX_SWEEP_BUDGET_S`` (seconds, default 510) bounds the run: cases are run families in turn, so a run
stopped by the budget still covers every family, and the tables are printed all the same. ``--cpu-smoke``
runs a few cases of models scaled down on the CPU device (kernels interpreted), timed by the host clock.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import yaml

HERE = Path(__file__).resolve().parent
MODEL_TABLE = HERE / "sweep_models.yaml"
DEFAULT_BUDGET_S = 510.0
DEFAULT_SECONDS_PER_CASE = 0.2
QUICK_SECONDS_PER_CASE = 0.15
QUICK_PER_FAMILY = 14
# a guess at what a case costs besides its timing budget (inputs, first call with tuning on a warm Triton
# cache, check): used for --list's estimate and to stop before the budget runs out
SETUP_ESTIMATE_S = 0.3
HOST_SECTION_S = 25.0
PRECOMPILE_WORKERS = 8
PRECOMPILE_SHARE = 0.4  # of the budget, at most, spent compiling ahead
HOST_HEADROOM_CYCLES = 100_000  # about 50 us at a GPU's clock: more than a call's host cost
BELOW = 0.9
SMOKE_FAMILIES = ("gemm", "norm", "attention_decode")
SMOKE_MODELS = ("llama-3-8b",)  # bfloat16 with grouped-query heads


# ---- the model table -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    kind: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    activation: str
    gated: bool
    norm: str
    eps: float
    bias: bool | str
    rotary: bool
    dtype: str
    vocab: int = 0
    max_positions: int = 0
    sequences: tuple = ()
    images: tuple = ()
    image: int = 0
    patch: int = 0
    channels: int = 0
    clips: tuple = ()
    mel_bins: int = 0
    frames: int = 0
    max_source_positions: int = 0
    tensor_parallel: int = 1
    scale_embeddings: bool = False


def load_table(path: Path = MODEL_TABLE) -> tuple[dict, list[Model]]:
    """(workloads, models) from the YAML table; a tensor-parallel model becomes one GPU's shard."""
    with open(path) as f:
        table = yaml.safe_load(f)
    fields = {f.name for f in dataclasses.fields(Model)}
    models = []
    for name, config in table["models"].items():
        values = {k: tuple(tuple(v) if isinstance(v, list) else v for v in value) if isinstance(value, list)
                  else value for k, value in config.items() if k in fields}
        models.append(shard(Model(name=name, **values)))
    return table["workloads"], models


def shard(model: Model) -> Model:
    """One GPU's part of a tensor-parallel model: heads, KV heads, intermediate size and vocabulary split."""
    tp = model.tensor_parallel
    if tp == 1:
        return model
    for what in ("heads", "kv_heads", "intermediate", "vocab"):
        if getattr(model, what) % tp:
            raise ValueError(f"{model.name}: {what} {getattr(model, what)} does not split over {tp} GPUs")
    return dataclasses.replace(model, heads=model.heads // tp, kv_heads=model.kv_heads // tp,
                               intermediate=model.intermediate // tp, vocab=model.vocab // tp)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One phase of a model's run: ``batch`` sequences of ``seq`` tokens; decode steps attend ``context``
    keys."""
    phase: str  # prefill | decode | decode_attention | encode
    batch: int
    seq: int
    context: int = 0

    @property
    def rows(self) -> int:
        return self.batch * self.seq

    def describe(self) -> str:
        if self.phase == "decode_attention":
            return f"decode B{self.batch} ctx{self.context}"
        if self.phase == "decode":
            return f"decode B{self.batch}"
        return f"{self.phase} {self.batch}x{self.seq}" if self.batch > 1 else f"{self.phase} {self.seq}"


def settings(model: Model, workloads: dict) -> list[Setting]:
    found = []
    if model.kind == "decoder":
        found += [Setting("prefill", 1, t) for t in workloads["prefill_tokens"] if t <= model.max_positions]
    if model.kind in ("decoder", "speech"):
        pairs = [(b, c) for b, c in workloads["decode"] if c <= model.max_positions]
        if model.kind == "speech":  # cross-attention over the encoder's states at every decode batch
            pairs += [(b, model.max_source_positions) for b in sorted({b for b, _ in workloads["decode"]})]
        found += [Setting("decode", b, 1) for b in sorted({b for b, _ in workloads["decode"]})]
        found += [Setting("decode_attention", b, 1, c) for b, c in pairs]
    if model.kind == "encoder":
        found += [Setting("encode", b, s) for b, s in model.sequences]
    if model.kind == "vision":
        found += [Setting("encode", n, (model.image // model.patch) ** 2 + 1) for n in model.images]
    if model.kind == "speech":
        found += [Setting("encode", n, model.max_source_positions) for n in model.clips]
    return found


# ---- the op forms: which op a model forms in which phase, with which parameters ----------------------------
TOKENS = frozenset({"prefill", "decode", "encode"})
ENCODE = frozenset({"encode"})
PREFILL_OR_ENCODE = frozenset({"prefill", "encode"})
DECODE = frozenset({"decode"})
HALF = ("float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class Form:
    role: str
    op: str
    phases: frozenset
    params: Callable  # (model, setting, workloads) -> dict of the op's parameters, or None: not formed
    # a row-wise op (cost linear in rows, nothing ragged but the row count) is swept at the workloads'
    # rowwise_prefill_tokens and rowwise_decode_batches only: other row counts show nothing new
    rowwise: bool = False


def _linear(n, k, bias=False):
    return lambda m, s, w: dict(m=s.rows, n=n(m), k=k(m), bias=bias(m) if callable(bias) else bias)


def _qkv_width(m):
    return (m.heads + 2 * m.kv_heads) * m.head_dim


def _has_lm_head(m):
    return m.vocab > 0 and m.kind in ("decoder", "speech")


def _when(condition, params):
    return lambda m, s, w: params(m, s, w) if condition(m, s) else None


FORMS = [
    # products: q, k and v joined into one product by output rows, as nbxtensor.llm loads them
    Form("qkv projection", "linear", TOKENS, _linear(_qkv_width, lambda m: m.hidden, lambda m: bool(m.bias))),
    Form("attention output", "linear", TOKENS,
         _linear(lambda m: m.hidden, lambda m: m.heads * m.head_dim, lambda m: m.bias is True)),
    Form("gate-up projection", "linear", TOKENS,
         _when(lambda m, s: m.gated, _linear(lambda m: 2 * m.intermediate, lambda m: m.hidden))),
    Form("up projection", "linear", TOKENS,
         _when(lambda m, s: not m.gated,
               _linear(lambda m: m.intermediate, lambda m: m.hidden, lambda m: m.bias is True))),
    Form("down projection", "linear", TOKENS,
         _linear(lambda m: m.hidden, lambda m: m.intermediate, lambda m: m.bias is True)),
    Form("lm head", "linear", DECODE,
         _when(lambda m, s: _has_lm_head(m), _linear(lambda m: m.vocab, lambda m: m.hidden))),
    # eager attention of encoders: scores and context as batched products of one matrix per head
    Form("attention scores (eager)", "bmm", ENCODE,
         lambda m, s, w: dict(batch=s.batch * m.heads, m=s.seq, n=s.seq, k=m.head_dim)),
    Form("attention context (eager)", "bmm", ENCODE,
         lambda m, s, w: dict(batch=s.batch * m.heads, m=s.seq, n=m.head_dim, k=s.seq)),
    Form("attention score softmax (eager)", "softmax", ENCODE,
         lambda m, s, w: dict(rows=s.batch * m.heads * s.seq, cols=s.seq)),
    # fused attention
    Form("attention prefill", "sdpa", PREFILL_OR_ENCODE,
         _when(lambda m, s: s.seq > 1, lambda m, s, w: dict(batch=s.batch, heads=m.heads, kv_heads=m.kv_heads,
                                                            seq=s.seq, head_dim=m.head_dim,
                                                            causal=s.phase == "prefill"))),
    Form("paged decode attention", "paged_attention", frozenset({"decode_attention"}),
         lambda m, s, w: dict(batch=s.batch, heads=m.heads, kv_heads=m.kv_heads, context=s.context,
                              head_dim=m.head_dim, block=w["kv_block_size"])),
    Form("rotary embedding (q)", "rotary", frozenset({"prefill", "decode"}),
         _when(lambda m, s: m.rotary, lambda m, s, w: dict(batch=s.batch, heads=m.heads, seq=s.seq,
                                                           head_dim=m.head_dim)), rowwise=True),
    # norms and pointwise
    Form("norm", "rms_norm", TOKENS, _when(lambda m, s: m.norm == "rms_norm",
                                           lambda m, s, w: dict(rows=s.rows, cols=m.hidden, eps=m.eps)), rowwise=True),
    Form("norm", "layer_norm", TOKENS, _when(lambda m, s: m.norm == "layer_norm",
                                             lambda m, s, w: dict(rows=s.rows, cols=m.hidden, eps=m.eps)),
         rowwise=True),
    Form("residual add", "add", TOKENS, lambda m, s, w: dict(rows=s.rows, cols=m.hidden), rowwise=True),
    Form("embedding scale (x * sqrt(hidden))", "scale", TOKENS,
         _when(lambda m, s: m.scale_embeddings, lambda m, s, w: dict(rows=s.rows, cols=m.hidden,
                                                                     factor=round(math.sqrt(m.hidden), 4))),
         rowwise=True),
    Form("gated activation", "act_and_mul", TOKENS,
         _when(lambda m, s: m.gated, lambda m, s, w: dict(rows=s.rows, cols=m.intermediate, act=m.activation)),
         rowwise=True),
    Form("activation", "activation", TOKENS,
         _when(lambda m, s: not m.gated, lambda m, s, w: dict(rows=s.rows, cols=m.intermediate, act=m.activation)),
         rowwise=True),
    Form("logits to float32", "cast", DECODE,
         _when(lambda m, s: _has_lm_head(m) and m.dtype in HALF, lambda m, s, w: dict(rows=s.rows, cols=m.vocab)),
         rowwise=True),
    # sampling over vocabulary rows
    Form("vocabulary softmax", "softmax", DECODE,
         _when(lambda m, s: _has_lm_head(m), lambda m, s, w: dict(rows=s.rows, cols=m.vocab)), rowwise=True),
    Form("greedy argmax", "argmax", DECODE,
         _when(lambda m, s: _has_lm_head(m), lambda m, s, w: dict(rows=s.rows, cols=m.vocab)), rowwise=True),
    Form("top-k", "topk", DECODE,
         _when(lambda m, s: _has_lm_head(m), lambda m, s, w: dict(rows=s.rows, cols=m.vocab, k=w["top_k"])),
         rowwise=True),
    Form("top-p cumulative sum", "cumsum", DECODE,
         _when(lambda m, s: _has_lm_head(m), lambda m, s, w: dict(rows=s.rows, cols=m.vocab)), rowwise=True),
    Form("token embedding", "embedding", TOKENS,
         _when(lambda m, s: m.vocab > 0, lambda m, s, w: dict(tokens=s.rows, vocab=m.vocab, cols=m.hidden)),
         rowwise=True),
    # reductions: over the last dim, over tokens (a leading dim: per-channel statistics, as activation-aware
    # quantization gathers them), over tokens of a batch (mean pooling) and over several dims
    Form("row sum", "reduce", frozenset({"prefill"}),
         _when(lambda m, s: s.seq > 1, lambda m, s, w: dict(shape=(s.rows, m.hidden), dims=(1,), mean=False)),
         rowwise=True),
    Form("per-channel sum over tokens", "reduce", PREFILL_OR_ENCODE,
         _when(lambda m, s: s.seq > 1, lambda m, s, w: dict(shape=(s.rows, m.hidden), dims=(0,), mean=False)),
         rowwise=True),
    Form("mean pooling over tokens", "reduce", ENCODE,
         lambda m, s, w: dict(shape=(s.batch, s.seq, m.hidden), dims=(1,), mean=True)),
    Form("mean over batch and tokens", "reduce", ENCODE,
         _when(lambda m, s: s.batch > 1, lambda m, s, w: dict(shape=(s.batch, s.seq, m.hidden), dims=(0, 1),
                                                              mean=True))),
    # convolutions: patch embeddings and Whisper's two front convolutions
    Form("patch embedding", "conv2d", ENCODE,
         _when(lambda m, s: m.kind == "vision", lambda m, s, w: dict(batch=s.batch, channels=m.channels,
                                                                     image=m.image, patch=m.patch, out=m.hidden))),
    Form("audio convolution 1", "conv1d", ENCODE,
         _when(lambda m, s: m.kind == "speech", lambda m, s, w: dict(batch=s.batch, channels=m.mel_bins,
                                                                     length=m.frames, out=m.hidden, stride=1))),
    Form("audio convolution 2", "conv1d", ENCODE,
         _when(lambda m, s: m.kind == "speech", lambda m, s, w: dict(batch=s.batch, channels=m.hidden,
                                                                     length=m.frames, out=m.hidden, stride=2))),
]

# op -> family (a function of its parameters where the shape decides), and the reduction depth that sets
# a case's tolerance (the fp32 accumulation's error grows with it)
FAMILY = {
    "linear": lambda p: "gemv" if p["m"] <= 64 else "gemm", "bmm": "bmm", "sdpa": "attention_prefill",
    "paged_attention": "attention_decode", "rotary": "rotary", "rms_norm": "norm", "layer_norm": "norm",
    "add": "pointwise", "scale": "pointwise", "act_and_mul": "pointwise", "activation": "pointwise",
    "cast": "pointwise", "softmax": "softmax", "argmax": "arg_topk", "topk": "arg_topk", "cumsum": "scan",
    "embedding": "embedding", "reduce": "reduction", "conv2d": "conv", "conv1d": "conv",
}
FAMILIES = ("gemm", "gemv", "bmm", "attention_prefill", "attention_decode", "rotary", "norm", "softmax",
            "pointwise", "reduction", "scan", "arg_topk", "embedding", "conv")


def family_of(op: str, params: dict) -> str:
    found = FAMILY[op]
    return found(params) if callable(found) else found


# dtype of the case's data where it is not the model's: sampling reads float32 logits (transformers casts
# them), the cast reads the model's
FLOAT32_OPS = frozenset({"argmax", "topk", "cumsum"})


@dataclasses.dataclass
class Case:
    op: str
    family: str
    params: tuple  # sorted (name, value) pairs
    dtype: str
    users: list  # "model: role (setting)" of every model that forms it

    @property
    def key(self) -> tuple:
        return (self.op, self.params, self.dtype)

    @property
    def p(self) -> dict:
        return dict(self.params)

    def shape(self) -> str:
        return describe(self.op, self.p)

    def models(self) -> list:
        return sorted({user.split(":")[0] for user in self.users})


def _rowwise_setting(setting: Setting, workloads: dict) -> bool:
    if setting.phase == "prefill":
        return setting.seq in workloads["rowwise_prefill_tokens"]
    if setting.phase == "decode":
        return setting.batch in workloads["rowwise_decode_batches"]
    return True


def build_cases(models: list[Model], workloads: dict) -> list[Case]:
    """Every case the models form, one per (op, parameters, dtype), in the order first formed."""
    cases: dict[tuple, Case] = {}
    for model in models:
        for setting in settings(model, workloads):
            for form in FORMS:
                if setting.phase not in form.phases or (form.rowwise and not _rowwise_setting(setting, workloads)):
                    continue
                params = form.params(model, setting, workloads)
                if params is None:
                    continue
                dtype = "float32" if form.op in FLOAT32_OPS else model.dtype
                key = (form.op, tuple(sorted(params.items())), dtype)
                case = cases.get(key)
                if case is None:
                    case = cases[key] = Case(form.op, family_of(form.op, params), key[1], dtype, [])
                case.users.append(f"{model.name}: {form.role} ({setting.describe()})")
    return list(cases.values())


def select(cases: list[Case], families=None, models=None, quick=False, limit=None) -> list[Case]:
    """The cases to run, families in turn (a run the budget stops still covers every family): ``quick``
    keeps at most QUICK_PER_FAMILY a family, spread evenly over its list."""
    by_family = {f: [c for c in cases if c.family == f] for f in FAMILIES}
    for family, found in by_family.items():
        if families is not None and family not in families:
            found.clear()
        if models is not None:
            found[:] = [c for c in found if set(c.models()) & set(models)]
        if quick and len(found) > QUICK_PER_FAMILY:
            step = len(found) / QUICK_PER_FAMILY
            found[:] = [found[int(i * step)] for i in range(QUICK_PER_FAMILY)]
    ordered, queues = [], [list(found) for found in by_family.values()]
    while any(queues):
        for queue in queues:
            if queue:
                ordered.append(queue.pop(0))
    return ordered[:limit] if limit is not None else ordered


# a case's shape as its table row names it, by op; the rest are rows x cols with their activation or eps
_LABELS = {
    "linear": "{m}x{n}x{k}{bias_text}",
    "bmm": "{batch} x {m}x{n}x{k}",
    "sdpa": "B{batch} {heads}q/{kv_heads}kv S{seq} D{head_dim}{causal_text}",
    "paged_attention": "B{batch} {heads}q/{kv_heads}kv ctx{context} D{head_dim} pages of {block}",
    "rotary": "B{batch} H{heads} S{seq} D{head_dim}",
    "reduce": "{kind} {shape_text} over dims {dims}",
    "scale": "{rows}x{cols} * {factor}",
    "topk": "{rows}x{cols} k={k}",
    "embedding": "{tokens} ids from {vocab}x{cols}",
    "conv2d": "{batch}x{channels}x{image}^2 -> {out} k{patch} s{patch}",
    "conv1d": "{batch}x{channels}x{length} -> {out} k3 s{stride}",
}


def describe(op: str, p: dict) -> str:
    if op in _LABELS:
        return _LABELS[op].format(**p, bias_text=" +bias" if p.get("bias") else "",
                                  causal_text=" causal" if p.get("causal") else "",
                                  kind="mean" if p.get("mean") else "sum",
                                  shape_text="x".join(map(str, p.get("shape", ()))))
    text = f"{p['rows']}x{p['cols']}"
    return text + (f" {p['act']}" if "act" in p else "") + (f" eps={p['eps']:g}" if "eps" in p else "")


# ---- running a case: inputs, our call, torch's, the check and the floor -------------------------------------
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -9, "float16": 2.0 ** -11}
EXACT = 0.0


def tolerance(dtype: str, depth: int) -> float:
    """Bound on max |ours - torch| / max |torch|. Both round the result to ``dtype`` (a few unit roundoffs
    of the largest value) and accumulate in float32 in different orders: each within depth * u of the
    exact sum (the classic bound for a sum of ``depth`` terms), so the two within twice that. A wrong
    result is off by the order of the values themselves."""
    return 8 * UNIT_ROUNDOFF[dtype] + 2 * depth * UNIT_ROUNDOFF["float32"]


@dataclasses.dataclass
class Built:
    ours: Callable
    theirs: Callable
    nbytes: int
    flops: int
    rtol: float
    compare: Callable | None = None  # (ours_out, torch_out) -> max relative diff; default: elementwise


class Env:
    """The libraries and device of a run; makes torch inputs and shares them with nbxtensor."""

    def __init__(self, nbx, torch, device: str):
        self.nbx, self.torch, self.device = nbx, torch, device
        self.F, self.TF = nbx.nn.functional, torch.nn.functional
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(0)

    def randn(self, *shape, dtype: str, scale: float = 1.0):
        t = self.torch.randn(*shape, device=self.device, dtype=self.torch.float32, generator=self.generator)
        return (t * scale).to(getattr(self.torch, dtype))

    def share(self, *tensors):
        return [None if t is None else self.nbx.from_dlpack(t) for t in tensors]

    def to_torch(self, t):
        return self.torch.from_dlpack(t)


def _size(dtype: str) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]


def build_linear(env, p, dtype):
    m, n, k = p["m"], p["n"], p["k"]
    x, w = env.randn(m, k, dtype=dtype), env.randn(n, k, dtype=dtype, scale=k ** -0.5)
    b = env.randn(n, dtype=dtype) if p["bias"] else None
    nx, nw, nb = env.share(x, w, b)
    return Built(lambda: env.F.linear(nx, nw, nb), lambda: env.TF.linear(x, w, b),
                 (m * k + n * k + m * n + (n if b is not None else 0)) * _size(dtype), 2 * m * n * k,
                 tolerance(dtype, k))


def build_bmm(env, p, dtype):
    batch, m, n, k = p["batch"], p["m"], p["n"], p["k"]
    a, c = env.randn(batch, m, k, dtype=dtype), env.randn(batch, k, n, dtype=dtype, scale=k ** -0.5)
    na, nc = env.share(a, c)
    return Built(lambda: env.nbx.bmm(na, nc), lambda: env.torch.bmm(a, c),
                 batch * (m * k + k * n + m * n) * _size(dtype), 2 * batch * m * n * k, tolerance(dtype, k))


def build_sdpa(env, p, dtype):
    B, H, G, S, D, causal = p["batch"], p["heads"], p["kv_heads"], p["seq"], p["head_dim"], p["causal"]
    q, k, v = env.randn(B, H, S, D, dtype=dtype), env.randn(B, G, S, D, dtype=dtype), env.randn(B, G, S, D, dtype=dtype)
    nq, nk, nv = env.share(q, k, v)
    gqa = H != G
    flops = 4 * B * H * S * S * D // (2 if causal else 1)
    return Built(lambda: env.F.scaled_dot_product_attention(nq, nk, nv, is_causal=causal, enable_gqa=gqa),
                 lambda: env.TF.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa),
                 2 * (B * H * S * D + B * G * S * D) * _size(dtype), flops,
                 tolerance(dtype, D) + 4 * UNIT_ROUNDOFF[dtype])


def build_paged(env, p, dtype):
    """Pages of a (batch, pages * block, kv_heads, dim) store, sequence b's in a row of the block table; torch
    reads the same memory as (batch, kv_heads, context, dim) views, the layout its fused kernels take."""
    torch = env.torch
    B, H, G, C, D, block = p["batch"], p["heads"], p["kv_heads"], p["context"], p["head_dim"], p["block"]
    pages = -(-C // block)
    q = env.randn(B, H, D, dtype=dtype)
    k_store, v_store = (env.randn(B, pages * block, G, D, dtype=dtype) for _ in range(2))
    table = torch.arange(B * pages, dtype=torch.int32, device=env.device).view(B, pages)
    lens = torch.full((B,), C, dtype=torch.int32, device=env.device)
    k, v = (t[:, :C].transpose(1, 2) for t in (k_store, v_store))
    caches = [t.view(B * pages, block, G, D) for t in (k_store, v_store)]
    nq, nk, nv, ntable, nlens = env.share(q, *caches, table, lens)
    paged = env.nbx.ops.registry.get("paged_attention")
    q4 = q.unsqueeze(2)
    return Built(lambda: paged(nq, nk, nv, ntable, nlens),
                 lambda: env.TF.scaled_dot_product_attention(q4, k, v, enable_gqa=H != G).squeeze(2),
                 (2 * B * C * G * D + 2 * B * H * D) * _size(dtype) + 4 * B * (pages + 1), 4 * B * H * C * D,
                 tolerance(dtype, D) + 4 * UNIT_ROUNDOFF[dtype])


def build_rotary(env, p, dtype):
    """transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, cos and sin (batch, 1, seq, dim)."""
    torch = env.torch
    B, H, S, D = p["batch"], p["heads"], p["seq"], p["head_dim"]
    x = env.randn(B, H, S, D, dtype=dtype)
    angles = env.randn(B, 1, S, D // 2, dtype="float32", scale=3.0).repeat(1, 1, 1, 2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    nx, ncos, nsin = env.share(x, cos, sin)
    rotate = env.nbx.ops.registry.get("rotate_half_embedding")

    def theirs():
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin
    return Built(lambda: rotate(nx, ncos, nsin), theirs, (2 * x.numel() + 2 * cos.numel()) * _size(dtype),
                 3 * x.numel(), 4 * tolerance(dtype, 2))


def build_norm(env, p, dtype, layer):
    rows, cols, eps = p["rows"], p["cols"], p["eps"]
    x, w = env.randn(rows, cols, dtype=dtype), env.randn(cols, dtype=dtype)
    b = env.randn(cols, dtype=dtype) if layer else None
    nx, nw, nb = env.share(x, w, b)
    if layer:
        ours = lambda: env.F.layer_norm(nx, (cols,), nw, nb, eps)  # noqa: E731
        theirs = lambda: env.TF.layer_norm(x, (cols,), w, b, eps)  # noqa: E731
    else:
        ours = lambda: env.F.rms_norm(nx, (cols,), nw, eps)  # noqa: E731
        theirs = lambda: env.TF.rms_norm(x, (cols,), w, eps)  # noqa: E731
    return Built(ours, theirs, (2 * rows * cols + (2 if layer else 1) * cols) * _size(dtype), 5 * rows * cols,
                 tolerance(dtype, cols))


def build_softmax(env, p, dtype):
    rows, cols = p["rows"], p["cols"]
    x = env.randn(rows, cols, dtype=dtype, scale=4.0)
    (nx,) = env.share(x)
    return Built(lambda: env.F.softmax(nx, -1), lambda: env.TF.softmax(x, -1), 2 * rows * cols * _size(dtype),
                 4 * rows * cols, tolerance(dtype, cols))


def build_add(env, p, dtype):
    x, y = env.randn(p["rows"], p["cols"], dtype=dtype), env.randn(p["rows"], p["cols"], dtype=dtype)
    nx, ny = env.share(x, y)
    return Built(lambda: nx + ny, lambda: x + y, 3 * x.numel() * _size(dtype), x.numel(), EXACT)


def build_scale(env, p, dtype):
    x, factor = env.randn(p["rows"], p["cols"], dtype=dtype), p["factor"]
    (nx,) = env.share(x)
    return Built(lambda: nx * factor, lambda: x * factor, 2 * x.numel() * _size(dtype), x.numel(), EXACT)


TORCH_ACTIVATIONS = {"silu": lambda TF, x: TF.silu(x), "gelu": lambda TF, x: TF.gelu(x),
                     "gelu_tanh": lambda TF, x: TF.gelu(x, approximate="tanh"),
                     "quick_gelu": lambda TF, x: x * (1.702 * x).sigmoid()}


def build_act_and_mul(env, p, dtype):
    rows, cols, act = p["rows"], p["cols"], p["act"]
    x = env.randn(rows, 2 * cols, dtype=dtype)
    (nx,) = env.share(x)
    act_and_mul = env.nbx.ops.registry.get("act_and_mul")
    return Built(lambda: act_and_mul(nx, activation=act),
                 lambda: TORCH_ACTIVATIONS[act](env.TF, x[:, :cols]) * x[:, cols:],
                 3 * rows * cols * _size(dtype), 8 * rows * cols, tolerance(dtype, 1))


def build_activation(env, p, dtype):
    act = p["act"]
    x = env.randn(p["rows"], p["cols"], dtype=dtype)
    (nx,) = env.share(x)
    ours = {"gelu": lambda: env.F.gelu(nx), "gelu_tanh": lambda: env.F.gelu(nx, approximate="tanh"),
            "quick_gelu": lambda: nx * (1.702 * nx).sigmoid()}[act]
    return Built(ours, lambda: TORCH_ACTIVATIONS[act](env.TF, x), 2 * x.numel() * _size(dtype), 8 * x.numel(),
                 tolerance(dtype, 1))


def build_cast(env, p, dtype):
    x = env.randn(p["rows"], p["cols"], dtype=dtype, scale=4.0)
    (nx,) = env.share(x)
    return Built(lambda: nx.to(env.nbx.float32), lambda: x.float(), x.numel() * (_size(dtype) + 4), 0, EXACT)


def build_argmax(env, p, dtype):
    x = env.randn(p["rows"], p["cols"], dtype=dtype, scale=4.0)
    (nx,) = env.share(x)

    def compare(ours, theirs):  # ties may pick either index: the values they point at must agree
        chosen = x.gather(1, env.to_torch(ours).long().unsqueeze(1))
        return float((chosen - x.gather(1, theirs.unsqueeze(1))).abs().max())
    return Built(lambda: env.nbx.argmax(nx, -1), lambda: env.torch.argmax(x, -1),
                 x.numel() * _size(dtype) + 8 * p["rows"], x.numel(), EXACT, compare)


def build_topk(env, p, dtype):
    x = env.randn(p["rows"], p["cols"], dtype=dtype, scale=4.0)
    (nx,) = env.share(x)
    k = p["k"]

    def compare(ours, theirs):  # the k largest values, in order (indices may differ on ties)
        return float((env.to_torch(ours[0]).double() - theirs[0].double()).abs().max())
    return Built(lambda: env.nbx.topk(nx, k, -1), lambda: env.torch.topk(x, k, -1),
                 x.numel() * _size(dtype) + p["rows"] * k * (_size(dtype) + 8), x.numel(), EXACT, compare)


def build_cumsum(env, p, dtype):
    probabilities = env.torch.softmax(env.randn(p["rows"], p["cols"], dtype="float32", scale=4.0), -1).to(
        getattr(env.torch, dtype))
    (nx,) = env.share(probabilities)
    return Built(lambda: env.nbx.cumsum(nx, -1), lambda: env.torch.cumsum(probabilities, -1),
                 2 * probabilities.numel() * _size(dtype), probabilities.numel(), tolerance(dtype, p["cols"]))


def build_embedding(env, p, dtype):
    torch = env.torch
    table = env.randn(p["vocab"], p["cols"], dtype=dtype)
    ids = torch.randint(0, p["vocab"], (p["tokens"],), device=env.device, generator=env.generator)
    nids, ntable = env.share(ids, table)
    return Built(lambda: env.F.embedding(nids, ntable), lambda: env.TF.embedding(ids, table),
                 2 * p["tokens"] * p["cols"] * _size(dtype) + 8 * p["tokens"], 0, EXACT)


def build_reduce(env, p, dtype):
    x = env.randn(*p["shape"], dtype=dtype)
    (nx,) = env.share(x)
    dims, mean = list(p["dims"]), p["mean"]
    depth = math.prod(p["shape"][d] for d in dims)
    out_numel = x.numel() // depth
    if mean:
        ours, theirs = (lambda: nx.mean(dims)), (lambda: x.mean(dims))
    else:
        ours, theirs = (lambda: nx.sum(dims)), (lambda: x.sum(dims))
    return Built(ours, theirs, (x.numel() + out_numel) * _size(dtype), x.numel(), tolerance(dtype, depth))


def build_conv2d(env, p, dtype):
    n, c, size, patch, out = p["batch"], p["channels"], p["image"], p["patch"], p["out"]
    x = env.randn(n, c, size, size, dtype=dtype)
    w = env.randn(out, c, patch, patch, dtype=dtype, scale=(c * patch * patch) ** -0.5)
    b = env.randn(out, dtype=dtype)
    nx, nw, nb = env.share(x, w, b)
    positions = (size // patch) ** 2
    depth = c * patch * patch
    return Built(lambda: env.F.conv2d(nx, nw, nb, stride=patch), lambda: env.TF.conv2d(x, w, b, stride=patch),
                 (x.numel() + w.numel() + out + n * out * positions) * _size(dtype), 2 * n * out * positions * depth,
                 tolerance(dtype, depth))


def build_conv1d(env, p, dtype):
    """Whisper's front: conv1 (mel bins -> hidden) over the frames, conv2 (stride 2) over conv1's output."""
    n, c, length, out, stride = p["batch"], p["channels"], p["length"], p["out"], p["stride"]
    x = env.randn(n, c, length, dtype=dtype)
    w = env.randn(out, c, 3, dtype=dtype, scale=(3 * c) ** -0.5)
    b = env.randn(out, dtype=dtype)
    nx, nw, nb = env.share(x, w, b)
    positions = length // stride
    return Built(lambda: env.F.conv1d(nx, nw, nb, stride=stride, padding=1),
                 lambda: env.TF.conv1d(x, w, b, stride=stride, padding=1),
                 (x.numel() + w.numel() + out + n * out * positions) * _size(dtype),
                 2 * n * out * positions * 3 * c, tolerance(dtype, 3 * c))


BUILDERS = {
    "linear": build_linear, "bmm": build_bmm, "sdpa": build_sdpa, "paged_attention": build_paged,
    "rotary": build_rotary, "rms_norm": lambda e, p, d: build_norm(e, p, d, False),
    "layer_norm": lambda e, p, d: build_norm(e, p, d, True), "softmax": build_softmax, "add": build_add,
    "scale": build_scale, "act_and_mul": build_act_and_mul, "activation": build_activation,
    "cast": build_cast, "argmax": build_argmax, "topk": build_topk, "cumsum": build_cumsum,
    "embedding": build_embedding, "reduce": build_reduce, "conv2d": build_conv2d, "conv1d": build_conv1d,
}


def relative_diff(env, ours, theirs) -> float:
    """max |ours - theirs| / max |theirs|, in float64; NaN anywhere counts as infinitely far."""
    torch = env.torch
    ref = theirs.double()
    diff = (env.to_torch(ours).double() - ref).abs()
    worst = float(torch.nan_to_num(diff, nan=float("inf")).max()) if diff.numel() else 0.0
    return worst / max(float(ref.abs().max()) if ref.numel() else 0.0, 1e-30)


# ---- timers ---------------------------------------------------------------------------------------------
class GpuTimer:
    """Device time by CUDA events, ours and torch's in alternating batches, each call after an L2 flush;
    rounds and calls fitted to the case's time budget."""

    def __init__(self, nbx, torch, l2_bytes: int):
        sys.path.insert(0, str(HERE))
        import timing
        self.timing = timing
        buffer = nbx.empty(2 * l2_bytes, dtype=nbx.uint8, device="cuda")

        def flush():
            buffer.zero_()
            # the device idles a moment after the flush while the host queues the timed call, so that a
            # call's host cost (timed apart, in the host section) does not show as device time
            torch.cuda._sleep(HOST_HEADROOM_CYCLES)
        self.flush = flush
        self.flush_ms = timing.gpu_time_ms(flush)

    def pair(self, ours, theirs, seconds: float) -> tuple[float, float]:
        first_ours, first_theirs = self.timing.gpu_pair_ms(ours, theirs, warmup=1, reps=1, rounds=1, flush=self.flush)
        per_call_s = (max(first_ours, first_theirs) + self.flush_ms) * 1e-3 + 30e-6  # host pace of a call
        calls = max(2, int(seconds / 2 / per_call_s))
        rounds = min(10, max(2, calls // 4))
        reps = min(25, max(1, calls // rounds))
        return self.timing.gpu_pair_ms(ours, theirs, warmup=1, reps=reps, rounds=rounds, flush=self.flush)


class HostTimer:
    """Wall time of a call on the host (the CPU device, kernels interpreted): the smoke run's clock."""

    def pair(self, ours, theirs, seconds: float) -> tuple[float, float]:
        times = []
        for fn in (ours, theirs):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return times[0], times[1]


def _first(out):
    """An op's result as one tensor or a tuple of them (topk)."""
    return tuple(out) if isinstance(out, (tuple, list)) else out


def blank_row(case: Case, status: str) -> dict:
    return dict(family=case.family, op=case.op, shape=case.shape(), dtype=case.dtype, models=case.models(),
                users=case.users, params=dict(case.params), status=status, error=None, torch_error=None,
                ours_ms=None, torch_ms=None, ratio=None, check=None, check_ok=None, first_call_s=None)


def device_alive(torch) -> bool:
    """False once a fault (an illegal address, a launch failure) has left the CUDA context unusable."""
    try:
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


def run_case(env, case: Case, timer, seconds: float, floor) -> dict:
    """One row: our time and torch's, the check, the floor; errors are recorded, never raised."""
    row = blank_row(case, "ok")
    try:
        built = BUILDERS[case.op](env, case.p, case.dtype)
    except Exception as error:  # noqa: BLE001  (a case that cannot be set up is reported, the sweep goes on)
        row.update(status="error", error=f"inputs: {type(error).__name__}: {error}")
        return row
    row.update(nbytes=built.nbytes, flops=built.flops, tolerance=built.rtol, floor_ms=floor(built, case.dtype))
    start = time.perf_counter()
    try:
        ours_out = _first(built.ours())
        env.synchronize()
    except Exception as error:  # noqa: BLE001
        row.update(status="error", error=f"{type(error).__name__}: {error}")
        return row
    row["first_call_s"] = time.perf_counter() - start
    try:
        torch_out = _first(built.theirs())
    except Exception as error:  # noqa: BLE001  (torch refusing a shape is torch's; ours is still timed)
        row.update(status="torch failed", torch_error=f"{type(error).__name__}: {error}")
        torch_out = None
    try:
        if torch_out is not None:
            diff = built.compare(ours_out, torch_out) if built.compare else relative_diff(env, ours_out, torch_out)
            row.update(check=diff, check_ok=diff <= built.rtol)
            if diff > built.rtol:
                row["status"] = "check failed"
        del ours_out, torch_out
        theirs = built.theirs if row["torch_error"] is None else (lambda: None)
        ours_ms, torch_ms = timer.pair(built.ours, theirs, seconds)
        row.update(ours_ms=ours_ms, torch_ms=torch_ms if row["torch_error"] is None else None)
        if row["torch_error"] is None and ours_ms > 0:
            row["ratio"] = torch_ms / ours_ms
    except Exception as error:  # noqa: BLE001
        row.update(status="error", error=f"timing or check: {type(error).__name__}: {error}")
    return row


def floor_rates(facts: dict, device_name: str) -> tuple[dict, float | None]:
    """(FLOP/s by dtype, bytes/s) this device can reach by its facts: a measured figure for this part where
    the facts have one, else its datasheet's, else the class's first."""
    part = next((word for word in device_name.lower().replace("-", " ").split() if any(
        part in word for part in ("h100", "h200", "a100", "l40"))), "")

    def pick(table):
        if not table:
            return None
        keys = list(table)
        ranked = ([k for k in keys if k.startswith("measured") and part and part in k]
                  + [k for k in keys if part and part in k] + keys)
        return float(table[ranked[0]])
    flops = facts.get("flops_per_s") or {}
    half = pick({k: v for k, v in flops.items() if "float32" not in k})
    return {"bfloat16": half, "float16": half, "float32": pick({k: v for k, v in flops.items() if "float32" in k})}, \
        pick(facts.get("bandwidth_bytes_per_s") or {})


# ---- host cost through operators, methods and functions ----------------------------------------------------
def host_section(nbx, torch, device: str) -> list[dict]:
    sys.path.insert(0, str(HERE))
    from timing import host_pair_us
    F, TF = nbx.nn.functional, torch.nn.functional
    a, b = (torch.randn(1, 4096, device=device, dtype=torch.bfloat16) for _ in range(2))
    x, w = torch.randn(16, 256, device=device, dtype=torch.bfloat16), torch.randn(256, 256, device=device,
                                                                                   dtype=torch.bfloat16)
    na, nb, nx, nw = (nbx.from_dlpack(t) for t in (a, b, x, w))
    entries = [
        ("operator", "a + b", lambda: na + nb, lambda: a + b),
        ("method", "a.add(b)", lambda: na.add(nb), lambda: a.add(b)),
        ("function", "add(a, b)", lambda: nbx.add(na, nb), lambda: torch.add(a, b)),
        ("operator", "a * b", lambda: na * nb, lambda: a * b),
        ("method", "a.sum(-1)", lambda: na.sum(-1), lambda: a.sum(-1)),
        ("function", "sum(a, -1)", lambda: nbx.sum(na, -1), lambda: torch.sum(a, -1)),
        ("method", "a.softmax(-1)", lambda: na.softmax(-1), lambda: a.softmax(-1)),
        ("function", "F.softmax(a, -1)", lambda: F.softmax(na, -1), lambda: TF.softmax(a, -1)),
        ("operator", "x @ w (16x256x256)", lambda: nx @ nw, lambda: x @ w),
        ("function", "F.linear(x, w)", lambda: F.linear(nx, nw), lambda: TF.linear(x, w)),
    ]
    rows = []
    for entry, what, ours, theirs in entries:
        try:
            ours_us, torch_us = host_pair_us(ours, theirs, reps=100, rounds=11)
            rows.append(dict(entry=entry, what=what, ours_us=ours_us, torch_us=torch_us, ratio=torch_us / ours_us))
        except Exception as error:  # noqa: BLE001
            rows.append(dict(entry=entry, what=what, error=f"{type(error).__name__}: {error}"))
        row = rows[-1]
        print(f"host {entry:8s} {what:22s} " + (f"ours {row['ours_us']:6.1f} us  torch {row['torch_us']:6.1f} us  "
                                                f"torch/ours {row['ratio']:.2f}" if "error" not in row
                                                else f"error: {row['error']}"), flush=True)
    return rows


# ---- summaries and output -----------------------------------------------------------------------------------
def geomean(values) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def summarize(rows: list[dict]) -> tuple[list[dict], float | None]:
    families = []
    for family in FAMILIES:
        found = [r for r in rows if r["family"] == family]
        if not found:
            continue
        timed = [r for r in found if r["ratio"] is not None]
        worst = min(timed, key=lambda r: r["ratio"]) if timed else None
        families.append(dict(
            family=family, cases=len(found), timed=len(timed), geomean=geomean(r["ratio"] for r in timed),
            worst_ratio=worst["ratio"] if worst else None,
            worst=f"{worst['op']} {worst['shape']} {worst['dtype']}" if worst else None,
            below=sum(r["ratio"] < BELOW for r in timed), errors=sum(r["status"] == "error" for r in found),
            torch_failed=sum(r["status"] == "torch failed" for r in found),
            check_failed=sum(r["status"] == "check failed" for r in found),
            not_run=sum(r["status"] == "not run" for r in found)))
    return families, geomean(r["ratio"] for r in rows if r["ratio"] is not None)


def _num(value, fmt):
    return "" if value is None else format(value, fmt)


def print_summary(families, overall):
    print(f"\n{'family':18s} {'cases':>5s} {'timed':>5s} {'geomean':>8s} {'< 0.9x':>6s} {'errors':>6s}  worst")
    for f in families:
        worst = f"{f['worst_ratio']:.2f}x {f['worst']}" if f["worst"] else "-"
        print(f"{f['family']:18s} {f['cases']:5d} {f['timed']:5d} {_num(f['geomean'], '8.2f') or '-':>8s} "
              f"{f['below']:6d} {f['errors']:6d}  {worst}"
              + (f"  (torch failed {f['torch_failed']})" if f["torch_failed"] else "")
              + (f"  (check failed {f['check_failed']})" if f["check_failed"] else "")
              + (f"  (not run {f['not_run']})" if f["not_run"] else ""))
    print(f"\nwhole sweep: geometric mean of torch/ours {_num(overall, '.3f') or '-'}")


def markdown(header: str, families, overall, rows, host_rows) -> str:
    lines = [f"# Sweep over model shapes\n\n{header}\n", "## By family (torch ms / our ms)\n",
             "| family | cases | timed | geomean | below 0.9x | errors | worst |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for f in families:
        worst = f"{f['worst_ratio']:.2f}x {f['worst']}" if f["worst"] else ""
        lines.append(f"| {f['family']} | {f['cases']} | {f['timed']} | {_num(f['geomean'], '.2f')} | {f['below']} | "
                     f"{f['errors'] + f['torch_failed'] + f['check_failed']} | {worst} |")
    lines += [f"\nWhole sweep: geometric mean {_num(overall, '.3f')} over "
              f"{sum(r['ratio'] is not None for r in rows)} timed cases.\n", "## Cases\n",
              "| family | op | shape | dtype | ours ms | torch ms | torch/ours | floor ms | floor/ours | check | "
              "first call s | models |",
              "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
    for r in rows:
        fraction = r["floor_ms"] / r["ours_ms"] if r.get("floor_ms") and r["ours_ms"] else None
        check = {"ok": "ok", "check failed": f"FAIL {_num(r['check'], '.2g')}", "error": f"error: {r['error']}",
                 "torch failed": f"torch failed: {r['torch_error']}", "not run": "not run"}[r["status"]]
        lines.append(f"| {r['family']} | {r['op']} | {r['shape']} | {r['dtype']} | {_num(r['ours_ms'], '.4f')} | "
                     f"{_num(r['torch_ms'], '.4f')} | {_num(r['ratio'], '.2f')} | {_num(r.get('floor_ms'), '.4f')} | "
                     f"{_num(fraction, '.0%')} | {check.replace('|', '/')[:160]} | {_num(r['first_call_s'], '.1f')} | "
                     f"{', '.join(r['models'])} |")
    if host_rows:
        lines += ["\n## Host cost of small ops (us a call; bf16 (1, 4096), products 16x256x256)\n",
                  "| entry | call | ours us | torch us | torch/ours |", "| --- | --- | ---: | ---: | ---: |"]
        for h in host_rows:
            lines.append(f"| {h['entry']} | `{h['what']}` | {_num(h.get('ours_us'), '.1f')} | "
                         f"{_num(h.get('torch_us'), '.1f')} | {_num(h.get('ratio'), '.2f') or h.get('error', '')} |")
    return "\n".join(lines) + "\n"


# ---- compiling ahead, in parallel --------------------------------------------------------------------------
def _precompile_cases(keys: list, device: str, tuning_dir: str, deadline: float) -> tuple[int, list]:
    """Worker: the first call of each case (its kernels compiled, its launch keys tuned) into a throwaway
    tuning store; Triton keeps what it compiles on disk, where the timed run finds it."""
    os.environ["NBX_TUNING_DIR"] = tuning_dir
    import nbxtensor as nbx
    import torch
    env = Env(nbx, torch, device)
    done, errors = 0, []
    for op, params, dtype in keys:
        if time.time() > deadline:
            break
        try:
            built = BUILDERS[op](env, dict(params), dtype)
            built.ours()
            if device == "cuda":
                torch.cuda.synchronize()
            done += 1
        except Exception as error:  # noqa: BLE001  (the timed run meets and reports it again)
            errors.append(f"{op} {describe(op, dict(params))} {dtype}: {type(error).__name__}: {error}"[:200])
        built = None
        if device == "cuda":
            torch.cuda.empty_cache()
            nbx.cuda.empty_cache()
    return done, errors


def precompile(cases: list[Case], workers: int, device: str, seconds: float) -> None:
    """The cases' first calls in ``workers`` processes before anything is timed: compiling is host work that
    the host's cores share, and the timed run then loads kernels instead of compiling them. The workers
    tune into a scratch store (choices made while they contend for the device are thrown away), so the
    timed run tunes afresh on a warm compile cache."""
    import concurrent.futures
    import multiprocessing
    import tempfile
    start = time.perf_counter()
    deadline = time.time() + seconds
    chunks = [[c.key for c in cases[i::workers]] for i in range(workers)]
    try:
        with tempfile.TemporaryDirectory() as scratch, concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = list(pool.map(_precompile_cases, chunks, [device] * workers, [scratch] * workers,
                                    [deadline] * workers))
    except Exception as error:  # noqa: BLE001  (the timed run compiles what the workers did not)
        print(f"precompile failed ({type(error).__name__}: {error}); the run compiles as it goes", flush=True)
        return
    done = sum(n for n, _ in results)
    errors = [e for _, found in results for e in found]
    print(f"precompiled {done} of {len(cases)} cases' first calls in {time.perf_counter() - start:.0f} s with "
          f"{workers} workers; {len(errors)} failed there", flush=True)
    for error in errors[:20]:
        print(f"  {error}", flush=True)


# ---- the command line ------------------------------------------------------------------------------------
def smoke_model(model: Model) -> Model:
    """The model with every extent cut down (ratios kept: grouped heads stay grouped, a head dimension that
    is no power of two stays one) so that its cases run interpreted on the CPU in seconds."""
    heads = min(model.heads, 4)
    return dataclasses.replace(
        model, hidden=max(16, model.hidden // 32), heads=heads, kv_heads=max(1, heads * model.kv_heads // model.heads),
        head_dim=max(8, model.head_dim // 8), intermediate=max(16, model.intermediate // 32),
        vocab=max(64, model.vocab // 256) if model.vocab else 0, sequences=((1, 8),), images=(1,),
        image=model.patch * 3 if model.patch else 0, clips=(1,), frames=40, max_source_positions=20,
        mel_bins=8 if model.mel_bins else 0)


SMOKE_WORKLOADS = {"prefill_tokens": [1, 80], "decode": [[2, 40]], "rowwise_prefill_tokens": [80],
                   "rowwise_decode_batches": [2], "top_k": 8, "kv_block_size": 16}


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", help=f"comma-separated families: {', '.join(FAMILIES)}, host")
    parser.add_argument("--model", help="comma-separated model names: only cases these models form")
    parser.add_argument("--limit", type=int, help="at most this many cases")
    parser.add_argument("--quick", action="store_true",
                        help=f"at most {QUICK_PER_FAMILY} cases a family, spread over its shapes")
    parser.add_argument("--seconds-per-case", type=float, help="timing budget of a case (both sides)")
    parser.add_argument("--list", action="store_true", help="print the cases and the estimated time; run nothing")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="a few cases of models scaled down, on the CPU device (kernels interpreted)")
    parser.add_argument("--precompile", type=int, metavar="WORKERS",
                        help="processes compiling the cases' kernels before the timed run (default: up to "
                             f"{PRECOMPILE_WORKERS} on a GPU, none on the CPU; 0: none)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="where sweep.md and sweep.json go")
    return parser.parse_args(argv)


def plan(args) -> tuple[list[Case], set | None]:
    workloads, models = load_table()
    families = None if args.family is None else set(args.family.split(","))
    unknown = (families or set()) - set(FAMILIES) - {"host"}
    if unknown:
        raise SystemExit(f"sweep.py: unknown family {', '.join(sorted(unknown))}; families: "
                         f"{', '.join(FAMILIES)}, host")
    names = None if args.model is None else args.model.split(",")
    missing = set(names or ()) - {m.name for m in models}
    if missing:
        raise SystemExit(f"sweep.py: unknown model {', '.join(sorted(missing))}; models: "
                         f"{', '.join(m.name for m in models)}")
    if args.cpu_smoke:
        models, workloads = [smoke_model(m) for m in models], SMOKE_WORKLOADS
        cases = select(build_cases(models, workloads), families or set(SMOKE_FAMILIES), names or SMOKE_MODELS)
        firsts = {}
        for case in cases:
            firsts.setdefault(case.family, case)
        return list(firsts.values())[:args.limit], families
    return select(build_cases(models, workloads), families, names, args.quick, args.limit), families


def main(argv=None) -> int:
    args = parse(argv)
    seconds = args.seconds_per_case or (QUICK_SECONDS_PER_CASE if args.quick else DEFAULT_SECONDS_PER_CASE)
    cases, families = plan(args)
    counts = {f: sum(c.family == f for c in cases) for f in FAMILIES}
    print("cases per family: " + ", ".join(f"{f} {n}" for f, n in counts.items() if n) + f"; {len(cases)} in all",
          flush=True)
    print(f"estimated GPU time: {len(cases) * (seconds + SETUP_ESTIMATE_S) / 60:.1f} min ({seconds} s timing + "
          f"~{SETUP_ESTIMATE_S} s setup a case on warm caches; on a cold one, compiling ahead takes up to "
          f"{PRECOMPILE_SHARE:.0%} of the budget and tuning comes on top)", flush=True)
    if args.list:
        for case in cases:
            print(f"  {case.family:18s} {case.op:16s} {case.shape():48s} {case.dtype:9s} {'; '.join(case.users)}")
        return 0
    if args.cpu_smoke:
        os.environ["NBX_DEVICE"] = "cpu"
    import nbxtensor as nbx
    import torch  # the comparison only; nbxtensor itself never imports torch
    from nbxtensor.device import backend_for

    budget = float(os.environ.get("NBX_SWEEP_BUDGET_S", DEFAULT_BUDGET_S))
    started = time.perf_counter()
    device = "cpu" if args.cpu_smoke else "cuda"
    env = Env(nbx, torch, device)
    env.synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    facts = backend_for(nbx.device(device)).facts
    if device == "cuda":
        # torch's float32 products and convolutions at IEEE precision (cuDNN's default is TF32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        name = nbx.cuda.get_device_name()
        timer = GpuTimer(nbx, torch, int(facts.get("l2_cache_bytes", 128 << 20)))
    else:
        name, timer = "CPU (Triton interpreter)", HostTimer()
    flops_rate, bandwidth = floor_rates(facts, name)

    def floor(built, dtype):
        times = [built.nbytes / bandwidth if bandwidth else 0.0,
                 built.flops / flops_rate[dtype] if flops_rate.get(dtype) else 0.0]
        return max(times) * 1e3 if any(times) else None

    import triton
    header = (f"{name} ({facts['name']} facts), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; nbxtensor "
              f"{nbx.__version__}, triton {triton.__version__}, torch {torch.__version__}; {seconds} s a case"
              f"{', every call after an L2 flush' if device == 'cuda' else ', host clock'}; floor: bytes at "
              f"{_num(bandwidth, '.3g') or 'none'} B/s, FLOPs at {_num(flops_rate.get('bfloat16'), '.3g') or 'none'} "
              f"(half) / {_num(flops_rate.get('float32'), '.3g') or 'none'} (fp32) FLOP/s")
    print(header, flush=True)
    workers = args.precompile if args.precompile is not None else (
        min(PRECOMPILE_WORKERS, max(1, (os.cpu_count() or 2) - 1)) if device == "cuda" else 0)
    if min(workers, len(cases)) > 0:
        precompile(cases, min(workers, len(cases)), device, PRECOMPILE_SHARE * budget)
    run_host = device == "cuda" and (families is None or "host" in families)
    reserve = HOST_SECTION_S if run_host else 0.0
    rows = []
    for i, case in enumerate(cases):
        if time.perf_counter() - started + seconds + SETUP_ESTIMATE_S + reserve > budget:
            rows += [blank_row(c, "not run") for c in cases[i:]]
            print(f"budget of {budget:.0f} s (NBX_SWEEP_BUDGET_S) reached: {len(cases) - i} cases not run", flush=True)
            break
        row = run_case(env, case, timer, seconds, floor)
        rows.append(row)
        shown = (f"ours {row['ours_ms']:.4f} ms torch {_num(row['torch_ms'], '.4f') or '-'} ms "
                 f"ratio {_num(row['ratio'], '.2f') or '-'}" if row["ours_ms"] is not None else "")
        problem = row["error"] or row["torch_error"] or (f"check {row['check']:.3g} > {row['tolerance']:.3g}"
                                                         if row["status"] == "check failed" else "")
        print(f"[{i + 1}/{len(cases)}] {case.family} {case.op} {case.shape()} {case.dtype}: {row['status']} {shown}"
              f"{' (first call %.1f s)' % row['first_call_s'] if row['first_call_s'] else ''}"
              f"{' -- ' + problem if problem else ''}  [{', '.join(case.models())}]", flush=True)
        if device == "cuda" and row["status"] == "error" and not device_alive(torch):
            rows += [blank_row(c, "not run") for c in cases[i + 1:]]
            print(f"the device faulted in this case: {len(cases) - i - 1} cases not run", flush=True)
            run_host = False
            break
        if device == "cuda" and row.get("nbytes", 0) > 1 << 28:  # give big inputs' memory back to both caches
            torch.cuda.empty_cache()
            nbx.cuda.empty_cache()
    first_calls = sum(r["first_call_s"] or 0.0 for r in rows)
    print(f"first calls (compiling and tuning included): {first_calls:.0f} s of {time.perf_counter() - started:.0f} s",
          flush=True)
    host_rows = host_section(nbx, torch, device) if run_host else []
    families_summary, overall = summarize(rows)
    print_summary(families_summary, overall)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sweep.md"), "w") as f:
        f.write(markdown(header, families_summary, overall, rows, host_rows))
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump(dict(header=header, device=name, seconds_per_case=seconds, families=families_summary,
                       geomean=overall, rows=rows, host=host_rows,
                       wall_s=time.perf_counter() - started), f, indent=1, default=str)
    print(f"wrote {os.path.join(args.out, 'sweep.md')} and sweep.json ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
