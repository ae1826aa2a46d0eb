"""The GEMM sweep: every setting of a product's launch key run on the device, each on its own, for the
benchmarks (``gpu_matmul.py``) and for looking at one shape by hand. It watches the product's planning
(``matmul_plans._plan_product``) ask the tuner for its GEMM setting and stops it there, so nothing is tuned
or stored, and runs the settings itself through the plan's own ``prepare``.

    from gemm_sweep import gemm_sweep   # with benchmarks/ on sys.path
"""
from __future__ import annotations

from nbxtensor import tuning
from nbxtensor.dtypes import get_dtype
from nbxtensor.ops.matmul_plans import _plan_product
from nbxtensor.tuning.timing import device_time_ms


class _Observed(Exception):
    """Stops ``_plan_product`` once the sweep has what it needs (before any tuning)."""


def _dims(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


def gemm_sweep(op: str, a, b, bias=None, alpha=1, beta=0, *, configs=None, extra=(), check=None,
               timed: bool = True, planes: bool = False, flush_bytes: int = 0) -> dict:
    """The GEMM settings of the launch key of ``a @ b`` (2-D or batched, as ``matmul_plans._product`` takes
    them), each run on the device: {"key", "candidates" (the tuner's), "chosen" (the cached setting, if
    tuned), "rows": [{"config", "extra", "ms" (None when it failed to build or run, or untimed), "error",
    "check"}] fastest first}. ``configs`` replaces the tuner's candidates; ``extra`` settings are run too
    (e.g. a ``PRECISION`` of emulated float32, which no tuning candidate names); ``check(out)`` is called on
    each setting's output; ``timed=False`` runs each once (to compile it); ``planes``: a float32 product's
    key on bfloat16 parts (its register split's and true float32's settings), as a run plans it, instead of
    the FMA path's key; ``flush_bytes`` > 0: each timed call after that much memory is overwritten, as
    tuning times them. Nothing is tuned or stored."""
    found = {}

    def observe(key, facts, candidates, prepare):
        if key.startswith("gemm|"):
            found.update(key=key, candidates=candidates(), prepare=prepare)
        raise _Observed
    choose_timed = tuning.choose_timed
    tuning.choose_timed = observe
    try:
        out_dtype = get_dtype("int32") if a.dtype.name == "int8" else a.dtype
        _plan_product(op, a, b, out_dtype, bias, alpha, beta, planes=planes)
    except _Observed:
        pass
    finally:
        tuning.choose_timed = choose_timed
    if not found:
        raise RuntimeError(f"{op}: no GEMM launch for shapes {_dims(a.shape)} and {_dims(b.shape)} (GEMV rows?)")
    rows = []
    chosen = found["candidates"] if configs is None else configs
    for config, is_extra in [(dict(c), False) for c in chosen] + [(dict(c), True) for c in extra]:
        row = dict(config=config, extra=is_extra, ms=None, error=None, check=None)
        try:
            run = found["prepare"](config)  # the plan's launches on its operands: partial(run, a, b, bias, out)
            if timed:
                row["ms"] = float(device_time_ms(run, flush_bytes=flush_bytes))
            else:
                run()
            if check is not None:
                row["check"] = check(run.args[3])
        except Exception as e:  # noqa: BLE001  (a setting that does not build or fit is reported, not fatal)
            text = str(e).strip().splitlines()
            row["error"] = f"{type(e).__name__}: {text[-1][:200] if text else ''}"
        rows.append(row)
    rows.sort(key=lambda r: (r["ms"] is None, r["ms"] or 0.0))
    entry = tuning.entries(a.device).get(found["key"])
    return dict(key=found["key"], candidates=found["candidates"], chosen=None if entry is None else entry["config"],
                rows=rows)
