"""The ``nbx`` command line."""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
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


class UsageError(ValueError):
    """A command line the command cannot act on; ``main`` prints it as one line and exits with 2."""


def _device(spec):
    """The device ``--device`` names (None: the default), refused by name when this process has none."""
    from nbxtensor.device import available_backends, device, resolve

    if spec is None:
        return None
    try:
        named = device(spec)
    except (ValueError, TypeError) as error:
        raise UsageError(f"--device {spec}: {error}") from None
    backends = available_backends()
    if named.type == "meta":
        raise UsageError(f"--device {spec}: the meta device holds shapes, not data, so nothing runs there; pass "
                         f"one of {', '.join(sorted(backends))}")
    if named.type not in backends:
        remedy = ("a GPU needs an NVIDIA driver and the cuda extra (python3 -m pip install -e \".[cuda]\")"
                  if named.type == "cuda" else f"pass one of {', '.join(sorted(backends))}")
        raise UsageError(f"--device {spec}: no {named.type} device in this process (devices here: "
                         f"{', '.join(sorted(backends))}); {remedy}, or leave --device out for the default")
    if named.index is not None and named.index >= backends[named.type].device_count():
        raise UsageError(f"--device {spec}: this machine has {backends[named.type].device_count()} {named.type} "
                         f"device(s), numbered from 0")
    return resolve(named)


def _demo(args) -> int:
    from nbxtensor import demo

    device = _device(args.device)
    try:
        return demo.run(device=device)
    except ModuleNotFoundError as missing:
        if missing.name not in demo.NEEDED_PACKAGES:
            raise
        raise UsageError(str(missing)) from None


def _dims(pairs) -> dict[str, int]:
    dims = {}
    for pair in pairs or ():
        name, _, value = pair.partition("=")
        if not name or not value.strip().isdigit():
            raise UsageError(f"--dim {pair!r}: write SYMBOL=VALUE with a non-negative integer value, e.g. batch=8")
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
    try:
        facts = load_facts(args.facts) if args.facts else backend_for(resolve(None)).facts
    except FileNotFoundError as error:
        raise UsageError(f"--facts {args.facts}: {error}") from None
    print(f"graph: {args.model_dir} ({len(model.steps)} ops), symbols: {values}")
    print(f"weights bytes: {model.weight_bytes()}")
    print(f"planned activation peak: {memory_plan.peak_bytes} bytes: the arena (intermediates, outputs and op "
          f"workspaces, {memory_plan.alignment}-byte aligned)")
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


def _is_checkpoint(directory: str) -> bool:
    """A Hugging Face checkpoint directory (config.json) rather than a graph folder (graph.json)."""
    return (os.path.isfile(os.path.join(directory, "config.json"))
            and not os.path.isfile(os.path.join(directory, "graph.json")))


def _model_keys(args, facts: dict):
    """(launch key -> count, one line describing what was counted) of ``args.model_dir``'s runs: a graph
    folder's for its symbol values, or an LLM checkpoint's prefills and decode buckets."""
    from nbxtensor import graph
    from nbxtensor.census import census

    if _is_checkpoint(args.model_dir):
        from nbxtensor import llm
        from nbxtensor.llm.census import checkpoint_census
        from nbxtensor.llm.model import DEFAULT_PREFILL_CHUNK
        if args.dim:
            raise UsageError("--dims apply to a graph folder; an LLM checkpoint takes --batch-sizes and --context")
        try:
            keys, settings = checkpoint_census(args.model_dir, facts, dtype=args.dtype, batch_sizes=args.batch_sizes,
                                               context=args.context,
                                               prefill_chunk=DEFAULT_PREFILL_CHUNK if args.prefill_chunk is None
                                               else args.prefill_chunk, fp8_activations=args.fp8_activations)
        except (llm.CheckpointError, ValueError, TypeError) as error:
            raise UsageError(str(error)) from None
        return keys, f"LLM checkpoint: {args.model_dir}, " + ", ".join(f"{k} {v}" for k, v in settings.items())
    if (args.batch_sizes or args.context is not None or args.dtype or args.prefill_chunk is not None
            or args.fp8_activations is not None):
        raise UsageError("--batch-sizes, --context, --dtype, --prefill-chunk and --fp8-activations apply to an LLM "
                         "checkpoint; a graph folder takes --dims")
    model = graph.load(args.model_dir, weights=False)
    values = {**model.trace_values(), **_dims(args.dim)}
    model.check_symbols(values)
    return census(model, values, facts), f"graph: {args.model_dir} ({len(model.steps)} ops), symbols: {values}"


def _census(args) -> int:
    from nbxtensor.device import backend_for, resolve
    from nbxtensor.device.facts import load as load_facts

    try:
        facts = load_facts(args.facts) if args.facts else backend_for(resolve(None)).facts
    except FileNotFoundError as error:
        raise UsageError(f"--facts {args.facts}: {error}") from None
    keys, described = _model_keys(args, facts)
    print(described)
    print(f"launch keys: {len(keys)} distinct, formed by {sum(keys.values())} launches")
    for key, count in sorted(keys.items()):
        print(f"{count:6d}  {key}")
    return 0


def _tune(args) -> int:
    from nbxtensor import certify, tuning
    from nbxtensor.device import backend_for, resolve

    if (args.model_dir or args.key) and not args.certify:
        raise UsageError("nbx tune tunes ahead of time only with certification: add --certify")
    if not (args.model_dir or args.key or args.import_file or args.export_file):
        raise UsageError("nothing to do: give MODEL_DIR or --key KEY with --certify, --import FILE or --export FILE")
    if (args.dim or args.batch_sizes or args.context is not None or args.dtype or args.prefill_chunk
            or args.fp8_activations is not None) and not args.model_dir:
        raise UsageError("--dims, --batch-sizes, --context, --dtype, --prefill-chunk and --fp8-activations apply to a "
                         "MODEL_DIR's census")
    device = _device(args.device)
    if args.import_file:
        try:
            imported = tuning.import_store(args.import_file)
        except tuning.StoreFileError as error:
            raise UsageError(str(error)) from None
        print(f"imported {sum(imported.values())} entries from {args.import_file}: "
              + (", ".join(f"{name} {count}" for name, count in sorted(imported.items())) or "none"))
    reports = []
    if args.model_dir:
        keys, described = _model_keys(args, backend_for(resolve(device)).facts)
        print(f"{described}; {len(keys)} launch keys")
        reports += certify.certify_keys(keys, device, again=args.again)
    if args.key:
        try:
            for key in args.key:
                certify.parse_key(key)
            reports += certify.certify_keys(args.key, device, again=args.again)
        except certify.MalformedKey as error:
            raise UsageError(f"--key: {error}") from None
    for report in reports:
        detail = (report.get("why") or ", ".join(f"{k}={v}" for k, v in (report["config"] or {}).items()))
        refused = f"; {len(report['refused'])} refused" if report["refused"] else ""
        print(f"{report['status']:>13}  {report['key']}  [{report['op']}] {detail}{refused}")
        for item in report["refused"] if args.verbose else ():
            print(f"{'':>15}refused {item['config']}: {item['reason']}")
    if reports:
        counts = {status: sum(r["status"] == status for r in reports)
                  for status in ("certified", "kept", "refused", "uncertifiable")}
        print(f"{len(reports)} launch keys: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n)
              + f"; store: {tuning.cache_path(device)}")
    if args.export_file:
        written = tuning.export_store(args.export_file)
        print(f"exported {written} entries to {args.export_file}")
    failed = [r["key"] for r in reports if r["status"] in ("refused", "uncertifiable")]
    if failed:
        print(f"nbx tune: {len(failed)} launch keys have no certified setting, so a certified-only run forming "
              f"them stops: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _read_array(name: str, path: str):
    import numpy as np

    if not os.path.isfile(path):
        raise UsageError(f"--input {name}={path}: no file {path}; write the array with numpy.save and pass its path")
    try:
        return np.load(path)
    except (ValueError, OSError, EOFError):  # NumPy's messages may quote the file's bytes: name the file only
        raise UsageError(f"--input {name}={path}: not a .npy file NumPy can read without pickle; write the array "
                         f"with numpy.save") from None


def _run(args) -> int:
    import numpy as np

    from nbxtensor import graph, progress, tuning

    given = {}
    for pair in args.input or ():
        name, _, path = pair.partition("=")
        if not name or not path:
            raise UsageError(f"--input {pair!r}: write NAME=FILE.npy")
        given[name] = path
    model = graph.load(args.model_dir, device=_device(args.device))
    names = [tensor_id.removeprefix("input::") for tensor_id in model.inputs]
    missing = [name for name in names if name not in given]
    unknown = [name for name in given if name not in names]
    if missing or unknown:
        problems = ([f"missing --input for {', '.join(missing)}"] if missing else []) + \
                   ([f"the graph has no input {', '.join(unknown)}"] if unknown else [])
        raise UsageError(f"{'; '.join(problems)}; give --input NAME=FILE.npy for each of its inputs: {', '.join(names)}")
    arrays = [_read_array(name, given[name]) for name in names]
    try:
        with progress.task(f"running {args.model_dir}"), \
                (tuning.certified_only() if args.certified_only else contextlib.nullcontext()):
            results = model(*arrays)
    except graph.GraphError as failed:
        if not isinstance(failed.__cause__, tuning.TuningKeyMissing):
            raise
        values = model.bind([tuple(np.shape(array)) for array in arrays])
        dims = "".join(f" {name}={value}" for name, value in values.items())
        raise UsageError(f"{failed.__cause__}; for every key of these shapes: nbx tune {shlex.quote(args.model_dir)} "
                         f"--certify" + (f" --dims{dims}" if dims else "")) from None
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
    try:
        from nbxtensor.export.command import run
    except ImportError as missing:
        raise UsageError(f"needs PyTorch (the exporter is the one part of nbxtensor that uses it): "
                         f"python3 -m pip install -e \".[export]\" ({missing})") from None
    if args.out_dir and args.out and args.out_dir != args.out:
        raise UsageError(f"two output folders, {args.out_dir} and --out {args.out}: give one")
    if not (args.out_dir or args.out):
        raise UsageError("no output folder: nbx export MODEL OUT")
    return run(args.model, args.input or (), args.dynamic or (), args.out_dir or args.out, task=args.task,
               with_attention_mask=args.with_attention_mask)


def _generate(args) -> int:
    import time

    from nbxtensor import llm

    device = _device(args.device)
    if not os.path.isdir(args.checkpoint):
        raise UsageError(f"{args.checkpoint}: no such directory; pass a Hugging Face checkpoint directory "
                         f"(config.json, safetensors, tokenizer.json)")
    try:
        model = llm.load(args.checkpoint, device=device, dtype=args.dtype, quantize=_quantize(args),
                         fp8_activations=args.fp8_activations)
        prompt = model.encode(args.prompt if model.tokenizer is not None or not args.prompt.replace(",", "").isdigit()
                              else [int(t) for t in args.prompt.split(",")])
        settings = {name: getattr(args, name) for name in ("max_new_tokens", "temperature", "top_k", "top_p", "min_p",
                                                           "repetition_penalty", "seed")}
        start = time.perf_counter()
        produced = 0
        for piece in model.stream(prompt, **settings):
            print(piece if isinstance(piece, str) else f"{piece} ", end="", flush=True)
            produced += 1
        total = time.perf_counter() - start
    except (llm.CheckpointError, ValueError, TypeError, NotImplementedError, ImportError) as error:
        raise UsageError(str(error)) from None
    engine = model.engine
    decode_rate = f"{(produced - 1) / engine.decode_seconds:.1f}" if produced > 1 and engine.decode_seconds else "-"
    print(f"\n[{len(prompt)} prompt tokens at {len(prompt) / engine.prefill_seconds:.1f} tokens/s; "
          f"{produced} new in {total:.2f} s, decode {decode_rate} tokens/s]", file=sys.stderr)
    return 0


def _chat(args) -> int:
    from nbxtensor import llm

    device = _device(args.device)
    if not os.path.isdir(args.checkpoint):
        raise UsageError(f"{args.checkpoint}: no such directory; pass a Hugging Face checkpoint directory "
                         f"(config.json, safetensors, tokenizer.json, tokenizer_config.json with a chat_template)")
    interactive = sys.stdin.isatty()
    try:
        model = llm.load(args.checkpoint, device=device, dtype=args.dtype, quantize=_quantize(args),
                         fp8_activations=args.fp8_activations)
        settings = {name: getattr(args, name) for name in ("max_new_tokens", "temperature", "top_k", "top_p", "min_p",
                                                           "repetition_penalty", "seed")}
        messages = [{"role": "system", "content": args.system}] if args.system else []
        model.chat_prompt(messages + [{"role": "user", "content": ""}])  # a template that fails, fails now
        while True:
            if interactive:
                print("> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line or line.strip() in ("/exit", "/quit"):
                break
            if not line.strip():
                continue
            messages.append({"role": "user", "content": line.rstrip("\n")})
            reply = ""
            for piece in model.stream(model.chat_prompt(messages), **settings):
                print(piece, end="", flush=True)
                reply += piece
            print(flush=True)
            messages.append({"role": "assistant", "content": reply})
    except (llm.CheckpointError, llm.TemplateError, ValueError, TypeError, NotImplementedError,
            ImportError) as error:
        raise UsageError(str(error)) from None
    return 0


def _quantize(args):
    if args.quantize is None:
        if args.group_size is not None:
            raise UsageError("--group-size applies to --quantize int4")
        return None
    return {"format": args.quantize, "group_size": args.group_size or 128}


def _quantize_checkpoint(args) -> int:
    from nbxtensor import llm
    from nbxtensor.llm.quantized import write_quantized
    from nbxtensor.quant import QuantizationError

    if not os.path.isdir(args.checkpoint):
        raise UsageError(f"{args.checkpoint}: no such directory; pass a Hugging Face checkpoint directory")
    try:
        spec = write_quantized(args.checkpoint, args.out, args.format, args.group_size)
    except (llm.CheckpointError, QuantizationError, ValueError, OSError) as error:
        raise UsageError(str(error)) from None
    print(f"wrote {args.out} ({spec['quant_method']})", file=sys.stderr)
    return 0


def _sampling_flags(command) -> None:
    command.add_argument("--max-new-tokens", type=int, default=None, help="how many tokens at most (default 32)")
    command.add_argument("--temperature", type=float, default=None, help="0 for greedy (the default unless the "
                                                                         "checkpoint samples)")
    command.add_argument("--top-k", type=int, default=None, help="keep the k likeliest tokens (0: all)")
    command.add_argument("--top-p", type=float, default=None, help="keep the likeliest tokens up to this mass")
    command.add_argument("--min-p", type=float, default=None, help="drop tokens below this share of the likeliest")
    command.add_argument("--repetition-penalty", type=float, default=None, help="above 1 discourages repeats")
    command.add_argument("--seed", type=int, default=None, help="the draw's seed: the same seed, the same tokens")
    command.add_argument("--dtype", default=None, help="float32, float16 or bfloat16 (default: the checkpoint's)")
    command.add_argument("--device", default=None, help="cpu or cuda[:N] (default: the GPU when present, else the CPU)")
    command.add_argument("--quantize", choices=("int4", "int8", "fp8"), default=None,
                         help="round a float checkpoint's linear layers to nearest on load: int4 in groups, int8 or "
                              "fp8 per channel")
    command.add_argument("--group-size", type=int, default=None, help="inputs per int4 group (default 128)")
    command.add_argument("--fp8-activations", action=argparse.BooleanOptionalAction, default=None,
                         help="round prefill rows to float8 for fp8 weights' products on the float8 matrix units "
                              "(default: where the checkpoint quantizes activations per row, as fbgemm_fp8 does)")


def _engine_flags(command) -> None:
    command.add_argument("--batch-sizes", action="extend", nargs="+", type=int, metavar="N",
                         help="an LLM checkpoint's decode batch sizes (default: 1 to 256, replayed in buckets)")
    command.add_argument("--context", type=int, help="an LLM checkpoint's longest prompt (default: its context)")
    command.add_argument("--dtype", help="an LLM checkpoint's dtype (default: the checkpoint's)")
    command.add_argument("--prefill-chunk", type=int, help="an LLM checkpoint's prefill chunk (default: the engine's, "
                                                           "llm.model.DEFAULT_PREFILL_CHUNK)")
    command.add_argument("--fp8-activations", action=argparse.BooleanOptionalAction, default=None,
                         help="an LLM checkpoint's prefill rows rounded to float8 for its fp8 weights (default: as "
                              "the checkpoint says, as nbx generate decides)")


def parser() -> argparse.ArgumentParser:
    """The ``nbx`` command line: every command and option with its help."""
    from nbxtensor._version import __version__

    top = argparse.ArgumentParser(prog="nbx", description="nbxtensor: tensors and Triton kernels, no torch")
    top.add_argument("--version", action="version", version=f"nbxtensor {__version__}",
                     help="print nbxtensor's version and exit")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND",
                             help="what to do; nbx COMMAND --help describes each")
    sub.add_parser("info", help="version, Triton, devices and the facts in force",
                   description="Print the versions, the kernel mode, each device and its facts.").set_defaults(run=_info)
    sub.add_parser("example", help="a short tensor example on the default device",
                   description="Run a short tour of the tensor API.").set_defaults(run=_example)
    demo = sub.add_parser("demo", help="embed a few sentences with all-MiniLM-L6-v2 (needs the demo extra)",
                          description="Embed five sentences with the embedded all-MiniLM-L6-v2 graph and print "
                                      "their cosine similarities.")
    demo.add_argument("--device", default=None, help="cpu or cuda[:N] (default: the GPU when present, else the CPU)")
    demo.set_defaults(run=_demo)
    plan = sub.add_parser("plan", help="a graph's weights, planned activation memory, FLOPs and time floor",
                          description="Price a graph folder: weights, the memory plan, FLOPs, bytes moved and "
                                      "the time floors of a device class.")
    plan.add_argument("model_dir", metavar="MODEL_DIR", help="a graph folder (graph.json and its safetensors)")
    plan.add_argument("--dim", action="append", metavar="SYMBOL=VALUE",
                      help="a symbol's value, repeatable (default: the value traced at export)")
    plan.add_argument("--facts", help="price on this facts class (e.g. hopper) instead of the default device's")
    plan.set_defaults(run=_plan)
    counted = sub.add_parser("census", help="every launch key a graph's run forms, and how many steps form it",
                             description="List the tuning cache's launch keys a run of a graph folder forms, from "
                                         "its metadata and a device class's facts alone (nothing is allocated or "
                                         "launched), each with the count of steps that form it.")
    counted.add_argument("model_dir", metavar="MODEL_DIR", help="a graph folder (graph.json), or a Hugging Face "
                                                                "decoder checkpoint (config.json) for the LLM engine")
    counted.add_argument("--dim", "--dims", action="extend", nargs="+", metavar="SYMBOL=VALUE",
                         help="symbol values (default: the values traced at export)")
    counted.add_argument("--facts", help="the keys of this facts class (e.g. hopper) instead of the default device's")
    _engine_flags(counted)
    counted.set_defaults(run=_census)
    run = sub.add_parser("run", help="run a graph on .npy inputs and write its outputs as .npy",
                         description="Run a graph folder on inputs saved with numpy.save; each output is written "
                                     "to OUT as one .npy file, named after its tensor id, and summarised.")
    run.add_argument("model_dir", metavar="MODEL_DIR", help="a graph folder (graph.json and its safetensors)")
    run.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                     help="an input of the graph by name, repeatable: one for each input")
    run.add_argument("--out", default=".", help="folder for the outputs (default: here)")
    run.add_argument("--device", default=None, help="cpu or cuda[:N] (default: the GPU when present, else the CPU)")
    run.add_argument("--certified-only", action="store_true",
                     help="never tune: a launch key without a certified setting stops the run, naming the command "
                          "that certifies it (as NBX_CERTIFIED_ONLY=1)")
    run.set_defaults(run=_run)
    tune = sub.add_parser("tune", help="tune and certify a graph's launch keys ahead of time; export or import the "
                                       "tuning store",
                          description="Tune every launch key the census of a graph folder names (or the --key "
                                      "given), choosing only among settings whose output on the key's "
                                      "representative shapes matches a float64 reference; refused settings are "
                                      "kept with their reason. --import merges a store file first, --export "
                                      "writes the store to one file last.")
    tune.add_argument("model_dir", nargs="?", metavar="MODEL_DIR", help="a graph folder (graph.json), or a Hugging "
                                                                      "Face decoder checkpoint (config.json)")
    _engine_flags(tune)
    tune.add_argument("--certify", action="store_true", help="certify each setting against a float64 reference "
                                                             "(required to tune)")
    tune.add_argument("--dim", "--dims", action="extend", nargs="+", metavar="SYMBOL=VALUE",
                      help="symbol values of the census (default: the values traced at export)")
    tune.add_argument("--key", action="append", metavar="KEY", help="a launch key to certify, repeatable")
    tune.add_argument("--again", action="store_true", help="certify keys that already hold a certified setting")
    tune.add_argument("--device", default=None, help="cpu or cuda[:N] (default: the GPU when present, else the CPU)")
    tune.add_argument("--import", dest="import_file", metavar="FILE", help="merge a store file into this store first")
    tune.add_argument("--export", dest="export_file", metavar="FILE", help="write the store to one file last")
    tune.add_argument("--verbose", action="store_true", help="list each refused setting with its reason")
    tune.set_defaults(run=_tune)
    exporter = sub.add_parser("export", help="export a PyTorch module or a Hugging Face checkpoint directory to a "
                                             "graph folder (needs the export extra; checkpoints also transformers)",
                              description="Export a PyTorch module (with example inputs) or a Hugging Face "
                                          "checkpoint directory (for a task) to a graph folder.")
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
    generate = sub.add_parser("generate", help="continue a prompt with a Hugging Face decoder checkpoint (Llama, "
                                               "Mistral, Qwen2, Qwen3, Phi-3, Gemma, Gemma 2)",
                              description="Load a decoder checkpoint directory and stream the continuation of "
                                          "a prompt; sampling settings default to its generation_config.json.")
    generate.add_argument("checkpoint", metavar="CHECKPOINT_DIR", help="config.json, safetensors and tokenizer.json")
    generate.add_argument("--prompt", required=True,
                          help="the text to continue (or comma-separated token ids for a checkpoint without tokenizer)")
    _sampling_flags(generate)
    generate.set_defaults(run=_generate)
    chat = sub.add_parser("chat", help="chat with a Hugging Face decoder checkpoint through its chat template",
                          description="Read one user message a line from standard input (until end of input or "
                                      "/exit), apply the checkpoint's chat template to the conversation so far and "
                                      "stream each reply; sampling settings default to its generation_config.json.")
    chat.add_argument("checkpoint", metavar="CHECKPOINT_DIR",
                      help="config.json, safetensors, tokenizer.json and tokenizer_config.json (its chat_template)")
    chat.add_argument("--system", default=None, help="a system message to open the conversation with")
    _sampling_flags(chat)
    chat.set_defaults(run=_chat)
    quantize = sub.add_parser("quantize", help="write a quantized copy of a Hugging Face decoder checkpoint",
                              description="Round the decoder's linear layers to nearest and write them with the "
                                          "other files: int4 as AWQ (GEMM packing), int8 as nbx, fp8 as fbgemm_fp8 "
                                          "(per channel).")
    quantize.add_argument("checkpoint", metavar="CHECKPOINT_DIR", help="a float checkpoint (config.json, safetensors)")
    quantize.add_argument("out", metavar="OUT", help="the directory to write")
    quantize.add_argument("--format", choices=("int4", "int8", "fp8"), default="int4", help="default int4")
    quantize.add_argument("--group-size", type=int, default=128, help="inputs per int4 group (default 128)")
    quantize.set_defaults(run=_quantize_checkpoint)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from nbxtensor.export import CommandError, ExportError
    from nbxtensor.graph import GraphError

    try:
        return args.run(args)
    except (UsageError, GraphError, CommandError, ExportError) as error:
        # one line naming the problem and its remedy; the messages are written that way
        print(f"nbx {args.command}: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
