#!/usr/bin/env bash
# The speed figures of one GPU machine in one run, tapegraph beside its anchors:
# - CPU: bench_dispatch and the eager mlp_small step, pinned to one core, beside libtorch 2.11 (the
#   anchors' cpu/run_pip.sh, pinned to the same core);
# - GPU: the compiled mlp_small, mlp_wide and mlp_wide_bf16 steps (modes 1-4: defaults, fusions off,
#   gradient epilogues on, branch stream off) and bf16-vs-fp32 losses, beside PyTorch's whole step
#   captured by hand (pt_mlp_step.py, pt_models.py).
# Usage: bench/run_speed.sh BUILD_DIR ANCHORS_DIR OUTDIR [CORE]
set -u
build=${1:?usage: run_speed.sh BUILD_DIR ANCHORS_DIR OUTDIR [CORE]}
anchors=${2:?anchors folder}
out=${3:?output folder}
core=${4:-2}
mkdir -p "$out"
reps=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true)
{
  echo "== CPU, core $core: tapegraph"
  taskset -c "$core" "$build/bench/bench_dispatch" --benchmark_filter=cpu "${reps[@]}"
  taskset -c "$core" "$build/bench/bench_mlp_step" --benchmark_filter=cpu "${reps[@]}"
  echo "== CPU, core $core: libtorch"
  bash "$anchors/cpu/run_pip.sh" "$core"
} 2>&1 | tee "$out/speed_cpu.txt" | grep -E "median|_ns,|_us,|^=="
{
  echo "== GPU: tapegraph"
  "$build/bench/bench_cudagraph_step" --benchmark_filter='mlp_(small|wide|wide_bf16)_step/[1234]|losses' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  echo "== GPU: PyTorch"
  (cd "$anchors" && PYTHONPATH=. python3 pt_mlp_step.py manual_cudagraph &&
     PYTHONPATH=. python3 pt_models.py mlp_wide_bf16 mode=manual_cudagraph)
} 2>&1 | tee "$out/speed_gpu.txt" | grep -E "median|max_rel|manual|^=="
