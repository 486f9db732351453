#!/usr/bin/env bash
# The speed figures of one GPU machine in one run, tapegraph beside its anchors:
# - CPU: bench_dispatch and the eager mlp_small step, pinned to one core, beside libtorch 2.11 (the
#   anchors' cpu/run_pip.sh, pinned to the same core), in TG_CPU_ROUNDS alternating rounds (default
#   3) after one discarded pass: virtual machines' cores slow down and speed up by up to twofold
#   over a minute, so each round's pair is compared, and every round is printed;
# - GPU: the compiled mlp_small, mlp_wide and mlp_wide_bf16 steps (modes 1-4: defaults, fusions off,
#   gradient epilogues on, branch stream off) and bf16-vs-fp32 losses, beside PyTorch's whole step
#   captured by hand (pt_mlp_step.py, pt_models.py).
# Usage: bench/run_speed.sh BUILD_DIR ANCHORS_DIR OUTDIR [CORE]
set -u
build=${1:?usage: run_speed.sh BUILD_DIR ANCHORS_DIR OUTDIR [CORE]}
anchors=${2:?anchors folder}
out=${3:?output folder}
core=${4:-2}
rounds=${TG_CPU_ROUNDS:-3}
mkdir -p "$out"
reps=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true)

# One line per round: tapegraph's medians beside libtorch's figures and their ratios.
summarize_cpu_round() {
  awk -v round="$1" '
    /BM_add_tiny\/cpu\/real_time_median/ { tg["add"] = $2 }
    /BM_add_tiny_requires_grad\/cpu\/real_time_median/ { tg["grad"] = $2 }
    /BM_add_inplace_tiny\/cpu\/real_time_median/ { tg["inplace"] = $2 }
    /BM_mlp_small_step_cpu\/real_time_median/ { tg["step"] = $2 }
    /^add_tiny_ns,/ { split($0, f, ","); lt["add"] = f[2] }
    /^add_tiny_requires_grad_ns,/ { split($0, f, ","); lt["grad"] = f[2] }
    /^add_inplace_tiny_ns,/ { split($0, f, ","); lt["inplace"] = f[2] }
    /^mlp_small_step_cpu_1thread_us,/ { split($0, f, ","); lt["step"] = f[2] }
    function pair(k, unit) { return sprintf("%s vs %s %s (%.2fx)", tg[k], lt[k], unit, lt[k] > 0 ? tg[k] / lt[k] : 0) }
    END {
      printf "round %s, tapegraph vs libtorch: a + b %s; requires grad %s; in place %s; mlp_small step %s\n", round,
        pair("add", "ns"), pair("grad", "ns"), pair("inplace", "ns"), pair("step", "us")
    }'
}

# Right after a build the first CPU round read up to 1.8x slower than the next two (a + b slower
# than the same add with requires_grad), with the build's load still in the load average. So flush
# the build's writes, wait (at most 90 s) for the one-minute load to fall below 2, and run one
# discarded pass before the rounds.
sync
for _ in $(seq 1 90); do
  awk '{ exit !($1 < 2) }' /proc/loadavg && break
  sleep 1
done
echo "CPU rounds start at load average $(cut -d' ' -f1-3 /proc/loadavg)"
taskset -c "$core" "$build/bench/bench_dispatch" --benchmark_filter=cpu > /dev/null 2>&1
for round in $(seq 1 "$rounds"); do
  {
    echo "== CPU round $round, core $core: tapegraph"
    taskset -c "$core" "$build/bench/bench_dispatch" --benchmark_filter=cpu "${reps[@]}"
    taskset -c "$core" "$build/bench/bench_mlp_step" --benchmark_filter=cpu "${reps[@]}"
    echo "== CPU round $round, core $core: libtorch"
    # run_pip.sh builds its program into /tmp/libtorch_cpu_pip; later rounds only run it.
    if [ "$round" = 1 ]; then bash "$anchors/cpu/run_pip.sh" "$core"; else taskset -c "$core" /tmp/libtorch_cpu_pip; fi
  } > "$out/speed_cpu_round$round.txt" 2>&1
  grep -E "median|_ns,|_us,|^==" "$out/speed_cpu_round$round.txt"
  summarize_cpu_round "$round" < "$out/speed_cpu_round$round.txt"
done 2>&1 | tee "$out/speed_cpu.txt"
{
  echo "== GPU: tapegraph"
  "$build/bench/bench_cudagraph_step" --benchmark_filter='mlp_(small|wide|wide_bf16)_step/[1234]|losses' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  echo "== GPU: PyTorch"
  (cd "$anchors" && PYTHONPATH=. python3 pt_mlp_step.py manual_cudagraph &&
     PYTHONPATH=. python3 pt_models.py mlp_wide_bf16 mode=manual_cudagraph)
} 2>&1 | tee "$out/speed_gpu.txt" | grep -E "median|max_rel|manual|^=="
