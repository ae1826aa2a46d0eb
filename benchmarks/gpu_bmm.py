"""Batched small products, float32 attention at short sequences and short-M GEMMs against torch, in one run:
the sweep rows of these classes (``sweep.py``'s builders and timer: CUDA events, each call after an L2
flush, ours and torch's in alternating batches), each timed twice: "before", with the candidates these
shapes had before (float32 batches on the FMA path's key, float32 attention on the FMA units alone, GEMMs
without the settings that split their last wave of tiles in one launch, ``_wave_split_shapes``), and
"after", each in a tuning store of its own under $OUT. An
attention row names the form its key's tuner chose (true float32 on the FMA units, or bfloat16 parts split
in registers on the matrix units) and its tiles.

    python benchmarks/gpu_bmm.py [--only bmm,sdpa,linear] [--candidates] [--seconds S]

Every row's first call is made first in worker processes (``sweep.precompile``), so that the timed run
finds its kernels compiled; a whole run tunes about 20 launch keys of up to 35 candidates each.
``--candidates`` also times every candidate of each row's launch key alone (after a flush), fastest first,
the tuner's choice marked '*', so that a row shows which form wins (bfloat16 parts split in registers, true
float32, a narrow tile, split K). Prints a table (ours before, ours after, torch, torch /
ours) and writes gpu_bmm.json under $OUT. ``--cpu-smoke``: the rows shrunk, on the CPU (the script runs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PRECOMPILE_S = 300
# (op, sweep.py's parameters, dtype): the rows of issue 28 below 0.9x and their neighbours
ROWS = [
    ("bmm", dict(batch=12, m=128, n=128, k=64), "float32"),
    ("bmm", dict(batch=12, m=128, n=64, k=128), "float32"),
    ("bmm", dict(batch=96, m=128, n=128, k=64), "float32"),
    ("bmm", dict(batch=96, m=128, n=64, k=128), "float32"),
    ("bmm", dict(batch=48, m=512, n=512, k=64), "float32"),
    ("bmm", dict(batch=48, m=512, n=64, k=512), "float32"),
    ("bmm", dict(batch=12, m=197, n=197, k=64), "float32"),
    ("bmm", dict(batch=12, m=197, n=64, k=197), "float32"),
    ("bmm", dict(batch=384, m=197, n=197, k=64), "float32"),
    ("bmm", dict(batch=384, m=197, n=64, k=197), "float32"),
    ("sdpa", dict(batch=1, heads=12, kv_heads=12, seq=128, head_dim=64, causal=True), "float32"),
    ("sdpa", dict(batch=1, heads=12, kv_heads=12, seq=128, head_dim=64, causal=False), "float32"),
    ("sdpa", dict(batch=4, heads=12, kv_heads=12, seq=512, head_dim=64, causal=False), "float32"),
    ("sdpa", dict(batch=32, heads=12, kv_heads=12, seq=197, head_dim=64, causal=False), "float32"),
    ("linear", dict(m=128, n=4096, k=14336, bias=False), "bfloat16"),
    ("linear", dict(m=128, n=3584, k=14336, bias=False), "bfloat16"),
    ("linear", dict(m=128, n=37888, k=3584, bias=False), "bfloat16"),
    ("linear", dict(m=128, n=4096, k=4096, bias=False), "bfloat16"),
    ("linear", dict(m=128, n=11008, k=4096, bias=False), "bfloat16"),  # 86 tiles: only narrower ones split
    ("linear", dict(m=64, n=12288, k=4096, bias=False), "float16"),
    ("linear", dict(m=1000, n=4096, k=11008, bias=False), "float16"),
]


def _before(op: str):
    """Undo (returns a function restoring) what this branch added for ``op``'s rows."""
    from nbxtensor.ops import attention, matmul, matmul_plans
    if op == "bmm":
        matmul.backends.cuda.matmul.float32_planes = False  # float32 batches: the FMA path's key, as before

        def restore():
            matmul.backends.cuda.matmul.float32_planes = True
        return restore
    if op == "sdpa":  # float32 attention on the FMA units alone, as before
        shapes = attention._FORWARD_PARTS_SHAPES
        attention._FORWARD_PARTS_SHAPES = {bound: [] for bound in shapes}
        return lambda: setattr(attention, "_FORWARD_PARTS_SHAPES", shapes)
    waved = matmul_plans._wave_split_shapes  # GEMMs without the settings that split the last wave of tiles
    matmul_plans._wave_split_shapes = lambda *args: []
    return lambda: setattr(matmul_plans, "_wave_split_shapes", waved)


def _store(out_dir: Path, name: str) -> None:
    """Tuning from here on in a store of its own (plans made under another forgotten)."""
    from nbxtensor.ops.plans import clear_all
    os.environ["NBX_TUNING_DIR"] = str(out_dir / f"tuning-{name}")
    clear_all()


def _form(config: dict | None) -> str:
    """An attention setting in words: its precision and tiles."""
    if not config:
        return "untuned"
    from nbxtensor.ops.attention import PARTS
    precision = "bf16 parts (matrix units)" if config.get("PRECISION") == PARTS else config.get("KERNEL", "float32 FMA")
    return (f"{precision} {config.get('BLOCK_M')}x{config.get('BLOCK_N')} warps {config.get('num_warps')} "
            f"stages {config.get('num_stages', config.get('STAGES'))}")


class _Observed(Exception):
    """Stops the attention's planning once its key's candidates are known."""


def _attention_sweep(built, flush_bytes) -> dict:
    """The attention launch key of ``built.ours``'s call and its candidates, each timed alone (fastest
    first), in ``gemm_sweep``'s form; nothing is tuned or stored."""
    from nbxtensor.ops import attention
    from nbxtensor.ops.plans import clear_all
    from nbxtensor.tuning.timing import device_time_ms
    found = {}

    def observe(key, facts, candidates, prepare):
        found.update(key=key, candidates=candidates(), prepare=prepare)
        raise _Observed
    choose_timed = attention.tuning.choose_timed
    attention.tuning.choose_timed = observe
    try:
        clear_all()
        built.ours()
    except _Observed:
        pass
    finally:
        attention.tuning.choose_timed = choose_timed
        clear_all()
    rows = []
    for config in found["candidates"]:
        row = dict(config=config, ms=None, error=None)
        try:
            row["ms"] = float(device_time_ms(found["prepare"](config), flush_bytes=flush_bytes))
        except Exception as e:  # noqa: BLE001  (a setting that does not build or fit is reported, not fatal)
            text = str(e).strip().splitlines()
            row["error"] = f"{type(e).__name__}: {text[-1][:200] if text else ''}"
        rows.append(row)
    rows.sort(key=lambda r: (r["ms"] is None, r["ms"] or 0.0))
    return dict(key=found["key"], candidates=found["candidates"], rows=rows)


def _candidates(sweep, env, op, p, dtype, flush_bytes, built=None, chosen=None) -> list[dict]:
    """Every candidate of the row's launch key timed alone, fastest first; ``chosen``: an attention row's
    tuned setting, marked."""
    from gemm_sweep import gemm_sweep
    from nbxtensor.ops.plans import clear_all
    clear_all()
    if op == "sdpa":
        swept = dict(_attention_sweep(built, flush_bytes), chosen=chosen)
    elif op == "bmm":
        a = env.randn(p["batch"], p["m"], p["k"], dtype=dtype)
        b = env.randn(p["batch"], p["k"], p["n"], dtype=dtype)
        na, nb = env.share(a, b)
        swept = gemm_sweep("bmm", na, nb, planes=True, flush_bytes=flush_bytes)
    else:
        x, w = env.randn(p["m"], p["k"], dtype=dtype), env.randn(p["n"], p["k"], dtype=dtype)
        nx, nw = env.share(x, w)
        swept = gemm_sweep("linear", nx, nw.transpose(0, 1), flush_bytes=flush_bytes)
    print(f"    key {swept['key']}: {len(swept['candidates'])} candidates; the tuner chose {swept['chosen']}")
    for row in swept["rows"]:
        mark = "*" if row["config"] == swept["chosen"] else " "
        shown = f"{row['ms'] * 1e3:9.1f} us" if row["ms"] is not None else f"failed: {row['error']}"
        print(f"    {mark} {shown}  {row['config']}", flush=True)
    return [dict(config=row["config"], ms=row["ms"], error=row["error"]) for row in swept["rows"]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="bmm,sdpa,linear", help="ops to run (bmm, sdpa, linear)")
    parser.add_argument("--candidates", action="store_true", help="time every candidate of each product's key")
    parser.add_argument("--seconds", type=float, default=0.3, help="timing budget of a row, each way")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="the rows shrunk on the CPU device (kernels interpreted), host clock: the script runs")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        os.environ["NBX_DEVICE"] = "cpu"
    import sweep
    import nbxtensor as nbx
    import torch  # the comparison only
    from nbxtensor.device import backend_for

    device = "cpu" if args.cpu_smoke else "cuda"
    synchronize = (lambda: None) if args.cpu_smoke else torch.cuda.synchronize
    env = sweep.Env(nbx, torch, device)
    facts = backend_for(nbx.device(device)).facts
    l2_bytes = int(facts.get("l2_cache_bytes", 128 << 20))
    if args.cpu_smoke:
        timer, name = sweep.HostTimer(), "CPU (Triton interpreter), host clock"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        timer, name = sweep.GpuTimer(nbx, torch, l2_bytes), nbx.cuda.get_device_name()
    out_dir = Path(os.environ.get("OUT", "."))
    wanted = set(args.only.split(","))
    print(f"{name}; torch {torch.__version__}; every call after an L2 flush", flush=True)
    chosen = [(op, p, dtype) for op, p, dtype in ROWS if op in wanted]
    if args.cpu_smoke:  # a batch of 2 and sides an eighth as long, at least 16
        chosen = [(op, {name: value if isinstance(value, bool) or name in ("heads", "kv_heads")
                        else 2 if name == "batch" else max(16, value // 8) for name, value in p.items()}, dtype)
                  for op, p, dtype in chosen]
    else:
        # every row's first call (compiling its key's candidates: the earlier ones are among them) in worker
        # processes first, as sweep.py does, so that the timed run loads kernels from Triton's disk cache
        workers = min(len(chosen), sweep.PRECOMPILE_WORKERS, max(1, (os.cpu_count() or 2) - 1))
        sweep.precompile([sweep.Case(op, op, tuple(sorted(p.items())), dtype, []) for op, p, dtype in chosen],
                         workers, "cuda", PRECOMPILE_S)
    rows = []
    for op, p, dtype in chosen:
        label = f"{op} {sweep.describe(op, p)} {dtype}"
        built = sweep.BUILDERS[op](env, p, dtype)
        row = dict(op=op, params=p, dtype=dtype, label=label)
        for phase in ("before", "after"):
            restore = _before(op) if phase == "before" else (lambda: None)
            try:
                _store(out_dir, phase)
                start = time.perf_counter()
                ours = sweep._first(built.ours())
                synchronize()
                first_s = time.perf_counter() - start
                check = sweep.relative_diff(env, ours, sweep._first(built.theirs()))
                ours_ms, torch_ms = timer.pair(built.ours, built.theirs, args.seconds)
                row[phase] = dict(ours_ms=ours_ms, torch_ms=torch_ms, ratio=torch_ms / ours_ms, check=check,
                                  check_ok=check <= built.rtol, first_call_s=first_s,
                                  tuned={key: entry["config"] for key, entry in nbx.tuning.entries(device).items()})
            except Exception as error:  # noqa: BLE001  (a failing row is reported, the run goes on)
                row[phase] = dict(error=f"{type(error).__name__}: {error}")
            finally:
                restore()
            shown = row[phase]
            if op == "sdpa" and "error" not in shown:
                shown["form"] = _form(next((config for key, config in shown["tuned"].items()
                                            if key.startswith("attention|")), None))
            print(f"{label:48s} {phase:6s} " + (f"ours {shown['ours_ms'] * 1e3:8.1f} us  torch "
                                                f"{shown['torch_ms'] * 1e3:8.1f} us  torch/ours {shown['ratio']:5.2f}  "
                                                f"check {shown['check']:.2g}{'' if shown['check_ok'] else ' FAILED'}  "
                                                f"first call {shown['first_call_s']:.1f} s"
                                                if "error" not in shown else shown["error"]), flush=True)
            if "form" in shown:
                print(f"{'':48s} {phase:6s} the tuner chose {shown['form']}", flush=True)
        if args.candidates:
            try:
                chosen = next((config for key, config in row["after"].get("tuned", {}).items()
                               if key.startswith("attention|")), None)
                row["candidates"] = _candidates(sweep, env, op, p, dtype, 0 if args.cpu_smoke else 2 * l2_bytes,
                                                built, chosen)
            except Exception as error:  # noqa: BLE001
                print(f"    candidates: {type(error).__name__}: {error}", flush=True)
        rows.append(row)
    print(f"\n{'row':48s} {'before us':>10s} {'after us':>9s} {'torch us':>9s} {'before':>7s} {'after':>6s}")
    for row in rows:
        before, after = row["before"], row["after"]
        if "error" in before or "error" in after:
            print(f"{row['label']:48s} error")
            continue
        print(f"{row['label']:48s} {before['ours_ms'] * 1e3:10.1f} {after['ours_ms'] * 1e3:9.1f} "
              f"{after['torch_ms'] * 1e3:9.1f} {before['ratio']:7.2f} {after['ratio']:6.2f}"
              + (f"  after: {after['form']}" if "form" in after else ""))
    with open(out_dir / "gpu_bmm.json", "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
