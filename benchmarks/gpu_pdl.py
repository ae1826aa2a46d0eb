"""Programmatic dependent launch, off against on, at TinyLlama-1.1B size (gpu_llm.py's random bf16
checkpoint, batch 1 and 8, replayed decode steps).

``NBX_PDL`` is read once, at import, so each setting runs in its own process on the same checkpoint; the
two are run in turn, twice. Each prints its greedy tokens and its best decode rate over three generations.
The tokens must be equal bit for bit in every run: the kernels compute the same values whichever way they
are launched, so a difference means a kernel read memory its predecessor was still writing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

NEW_TOKENS = 64
BATCHES = (1, 8)


def child(directory: str) -> None:
    import nbxtensor as nbx
    from nbxtensor import launch, llm
    ours = llm.load(directory, device="cuda", cache_tokens=16 * 1024)
    prompt = list(range(1, 65))
    result = {"pdl": launch.dependent_launch(nbx.device("cuda")), "tokens": {}, "rate": {}}
    for batch in BATCHES:
        prompts = [prompt] * batch
        ours.generate(prompts, max_new_tokens=NEW_TOKENS)  # compiles, tunes and captures this bucket
        best = 0.0
        for _ in range(3):
            generated = ours.generate(prompts, max_new_tokens=NEW_TOKENS)  # a list: one Generation a prompt
            decoded = sum(len(g.tokens) - 1 for g in generated)  # the first token of each comes from its prefill
            best = max(best, decoded / generated[0].decode_seconds)
        result["tokens"][batch] = [g.tokens for g in generated]
        result["rate"][batch] = best
    print("RESULT " + json.dumps(result))


def main() -> None:
    from gpu_llm import checkpoint
    import torch
    runs = []
    with tempfile.TemporaryDirectory() as directory:
        checkpoint(directory)
        torch.cuda.empty_cache()
        for setting in ("0", "1", "0", "1"):
            env = dict(os.environ, NBX_PDL=setting)
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", directory], env=env,
                                  capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode != 0 or not lines:
                print(f"NBX_PDL={setting} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
                return
            runs.append((setting, json.loads(lines[-1][len("RESULT "):])))
    first_tokens = runs[0][1]["tokens"]
    print("NBX_PDL | taken | " + " | ".join(f"batch {b} tokens/s" for b in BATCHES) + " | tokens as NBX_PDL=0's")
    for setting, result in runs:
        rates = " | ".join(f"{result['rate'][str(b)]:.1f}" for b in BATCHES)
        print(f"{setting} | {'on' if result['pdl'] else 'off'} | {rates} | {result['tokens'] == first_tokens}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
