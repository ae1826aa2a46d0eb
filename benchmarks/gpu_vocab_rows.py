"""The vocabulary-row cases of the model-shape sweep (cumsum for top-p, top-k for sampling, softmax) against
torch, timed as ``sweep.py`` times them (its builders and checks; torch in alternating batches, every call
after an L2 flush) and, apart, the host cost of a call. One call on a CUDA GPU:

    python3 benchmarks/gpu_vocab_rows.py [--seconds-per-case 0.3]

Prints per row: our device ms, torch's, torch / ours, the floor (bytes at the facts' bandwidth), the check,
and our and torch's host microseconds a call (the mean of back-to-back calls, the device left to catch up
after every batch); then many-row top-k through the segment selection as well ("(segments)"), which
today's routing sends to the radix select, and softmax rows the facts hold in registers split in chunks as
well ("(split)": ``softmax_resident_max`` lowered to the norms' ``row_resident_max``), so that one run times
both sides of that line; writes gpu_vocab_rows.json to $OUT."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import sweep  # noqa: E402  (the builders, checks, timer and floors of the model-shape sweep)

# (op, params, dtype): the sweep's rows below 0.9x in its 2026-12-06 H100 run, and their 1-row and 64-row
# neighbours, so that a change for one does not pass by costing another
CASES = [
    ("cumsum", dict(rows=1, cols=16032), "float32"),
    ("cumsum", dict(rows=1, cols=32000), "float32"),
    ("cumsum", dict(rows=1, cols=50257), "float32"),
    ("cumsum", dict(rows=1, cols=128256), "float32"),
    ("cumsum", dict(rows=1, cols=256000), "float32"),
    ("cumsum", dict(rows=64, cols=50257), "float32"),
    ("cumsum", dict(rows=64, cols=128256), "float32"),
    ("cumsum", dict(rows=512, cols=8192), "float32"),  # many rows that split now, read twice
    ("topk", dict(rows=1, cols=16032, k=50), "float32"),
    ("topk", dict(rows=1, cols=51865, k=50), "float32"),
    ("topk", dict(rows=1, cols=128256, k=50), "float32"),
    ("topk", dict(rows=1, cols=256000, k=50), "float32"),
    ("topk", dict(rows=8, cols=128256, k=50), "float32"),
    ("topk", dict(rows=64, cols=128256, k=50), "float32"),
    ("softmax", dict(rows=1, cols=50257), "float32"),
    ("softmax", dict(rows=64, cols=50257), "float32"),
    ("softmax", dict(rows=64, cols=16032), "bfloat16"),
    ("softmax", dict(rows=1, cols=16032), "bfloat16"),  # a row alone in one program (held in registers)
    ("softmax", dict(rows=64, cols=32000), "bfloat16"),
    ("softmax", dict(rows=64, cols=128256), "bfloat16"),
    ("softmax", dict(rows=64, cols=152064), "bfloat16"),
    ("softmax", dict(rows=64, cols=256000), "bfloat16"),
    ("softmax", dict(rows=1, cols=51865), "float16"),
]
# many-row top-k takes the radix select where the segments' programs outnumber a wave: these rows time
# the segment selection for them too (``sorting.CANDIDATE_SEGMENT_CHEAP`` lifted), to decide that line
SELECTED_ANYWAY = [("topk", dict(rows=8, cols=128256, k=50), "float32"),
                   ("topk", dict(rows=64, cols=128256, k=50), "float32"),
                   ("topk", dict(rows=64, cols=256000, k=50), "float32")]
# softmax rows held in registers (one program a row, one launch) that these also time split in chunks (two
# launches over every SM)
SPLIT_ANYWAY = [("softmax", dict(rows=64, cols=16032), "bfloat16"), ("softmax", dict(rows=1, cols=16032), "bfloat16")]
HOST_CALLS = 200


def host_us(fn, synchronize) -> float:
    """Mean host time of a call, in batches of 20 with the device synchronised between batches."""
    total, done = 0.0, 0
    while done < HOST_CALLS:
        synchronize()
        start = time.perf_counter()
        for _ in range(20):
            fn()
        total += time.perf_counter() - start
        done += 20
    synchronize()
    return total / done * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-per-case", type=float, default=0.3)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    import nbxtensor as nbx
    import torch  # the comparison only; nbxtensor itself never imports torch
    from nbxtensor.device import backend_for
    from nbxtensor.ops import plans, sorting

    env = sweep.Env(nbx, torch, "cuda")
    env.synchronize = torch.cuda.synchronize
    facts = backend_for(nbx.device("cuda")).facts
    name = nbx.cuda.get_device_name()
    timer = sweep.GpuTimer(nbx, torch, int(facts.get("l2_cache_bytes", 128 << 20)))
    _, bandwidth = sweep.floor_rates(facts, name)
    print(f"{name}; nbxtensor {nbx.__version__}, torch {torch.__version__}; floor at {bandwidth:.3g} B/s")
    print(f"{'what':40s} {'ours ms':>8s} {'torch ms':>9s} {'ratio':>6s} {'floor ms':>9s} {'check':>9s} "
          f"{'host us':>8s} {'torch us':>9s}")
    rows = []
    cheap = sorting.CANDIDATE_SEGMENT_CHEAP
    kernel_facts = facts["kernels"]
    resident = kernel_facts["softmax_resident_max"]
    variants = ([(*case, "") for case in CASES] + [(*case, "segments") for case in SELECTED_ANYWAY]
                + [(*case, "split") for case in SPLIT_ANYWAY])
    for op, params, dtype, variant in variants:
        sorting.CANDIDATE_SEGMENT_CHEAP = sorting.SEGMENT_LIMIT if variant == "segments" else cheap
        kernel_facts["softmax_resident_max"] = kernel_facts["row_resident_max"] if variant == "split" else resident
        plans.clear_all()
        built = sweep.BUILDERS[op](env, params, dtype)
        label = f"{op} {params['rows']}x{params['cols']}" + (f" k={params['k']}" if "k" in params else "") + \
            f" {dtype}" + (f" ({variant})" if variant else "")
        ours_out, theirs_out = sweep._first(built.ours()), sweep._first(built.theirs())
        diff = built.compare(ours_out, theirs_out) if built.compare else sweep.relative_diff(env, ours_out, theirs_out)
        del ours_out, theirs_out
        ours_ms, torch_ms = timer.pair(built.ours, built.theirs, args.seconds_per_case)
        ours_host, torch_host = host_us(built.ours, env.synchronize), host_us(built.theirs, env.synchronize)
        floor_ms = built.nbytes / bandwidth * 1e3
        row = dict(case=label, ours_ms=ours_ms, torch_ms=torch_ms, ratio=torch_ms / ours_ms, floor_ms=floor_ms,
                   check=diff, check_ok=diff <= built.rtol, ours_host_us=ours_host, torch_host_us=torch_host)
        rows.append(row)
        print(f"{label:40s} {ours_ms:8.4f} {torch_ms:9.4f} {row['ratio']:6.2f} {floor_ms:9.4f} "
              f"{'ok' if row['check_ok'] else 'FAIL':>4s} {diff:4.0e} {ours_host:8.1f} {torch_host:9.1f}", flush=True)
    sorting.CANDIDATE_SEGMENT_CHEAP = cheap
    kernel_facts["softmax_resident_max"] = resident
    for op in dict.fromkeys(op for op, _, _ in CASES):
        members = [r for r in rows if r["case"].startswith(op + " ") and not r["case"].endswith(")")]
        geomean = math.exp(sum(math.log(r["ratio"]) for r in members) / len(members))
        worst = min(members, key=lambda r: r["ratio"])
        print(f"{op}: geometric mean {geomean:.2f}, worst {worst['ratio']:.2f} ({worst['case']})")
    with open(os.path.join(args.out, "gpu_vocab_rows.json"), "w") as f:
        json.dump({"device": name, "rows": rows}, f, indent=1)
    return 0 if all(r["check_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
