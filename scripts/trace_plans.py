"""Print the launches a call plans under another device class's facts, on a machine without that device:
plan selection is host logic, so the kernels are not run (the planned launches are listed instead).

    python3 scripts/trace_plans.py [--facts hopper] [--multiprocessors 132]

Each row: the op and shape, then every launch (kernel, grid, programs, the constexprs that shape it), and
the bytes the launches must move at least (the input read and the output written once) with that floor
at the facts' bandwidth."""
from __future__ import annotations

import argparse

import numpy as np

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.device.facts import load
from nbxtensor.ops import normalization, plans, reductions, sorting

CASES = [  # (op, rows, cols, dtype, k)
    ("cumsum", 1, 16032, "float32", None), ("cumsum", 1, 32000, "float32", None),
    ("cumsum", 1, 50257, "float32", None), ("cumsum", 1, 128256, "float32", None),
    ("cumsum", 64, 50257, "float32", None),
    ("topk", 1, 16032, "float32", 50), ("topk", 1, 128256, "float32", 50), ("topk", 64, 128256, "float32", 50),
    ("softmax", 1, 50257, "float32", None), ("softmax", 64, 50257, "float32", None),
    ("softmax", 64, 16032, "bfloat16", None), ("softmax", 64, 128256, "bfloat16", None),
    ("softmax", 64, 152064, "bfloat16", None),
]
SHOWN = ("PHASE", "STATS", "ONE_STEP", "RESIDENT", "SEGMENT", "LENGTH", "K_OUT", "SORT_OUT", "HAS_PERM", "LEVEL",
         "BLOCK_ROWS", "BLOCK_R", "CHUNKS", "num_warps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", default="hopper")
    parser.add_argument("--multiprocessors", type=int, default=132)
    parser.add_argument("--bandwidth", type=float, default=3.35e12, help="bytes/s for the floor (H100 SXM)")
    args = parser.parse_args()
    facts = backend_for(nbx.device("cpu")).facts["kernels"]
    facts.clear()
    facts.update(load(args.facts)["kernels"])
    for module in (reductions, normalization, sorting):
        if hasattr(module, "multiprocessors"):
            module.multiprocessors = lambda dev: args.multiprocessors
    plans.clear_all()
    recorded: list = []

    def record(device, launches, workspace, tensors):
        recorded.extend((p.kernel, p.grid, p.constexprs) for p in launches)

    def record_one(kernel, grid, device, args, **constexprs):
        recorded.append((kernel, grid, constexprs))
    for module in (reductions, normalization, sorting):
        module.run_launches = record
        if hasattr(module, "launch"):  # ops that launch without a plan
            module.launch = record_one
    for op, rows, cols, dtype, k in CASES:
        recorded.clear()
        x = nbx.zeros((rows, cols), dtype=getattr(nbx, dtype))
        if op == "cumsum":
            x.cumsum(-1)
            moved = x.nbytes * 2
        elif op == "softmax":
            x.softmax(-1)
            moved = x.nbytes * 2
        else:
            try:
                nbx.topk(x, k, -1)
            except Exception:  # noqa: BLE001  (the recorder ran nothing: reading the results fails)
                pass
            moved = x.nbytes + rows * k * (x.element_size() + 8)
        name = f"{op} {rows}x{cols}{f' k={k}' if k else ''} {dtype}"
        print(f"{name}: {len(recorded)} launches, floor {moved / args.bandwidth * 1e6:.2f} us ({moved} bytes)")
        for kernel, grid, constexprs in recorded:
            shown = {key: constexprs[key] for key in SHOWN if key in constexprs}
            print(f"    {kernel.fn.__name__} grid {tuple(grid)} = {int(np.prod(grid))} programs {shown}")


if __name__ == "__main__":
    main()
