"""The ``nbx`` command line."""
from __future__ import annotations

import argparse
import sys


def _info(_args) -> int:
    import triton
    import yaml

    import nbxtensor as nbx
    from nbxtensor import _runtime
    from nbxtensor.device import available_backends

    print(f"nbxtensor {nbx.__version__}")
    print(f"triton {triton.__version__}")
    print(f"python {sys.version.split()[0]}")
    print(f"kernels: {_runtime.KERNEL_MODE}"
          + (" (Triton interpreter on host memory)" if _runtime.KERNEL_MODE == _runtime.INTERPRETED else ""))
    print(f"default device: {nbx.default_device()}")
    for name, backend in sorted(available_backends().items()):
        print(f"device {name}: {backend.device_count()} found")
        for key, value in backend.describe().items():
            if key != "type":
                print(f"  {key}: {value}")
        facts = backend.facts
        print(f"  facts in force: {facts['name']}" + (" (no facts file matches this GPU; derived from its driver "
                                                      "properties)" if facts.get("derived") else ""))
        for line in yaml.safe_dump({k: v for k, v in facts.items() if k not in ("name", "match", "derived")},
                                   default_flow_style=None, sort_keys=False).splitlines():
            print(f"    {line}")
    return 0


def _example(_args) -> int:
    import nbxtensor as nbx

    x = nbx.arange(12, dtype=nbx.float32).reshape(3, 4)
    print("x =", x)
    print("x.T[1:, ::2] =", x.T[1:, ::2])
    print("cat([x, x.half()]) dtype:", nbx.cat([x, x.half()]).dtype)
    print("as NumPy:", x.T.contiguous().numpy().tolist())
    return 0


def _demo(args) -> int:
    from nbxtensor import demo

    return demo.run(device=args.device)


def _dims(pairs) -> dict[str, int]:
    dims = {}
    for pair in pairs or ():
        name, _, value = pair.partition("=")
        dims[name] = int(value)
    return dims


def _floor_rate(table, dtype_name=None):
    """A measured rate when the facts have one, else the first listed (per dtype for FLOPs when known)."""
    if not isinstance(table, dict) or not table:
        return None, None
    for key in [k for k in table if k.startswith("measured")] + [k for k in table if dtype_name and dtype_name in k] + list(table):
        return table[key], key


def _plan(args) -> int:
    from nbxtensor import graph
    from nbxtensor.device import backend_for, resolve
    from nbxtensor.device.facts import load as load_facts

    model = graph.load(args.model_dir, device="cpu")
    values = {**model.trace_values(), **_dims(args.dim)}
    memory_plan = model.plan(values)
    priced = model.costs(values)
    flops = sum(cost.flops for _, cost in priced)
    moved = sum(cost.bytes_moved for _, cost in priced)
    facts = load_facts(args.facts) if args.facts else backend_for(resolve(None)).facts
    print(f"graph: {args.model_dir} ({len(model.steps)} ops), symbols: {values}")
    print(f"weights bytes: {model.weight_bytes()}")
    print(f"planned activation peak: {memory_plan.peak_bytes} bytes: the arena {memory_plan.arena_bytes} "
          f"(intermediates and op workspaces, {memory_plan.alignment}-byte aligned) and the outputs "
          f"{memory_plan.output_bytes}")
    print(f"naive sum of intermediates and workspaces: {memory_plan.naive_bytes} bytes; most live at one step: "
          f"{memory_plan.live_peak_bytes}")
    print(f"workspaces (cost rules, in the arena): peak {memory_plan.workspace_peak_bytes}, total "
          f"{memory_plan.workspace_total_bytes} bytes")
    print(f"FLOPs: {flops}; bytes moved: {moved}")
    bandwidth, bandwidth_key = _floor_rate(facts.get("bandwidth_bytes_per_s"))
    peak, peak_key = _floor_rate(facts.get("flops_per_s"))
    print(f"facts: {facts['name']}")
    if bandwidth:
        print(f"  memory floor: {moved / bandwidth * 1e6:.3f} us ({bandwidth_key} {bandwidth:.3g} B/s)")
    if peak:
        print(f"  compute floor: {flops / peak * 1e6:.3f} us ({peak_key} {peak:.3g} FLOP/s)")
    if not bandwidth and not peak:
        print("  no bandwidth or FLOP rate in these facts; pass --facts hopper (or another class) to price")
    return 0


def _run(args) -> int:
    import os

    import numpy as np

    from nbxtensor import graph

    model = graph.load(args.model_dir, device=args.device)
    given = dict(pair.split("=", 1) for pair in args.input or ())
    names = [tensor_id.removeprefix("input::") for tensor_id in model.inputs]
    missing = [name for name in names if name not in given]
    if missing:
        print(f"nbx run: missing --input for {', '.join(missing)} (inputs: {', '.join(names)})", file=sys.stderr)
        return 2
    results = model(*[np.load(given[name]) for name in names])
    results = results if isinstance(results, tuple) else (results,)
    os.makedirs(args.out, exist_ok=True)
    for tensor_id, result in zip(model.outputs, results):
        array = result.cpu().numpy()
        path = os.path.join(args.out, tensor_id.replace("::", "_").replace("/", "_") + ".npy")
        np.save(path, array)
        summary = f"min {array.min():.6g} max {array.max():.6g} mean {array.astype(np.float64).mean():.6g}" if array.size else "empty"
        print(f"{tensor_id}: {array.dtype}{list(array.shape)} {summary} -> {path}")
    return 0


def _export(args) -> int:
    from nbxtensor.export import CommandError, ExportError

    try:
        from nbxtensor.export.command import run
    except ImportError as missing:
        print(f"nbx export: needs PyTorch (the exporter is the one part of nbxtensor that uses it): "
              f"python3 -m pip install -e \".[export]\" ({missing})", file=sys.stderr)
        return 2
    try:
        if args.out_dir and args.out and args.out_dir != args.out:
            raise CommandError(f"two output folders, {args.out_dir} and --out {args.out}: give one")
        if not (args.out_dir or args.out):
            raise CommandError("no output folder: nbx export MODEL OUT")
        return run(args.model, args.input or (), args.dynamic or (), args.out_dir or args.out, task=args.task,
                   with_attention_mask=args.with_attention_mask)
    except (CommandError, ExportError) as error:
        print(f"nbx export: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nbx", description="nbxtensor: tensors and Triton kernels, no torch")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, Triton, devices and the facts in force").set_defaults(run=_info)
    sub.add_parser("example", help="a short tensor example on the default device").set_defaults(run=_example)
    demo = sub.add_parser("demo", help="embed a few sentences with all-MiniLM-L6-v2 (needs the demo extra)")
    demo.add_argument("--device", default=None, help="default: the GPU when present, else the CPU")
    demo.set_defaults(run=_demo)
    plan = sub.add_parser("plan", help="a graph's weights, planned activation memory, FLOPs and time floor")
    plan.add_argument("model_dir")
    plan.add_argument("--dim", action="append", metavar="SYMBOL=VALUE", help="a symbol's value (default: traced)")
    plan.add_argument("--facts", help="price on this facts class (e.g. hopper) instead of the default device's")
    plan.set_defaults(run=_plan)
    run = sub.add_parser("run", help="run a graph on .npy inputs and write its outputs as .npy")
    run.add_argument("model_dir")
    run.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    run.add_argument("--out", default=".", help="folder for the outputs (default: here)")
    run.add_argument("--device", default=None)
    run.set_defaults(run=_run)
    exporter = sub.add_parser("export", help="export a PyTorch module or a Hugging Face checkpoint directory to a "
                                             "graph folder (needs the export extra; checkpoints also transformers)")
    exporter.add_argument("model", metavar="CHECKPOINT_DIR|MODULE:NAME",
                          help="a directory save_pretrained wrote (config.json and safetensors), or a module, or a "
                               "function or class that makes one, as package.module:name or file.py:name")
    exporter.add_argument("out_dir", nargs="?", metavar="OUT", help="the graph folder to write (or --out)")
    exporter.add_argument("--input", action="append", metavar="NAME=DTYPE[SHAPE]|NAME=FILE.npy",
                          help="an example input, in the order forward takes them (e.g. x=float32[2,16])")
    exporter.add_argument("--dynamic", action="append", metavar="INPUT.AXIS=SYMBOL[:MIN:MAX]",
                          help="a dimension that varies at run time (e.g. x.0=batch:1:64); on a checkpoint, "
                               "renames or rebounds the inferred batch, seq or decoder_seq there")
    exporter.add_argument("--out", help="the graph folder to write")
    exporter.add_argument("--task", help="with a checkpoint: feature-extraction (last_hidden_state), causal-lm "
                                         "(logits) or seq2seq (logits, from input_ids and decoder_input_ids)")
    exporter.add_argument("--with-attention-mask", action="store_true",
                          help="with a checkpoint: take attention_mask (int64, the shape of input_ids) as an input too")
    exporter.set_defaults(run=_export)
    args = parser.parse_args(argv)
    if args.command in ("plan", "run"):
        from nbxtensor.graph import GraphError
        try:
            return args.run(args)
        except GraphError as error:
            print(f"nbx {args.command}: {error}", file=sys.stderr)
            return 1
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
