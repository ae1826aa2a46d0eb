"""Whole convolutional models on a CUDA GPU, exported and run by the graph runtime, against torch eager in
the same run (issue 26's acceptance: ResNet-50 at batch 32 and a UNet block, in a graph replay, at least
as fast as torch eager, with an activation peak at most torch's):
- torchvision's ResNet-50 (benchmarks/conv_models.py's copy of its design where torchvision is absent),
  224x224, batch 32 and 1, bf16 and fp16, NCHW and channels-last (``model.to(memory_format=...)`` and
  the input alike; one export a dtype and layout, its batch dynamic);
- a Stable Diffusion UNet's first two levels down and up (benchmarks/conv_models.py's ``UNetDownUp``:
  ResNet blocks, self- and cross-attention transformer blocks, nearest upsampling; 320 and 640 channels),
  64x64 latents, batch 2, a 77-token context, fp16, NCHW and channels-last;
- a VAE decoder block (``VAEDecoderBlock``: 512 channels, the mid block's attention over 64x64 pixels,
  three ResNet blocks, nearest upsampling to 128x128 and a 3x3 convolution there), batch 1, fp16.
Random weights, seeded (batch norms' statistics randomized too). For each: our normal path (op by op),
our replay and torch eager (no_grad), timed in alternation; checks that our output is at least as close
to a float32 run of the same (rounded) weights and inputs as torch's is (within twice its error, or a few
units of the dtype's rounding), and that the replay equals the normal path bit for bit; the activation
peak of one call of ours (measured by nbxtensor's allocator, and as planned: arena and outputs) and of
torch's (``max_memory_allocated`` minus what was held before the call, so weights are not counted).
The first call of a graph makes its plans and tunes its launch keys (a cold tuning store compiles and
times every candidate, and compiling dominates: on Hopper's facts ResNet-50 at batch 32 forms 24 keys, 400
candidates, 292 kernel specialisations to compile, the same keys whether its batch norms are folded into
the convolutions or not; the UNet's two levels at batch 2 31 keys, 513 candidates, 256 specialisations;
minutes on a cold machine): it is timed apart and printed, with the keys it tuned (each printed as its
tuning starts and ends, with its candidates and seconds, so a first call that runs long names the key it is
on), the settings it found in the store and the kernels it first launched outside tuning (``FirstCallLog``).
``--first-call-census [FACTS]`` counts those figures for every case on the CPU, against a device class's
facts (default hopper), running nothing. CONV_MODELS_CANDIDATES=N tunes each key on at most N of its
candidates, spread evenly over its list (so that its kinds of setting, plain, stepped, staged, split or
descriptor-loaded, stay represented): at 8, ResNet-50 compiles 157 specialisations and the UNet 149. What
it finds is stored as any tuning is (a later run on that store takes it): NBX_TUNING_DIR set to a scratch
folder keeps it apart.
Triton's cache and the tuning store stay on a warm machine, so a second run there times the models alone
(and a run after another that tuned the same keys, fused or not, tunes none); on a cold one,
CONV_MODELS_ONLY narrows the first run. A line is printed per model as it
ends, a table last. CONV_MODELS_SECONDS (default 150) bounds the run: models left when it has passed are
skipped and counted (the order puts the acceptance's first); CONV_MODELS_ONLY=a,b keeps the cases whose
name holds one of those words; CONV_MODELS_CUDNN_BENCHMARK=0 leaves cuDNN's own tuning off (on by
default: the eager baseline at its best); CONV_MODELS_FUSE=0 loads the graphs without the
convolution_batch_norm fusion (every batch norm and activation a pass of its own; the other fusions kept), to
time what it saves.
``--cpu-smoke``: the models at the tests' tiny sizes, float32, on the CPU device (kernels interpreted), host
clock: the script runs."""
from __future__ import annotations

import argparse
import copy
import gc
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from timing import print_checks  # noqa: E402

# (name, model, dtype, channels_last, batch), the acceptance's models first
CASES = [
    ("resnet50 b32 bf16 nchw", "resnet50", "bfloat16", False, 32),
    ("unet sd b2 fp16 nchw", "unet", "float16", False, 2),
    ("resnet50 b32 bf16 channels-last", "resnet50", "bfloat16", True, 32),
    ("vae-decoder b1 fp16 nchw", "vae", "float16", False, 1),
    ("resnet50 b1 bf16 nchw", "resnet50", "bfloat16", False, 1),
    ("unet sd b2 fp16 channels-last", "unet", "float16", True, 2),
    ("resnet50 b32 fp16 nchw", "resnet50", "float16", False, 32),
    ("resnet50 b32 fp16 channels-last", "resnet50", "float16", True, 32),
    ("resnet50 b1 bf16 channels-last", "resnet50", "bfloat16", True, 1),
    ("resnet50 b1 fp16 nchw", "resnet50", "float16", False, 1),
    ("resnet50 b1 fp16 channels-last", "resnet50", "float16", True, 1),
    ("vae-decoder b1 fp16 channels-last", "vae", "float16", True, 1),
]
# the CPU smoke run's cases: the tests' tiny sizes, float32
SMOKE_CASES = [("resnet tiny b2", "resnet50", "float32", False, 2),
               ("resnet tiny b1 channels-last", "resnet50", "float32", True, 1),
               ("unet tiny b2", "unet", "float32", False, 2), ("vae-decoder tiny b1", "vae", "float32", False, 1)]
# units of a half dtype's rounding (2^-8 for bf16, 2^-11 for fp16) an output may be off, relative to its
# largest element, where torch's own error is smaller still; float32 (the smoke run, whose reference is
# torch's own float32 run) as tests/test_conv_models.py allows
UNITS = 4
FLOAT32_TOLERANCE = 1e-4


def _build(torch, models, kind, smoke):
    """(module, example inputs for a batch) of one model, float32 on the CPU, seeded."""
    torch.manual_seed(0)
    if kind == "resnet50":
        if smoke:
            module = models.ResNet(widths=(8, 4, 8), depths=(2, 1, 1), num_classes=10)
        else:
            try:
                import torchvision
                module = torchvision.models.resnet50()
            except ImportError:
                module = models.ResNet()
        models.randomize_batch_norms(module)
        side = 32 if smoke else 224
        return module.eval(), lambda batch: (torch.randn(batch, 3, side, side),)
    if kind == "unet":
        module = (models.UNetDownUp(channels=(8, 16), heads=2, context_dim=12, groups=4) if smoke
                  else models.UNetDownUp())
        side, width, context, tokens = (8, 8, 12, 5) if smoke else (64, 320, 768, 77)
        return module.eval(), lambda batch: (torch.randn(batch, 4, side, side), torch.randn(batch, width),
                                             torch.randn(batch, tokens, context))
    module = models.VAEDecoderBlock(channels=16, groups=4) if smoke else models.VAEDecoderBlock()
    side = 8 if smoke else 64
    return module.eval(), lambda batch: (torch.randn(batch, 4, side, side),)


def _tolerance(torch, dtype) -> float:
    if dtype == torch.float32:
        return FLOAT32_TOLERANCE
    return UNITS * torch.finfo(dtype).eps / 2  # units of the dtype's rounding, 2^-(mantissa bits + 1)


def _relative_error(torch, got, reference) -> float:
    got, reference = got.double(), reference.double()
    return float((got - reference).abs().max() / reference.abs().max().clamp_min(1e-30))


def spread(candidates: list, most: int | None) -> list:
    """At most ``most`` of ``candidates`` (all of them for None), evenly spaced over the list, its first and
    last among them."""
    if most is None or len(candidates) <= most:
        return candidates
    if most == 1:
        return candidates[:1]
    return [candidates[round(i * (len(candidates) - 1) / (most - 1))] for i in range(most)]


def most_candidates() -> int | None:
    """CONV_MODELS_CANDIDATES: the most candidates a key is tuned on (unset: every one)."""
    given = os.environ.get("CONV_MODELS_CANDIDATES", "").strip()
    if not given:
        return None
    if not given.isdigit() or int(given) < 1:
        raise SystemExit(f"CONV_MODELS_CANDIDATES must be a positive whole number, got {given!r}")
    return int(given)


class FirstCallLog:
    """What a first call spends its time on, counted from the wrapped ``tuning.choose`` and
    ``launch.launch_planned``: a key not in the store is tuned on at most ``most`` of its candidates
    (``spread``) and printed as its tuning starts and ends (candidates, seconds); outside tuning, a kernel
    specialisation's first launch in this process (compiled then, or loaded from Triton's cache: a tuned
    key's stored setting compiles one by one, as each step first runs it, where its candidates compiled on a
    pool of threads) is counted with its seconds. ``take()`` gives
    (keys tuned, their candidates, their seconds, settings found stored, first launches, their seconds)
    since the last take. Under the interpreter nothing is counted."""

    def __init__(self, tuning, launch, backend_for, most: int | None = None):
        from nbxtensor.tuning import cache
        choose, launch_planned = tuning.choose, launch.launch_planned
        self._counts = [0, 0, 0.0, 0, 0, 0.0]
        tuning_now = []

        def logged_choose(key, facts_name, candidates, measure, **options):
            if options.get("interpreted") or launch.compiling_ahead_active():
                return choose(key, facts_name, candidates, measure, **options)
            if cache.cache_for(facts_name).current(key)[0] is not None:
                self._counts[3] += 1
                return choose(key, facts_name, candidates, measure, **options)
            offered = candidates() if callable(candidates) else candidates
            listed = spread(offered, most)
            print(f"  tuning {key}: {len(listed)} of {len(offered)} candidates", flush=True)
            start = time.perf_counter()
            tuning_now.append(key)
            try:
                config = choose(key, facts_name, listed, measure, **options)
            finally:
                tuning_now.pop()
            seconds = time.perf_counter() - start
            print(f"  tuned {key} in {seconds:.1f} s", flush=True)
            self._counts[0] += 1
            self._counts[1] += len(listed)
            self._counts[2] += seconds
            return config

        def timed_launch(kernel, grid, device, args, constexprs, constexpr_key):
            start = time.perf_counter()
            ran = launch_planned(kernel, grid, device, args, constexprs, constexpr_key)
            # None from a compiling device: launched through Triton, which compiled or loaded it just now
            if ran is None and not tuning_now and not launch.compiling_ahead_active() and \
                    backend_for(device).compiles_kernels:
                self._counts[4] += 1
                self._counts[5] += time.perf_counter() - start
            return ran
        tuning.choose, launch.launch_planned = logged_choose, timed_launch

    def take(self) -> tuple:
        counts, self._counts = tuple(self._counts), [0, 0, 0.0, 0, 0, 0.0]
        return counts


def _load(graph, directory, device, fuse_convolutions: bool):
    """The loaded graph; without ``fuse_convolutions``, its convolutions, batch norms and activations apart."""
    if fuse_convolutions:
        return graph.load(directory, device=device)
    from nbxtensor.graph import fuse as fusion, graph as loading
    kept = tuple(p for p in fusion.PATTERNS if not p.name.startswith("convolution_batch_norm"))
    fuse_steps = loading.fuse_steps
    loading.fuse_steps = lambda model, steps: fusion.fuse(model, steps, kept)
    try:
        return graph.load(directory, device=device)
    finally:
        loading.fuse_steps = fuse_steps


def first_call_census(facts_name: str, only: list, most: int | None) -> int:
    """Each GPU case's cold first call (empty tuning store and Triton cache) counted on the CPU against the
    facts of a device class, nothing run: the keys it tunes, their candidates (at most ``most`` a key,
    ``spread``) and the kernel specialisations that building them, and the launches outside tuning, compile
    (each launch's kernel, constexprs and argument specialisation). The CPU device plans as that class would
    (its facts swapped in); figures a device's own properties decide (its multiprocessor count) are the CPU's."""
    os.environ["NBX_DEVICE"] = "cpu"
    import torch

    import conv_models as models
    import nbxtensor as nbx
    from nbxtensor import graph, launch, tuning
    from nbxtensor.device import facts as device_facts
    from nbxtensor.device import host
    from nbxtensor.export import export
    from nbxtensor.ops import plans

    facts = device_facts.load(facts_name)
    host.HostBackend.facts = property(lambda backend: facts)
    compiled, built_by_tuning, offered, tuned_now = set(), set(), {}, []

    def note(kernel, grid, device, args, constexprs, constexpr_key):
        specialisation = (kernel, constexpr_key, launch._specialised(args)[0])
        compiled.add(specialisation)
        if tuned_now:
            built_by_tuning.add(specialisation)

    def build_every(key, key_facts, candidates, prepare):
        listed = spread(candidates() if callable(candidates) else candidates, most)
        if key in offered:  # tuned already: a run takes the stored setting, whose kernels are built
            return listed[0]
        offered[key] = len(listed)
        tuned_now.append(key)
        try:
            for config in listed:
                try:
                    prepare(config)()
                except Exception:  # noqa: BLE001  (tuning skips a candidate that cannot be built)
                    pass
        finally:
            tuned_now.pop()
        return listed[0]
    launch.launch_planned, tuning.choose_timed = note, build_every
    compiled_before = set()
    with tempfile.TemporaryDirectory() as scratch, torch.no_grad():
        for name, kind, dtype_name, channels_last, batch in CASES:
            if only and not any(word in name for word in only):
                continue
            dtype = getattr(torch, dtype_name)
            layout = torch.channels_last if channels_last else torch.contiguous_format

            def placed(t, dtype=dtype, layout=layout):
                t = t.to(dtype)
                return t.contiguous(memory_format=layout) if t.dim() == 4 else t
            module, make_inputs = _build(torch, models, kind, smoke=False)
            module = module.to(dtype).to(memory_format=layout)
            example = tuple(placed(t) for t in make_inputs(2 if kind == "resnet50" else batch))
            dynamic = ({0: torch.export.Dim("batch", min=1, max=64)},) if kind == "resnet50" else None
            model = _load(graph, export(module, example, os.path.join(scratch, name.replace(" ", "_")),
                                        dynamic_shapes=dynamic), "cpu",
                          os.environ.get("CONV_MODELS_FUSE", "1") == "1")
            for counted in (compiled, built_by_tuning, offered):
                counted.clear()
            plans.clear_all()  # every layout planned, and its keys formed, afresh
            model(*[nbx.from_dlpack(placed(t)) for t in make_inputs(batch)])
            print(f"{name}: {len(offered)} keys tuned, {sum(offered.values())} candidates, {len(compiled)} kernel "
                  f"specialisations to compile ({len(compiled - built_by_tuning)} outside tuning; "
                  f"{len(compiled - compiled_before)} not compiled by the cases above)", flush=True)
            compiled_before |= compiled
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="the models at tiny sizes, float32, on the CPU device (kernels interpreted), host clock")
    parser.add_argument("--first-call-census", metavar="FACTS", nargs="?", const="hopper",
                        help="count each case's cold first call on the CPU against a device class's facts "
                             "(default hopper): keys, candidates, kernel specialisations to compile; nothing runs")
    args = parser.parse_args(argv)
    if args.first_call_census:
        return first_call_census(args.first_call_census,
                                 [w for w in os.environ.get("CONV_MODELS_ONLY", "").split(",") if w],
                                 most_candidates())
    smoke = args.cpu_smoke
    if smoke:
        os.environ["NBX_DEVICE"] = "cpu"
    import torch  # the reference, the exporter and the baseline; nbxtensor's runtime never imports it

    import conv_models as models
    import nbxtensor as nbx
    from nbxtensor import graph, launch, tuning
    from nbxtensor.device import backend_for
    from nbxtensor.export import export

    device = "cpu" if smoke else "cuda"
    budget = float(os.environ.get("CONV_MODELS_SECONDS", "150"))
    candidate_cap = most_candidates()
    only = [w for w in os.environ.get("CONV_MODELS_ONLY", "").split(",") if w]
    if not smoke:
        from timing import gpu_pair_ms
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = os.environ.get("CONV_MODELS_CUDNN_BENCHMARK", "1") == "1"
        print(f"{nbx.cuda.get_device_name()}; torch {torch.__version__}, cudnn.benchmark "
              f"{torch.backends.cudnn.benchmark}", flush=True)

    def synchronize():
        if not smoke:
            torch.cuda.synchronize()

    def host_ms(fn):
        """One call's host time (every call of the smoke run's layouts has run before)."""
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    def peak(run, reset, allocated, most) -> int:
        gc.collect()
        synchronize()
        reset()
        base = allocated()
        run()
        synchronize()
        return most() - base

    first_call_log = FirstCallLog(tuning, launch, backend_for, candidate_cap)
    started = time.perf_counter()
    rows, checks, skipped = [], [], []
    exported = {}  # (model, dtype, layout) -> (torch module, float32 module, loaded graph, inputs maker)
    with tempfile.TemporaryDirectory() as scratch, torch.no_grad():
        for name, kind, dtype_name, channels_last, batch in SMOKE_CASES if smoke else CASES:
            if only and not any(word in name for word in only):
                continue
            if time.perf_counter() - started > budget:
                skipped.append(name)
                continue
            case_start = time.perf_counter()
            try:
                dtype = getattr(torch, dtype_name)
                layout = torch.channels_last if channels_last else torch.contiguous_format

                def placed(t, dtype=dtype, layout=layout):
                    t = t.to(device, dtype)
                    return t.contiguous(memory_format=layout) if t.dim() == 4 else t
                key = (kind, dtype_name, channels_last)
                if key not in exported:
                    module, make_inputs = _build(torch, models, kind, smoke)
                    reference = copy.deepcopy(module).to(device).to(memory_format=layout)
                    module = module.to(device, dtype).to(memory_format=layout)
                    reference.load_state_dict({k: v.float() if v.is_floating_point() else v
                                               for k, v in module.state_dict().items()})  # the rounded weights
                    example = tuple(placed(t) for t in make_inputs(2 if kind == "resnet50" else batch))
                    dynamic = ({0: torch.export.Dim("batch", min=1, max=64)},) if kind == "resnet50" else None
                    export_start = time.perf_counter()
                    model = _load(graph, export(module, example, os.path.join(scratch, "_".join(map(str, key))),
                                                dynamic_shapes=dynamic), device,
                                  os.environ.get("CONV_MODELS_FUSE", "1") == "1")
                    print(f"{name}: exported and loaded in {time.perf_counter() - export_start:.1f} s "
                          f"({len(model.steps)} steps, fused at load {model.fusions}, weights "
                          f"{model.weight_bytes() / 2**20:.0f} MiB)", flush=True)
                    exported[key] = (module, reference, model, make_inputs)
                module, reference, model, make_inputs = exported[key]
                torch.manual_seed(batch)
                inputs = tuple(placed(t) for t in make_inputs(batch))
                ours_in = [nbx.from_dlpack(t) for t in inputs]
                first_call_log.take()
                first = time.perf_counter()
                ours = torch.from_dlpack(model(*ours_in))
                synchronize()
                first_s = time.perf_counter() - first
                tuned, candidates, tuning_s, stored, launched, launch_s = first_call_log.take()
                print(f"{name}: first call {first_s:.1f} s: {tuned} keys tuned ({candidates} candidates, "
                      f"{tuning_s:.1f} s), {stored} settings from the store, {launched} kernel specialisations "
                      f"first launched outside tuning ({launch_s:.1f} s)", flush=True)
                theirs = module(*inputs)
                want = reference(*(t.float() for t in inputs))
                ours_error, torch_error = _relative_error(torch, ours, want), _relative_error(torch, theirs, want)
                close = ours_error <= max(2 * torch_error, _tolerance(torch, dtype))
                checks.append((f"{name}: as close to float32 as torch", close,
                               f"relative error {ours_error:.2e}, torch's {torch_error:.2e}"))
                layout_kept = ours.is_contiguous(memory_format=torch.channels_last) == \
                    theirs.is_contiguous(memory_format=torch.channels_last) if ours.dim() == 4 else True
                checks.append((f"{name}: output memory format as torch's", layout_kept,
                               f"ours {tuple(ours.stride())}, torch's {tuple(theirs.stride())}"))
                model.replay(*ours_in)
                model.replay(*ours_in)  # the first replay is checked against the normal path
                refused = model._replayer.reason(*ours_in)
                replayed = torch.from_dlpack(model.replay(*ours_in))
                checks.append((f"{name}: replay equals the normal path",
                               refused is None and torch.equal(replayed, ours),
                               "bitwise" if refused is None else f"refused: {refused}"))
                values = model.bind([tuple(t.shape) for t in ours_in])
                planned = model.plan(values).peak_bytes
                if smoke:
                    ours_ms, replay_ms = host_ms(lambda: model(*ours_in)), host_ms(lambda: model.replay(*ours_in))
                    torch_ms = host_ms(lambda: module(*inputs))
                    ours_peak = torch_peak = float("nan")
                else:
                    ours_ms, torch_ms = gpu_pair_ms(lambda: model(*ours_in), lambda: module(*inputs), reps=5, rounds=5)
                    replay_ms, _ = gpu_pair_ms(lambda: model.replay(*ours_in), lambda: module(*inputs), reps=5,
                                               rounds=5)
                    ours_peak = peak(lambda: model(*ours_in), nbx.cuda.reset_peak_memory_stats,
                                     nbx.cuda.memory_allocated, nbx.cuda.max_memory_allocated)
                    torch_peak = peak(lambda: module(*inputs), torch.cuda.reset_peak_memory_stats,
                                      torch.cuda.memory_allocated, torch.cuda.max_memory_allocated)
                    checks.append((f"{name}: activation peak at most torch's", ours_peak <= torch_peak,
                                   f"{ours_peak / 2**20:.1f} vs {torch_peak / 2**20:.1f} MiB"))
                    checks.append((f"{name}: replay at least as fast as torch eager", replay_ms <= torch_ms,
                                   f"{replay_ms:.3f} vs {torch_ms:.3f} ms"))
                rows.append((name, ours_ms, replay_ms, torch_ms, ours_peak, planned, torch_peak, first_s))
                # allocations past the plan: copies that operands' layouts asked for (not planned by design)
                unplanned = model.last_run.unplanned
                print(f"{name}: ours {ours_ms:.3f} ms, replay {replay_ms:.3f} ms, torch {torch_ms:.3f} ms "
                      f"(torch/replay {torch_ms / replay_ms:.2f}); peak ours {ours_peak / 2**20:.1f} MiB measured, "
                      f"{planned / 2**20:.1f} planned ({len(unplanned)} allocations past the plan, "
                      f"{sum(size for _, size in unplanned) / 2**20:.1f} MiB), torch {torch_peak / 2**20:.1f}; "
                      f"first call {first_s:.1f} s; {time.perf_counter() - case_start:.0f} s in all", flush=True)
            except Exception as error:  # noqa: BLE001  (a model that fails is reported, and the run goes on)
                message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                checks.append((f"{name}: runs", False, message[:300]))
                print(f"{name}: FAILED after {time.perf_counter() - case_start:.0f} s: {message[:300]}", flush=True)

    print_checks(checks, "{}")
    clock = "host clock, CPU interpreter" if smoke else "device time"
    print(f"\n{clock}; {time.perf_counter() - started:.0f} s in all; skipped past CONV_MODELS_SECONDS: "
          f"{', '.join(skipped) or 'none'}")
    print(f"{'model':34s} {'ours ms':>8s} {'replay ms':>10s} {'torch ms':>9s} {'torch/ours':>10s} {'torch/replay':>12s}"
          f" {'peak MiB':>9s} {'planned':>8s} {'torch MiB':>9s} {'first s':>8s}")
    for name, ours_ms, replay_ms, torch_ms, ours_peak, planned, torch_peak, first_s in rows:
        print(f"{name:34s} {ours_ms:8.3f} {replay_ms:10.3f} {torch_ms:9.3f} {torch_ms / ours_ms:10.2f} "
              f"{torch_ms / replay_ms:12.2f} {ours_peak / 2**20:9.1f} {planned / 2**20:8.1f} {torch_peak / 2**20:9.1f}"
              f" {first_s:8.1f}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
