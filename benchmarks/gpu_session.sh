#!/usr/bin/env bash
# One device call: GPU benchmarks, the whole suite with cuda as the test device, or both.
# Usage on the lent GPU (nothing installable there):
#   bash benchmarks/gpu_session.sh bench|suite|all [SECONDS] [SHARDS]
# BENCHMARKS (names in benchmarks/, without .py) and TEST_FILES narrow what runs. A benchmark may carry its
# environment as name@VAR=value,VAR=value (gpu_llm@NBX_PDL=1,NBX_LLM_SIZE=8b); BENCH_CAP (default 200) is
# the seconds each may take.
# The suite runs as SHARDS pytest processes over disjoint test files (cold runs are compile-bound, and
# the machine has many cores). Logs are packed into $OUT/logs.tgz (the device returns few files); a short
# summary is printed last.
set -u
mode="${1:-all}"
seconds="${2:-300}"
shards="${3:-8}"
out="${OUT:-gpu-logs}"
logs="$(mktemp -d)"
mkdir -p "$out"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
deadline=$(( $(date +%s) + seconds ))
remaining() { echo $(( deadline - $(date +%s) )); }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$logs/gpu.txt" 2>&1
python3 -c "import triton, torch, numpy, cuda.bindings; print('triton', triton.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__, 'cuda-bindings', cuda.bindings.__version__)" >> "$logs/gpu.txt" 2>&1

if [ "$mode" != suite ]; then
  # SM clock, power and temperature every 200 ms while the benchmarks run: a ratio that moves between
  # runs can then be read against throttling
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 > "$logs/clocks.csv" 2>&1 &
  monitor=$!
  cap="${BENCH_CAP:-200}"
  for entry in ${BENCHMARKS:-gpu_foundation gpu_device gpu_pointwise gpu_reductions gpu_indexing gpu_matmul gpu_attention gpu_host_and_tiles gpu_graph}; do
    bench="${entry%%@*}"
    settings=()
    [ "$entry" = "$bench" ] || IFS=, read -r -a settings <<< "${entry#*@}"
    name="$(echo "$entry" | tr -c 'A-Za-z0-9_\n' _)"
    left=$(remaining)
    [ "$left" -gt 10 ] || { echo "$entry skipped (no time left)" >> "$logs/summary.txt"; continue; }
    start=$(date +%s)
    env "${settings[@]}" OUT="$logs" timeout $(( left < cap ? left : cap )) python3 "benchmarks/$bench.py" \
      > "$logs/$name.log" 2>&1
    echo "$entry rc=$? $(( $(date +%s) - start ))s $(date +%H:%M:%S)" >> "$logs/summary.txt"
  done
  kill "$monitor" 2>/dev/null
fi

if [ "$mode" != bench ]; then
  mapfile -t files < <(ls -S ${TEST_FILES:-tests/test_*.py})
  for ((s = 0; s < shards; s++)); do
    mine=()
    for ((i = s; i < ${#files[@]}; i += shards)); do mine+=("${files[i]}"); done
    # more shards than files: pytest given no file would run the whole suite
    [ ${#mine[@]} -gt 0 ] || continue
    NBX_TEST_DEVICE=cuda timeout $(( $(remaining) - 5 )) python3 -m pytest -v -p no:cacheprovider -o faulthandler_timeout=120 --durations=5 "${mine[@]}" \
      > "$logs/pytest_cuda_$s.log" 2>&1 &
  done
  wait
  for ((s = 0; s < shards; s++)); do
    [ -f "$logs/pytest_cuda_$s.log" ] || continue
    echo "pytest shard $s: $(grep -c PASSED "$logs/pytest_cuda_$s.log") passed, $(grep -c "FAILED\|ERROR" "$logs/pytest_cuda_$s.log") failed or errors; $(tail -1 "$logs/pytest_cuda_$s.log" | cut -c1-80)" >> "$logs/summary.txt"
  done
fi

tar czf "$out/logs.tgz" -C "$logs" .
cp "$logs/summary.txt" "$out/" 2>/dev/null
cat "$logs/gpu.txt" "$logs/summary.txt"
for f in "$logs"/gpu_*.log; do [ -f "$f" ] && { echo "== $(basename "$f")"; sed -n '/^what\|^checks/,$p' "$f" | head -40; }; done
grep -hE "^FAILED|^ERROR|(FAILED|ERROR) *\[" "$logs"/pytest_cuda_*.log 2>/dev/null | cut -c1-160 | head -40
