#!/usr/bin/env bash
# One device call: every GPU benchmark, then the whole suite with cuda as the test device.
# Usage on the lent GPU (nothing installable there): bash benchmarks/gpu_session.sh [SUITE_SECONDS]
# Logs go to $OUT (or ./gpu-logs); a short summary is printed last.
set -u
out="${OUT:-gpu-logs}"
mkdir -p "$out"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
suite_seconds="${1:-300}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 -c "import triton, torch, numpy, cuda.bindings; print('triton', triton.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__, 'cuda-bindings', cuda.bindings.__version__)" >> "$out/gpu.txt" 2>&1
for bench in gpu_foundation gpu_device gpu_pointwise gpu_reductions gpu_indexing gpu_matmul gpu_attention; do
  [ -f "benchmarks/$bench.py" ] || continue
  timeout 150 python3 "benchmarks/$bench.py" > "$out/$bench.log" 2>&1
  echo "$bench rc=$?" >> "$out/summary.txt"
done
NBX_TEST_DEVICE=cuda timeout "$suite_seconds" python3 -m pytest -q -p no:cacheprovider tests > "$out/pytest_cuda.log" 2>&1
echo "pytest rc=$?" >> "$out/summary.txt"
cat "$out/gpu.txt" "$out/summary.txt"
grep -hE "^FAILED|^ERROR|[0-9]+ (passed|failed)" "$out/pytest_cuda.log" | tail -25
