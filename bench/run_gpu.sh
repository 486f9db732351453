#!/usr/bin/env bash
# Builds tapegraph with CUDA on a GPU machine, runs the whole test suite, the digits example and the
# benchmarks, and (when given) the reference measurements in the same run. TG_SANITIZERS=1 adds
# compute-sanitizer memcheck, initcheck and synccheck over every CUDA graph test. TG_ORACLE=N runs
# N programs per mode of the PyTorch oracle (tests/fuzz/torch_oracle.py) on CUDA against the
# machine's python3. TG_STAGES picks stages (default: "build ctest fuzz sanitizers digits bench
# oracle"; each still needs its own switch where it has one); the stage "strict", only when named,
# runs every benchmark with TG_STRICT_CAPTURE=1 and reports which raise.
# Usage: bench/run_gpu.sh OUTDIR [ANCHORS_DIR] [DEPS]
#   DEPS: an install prefix, or a folder of Debian .deb packages to unpack into one, holding the
#   build dependencies the machine lacks (oneDNN, OpenBLAS, nlohmann-json, ...).
set -u
out=${1:?usage: run_gpu.sh OUTDIR [ANCHORS_DIR] [DEPS]}
anchors=${2:-}
deps=${3:-}
mkdir -p "$out"
source "$(dirname "$0")/gpu_env.sh" "$deps"
log="$out/log.txt"
stages=" ${TG_STAGES:-build ctest fuzz sanitizers digits bench oracle} "
stage() { [[ "$stages" == *" $1 "* ]]; }
if stage build; then
  echo "== configure + build" | tee "$log"
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTG_ORACLE_PYTHON=python3 \
    "${TG_CMAKE_ARGS[@]}" >>"$log" 2>&1 \
    && ninja -C build-gpu -j16 >>"$log" 2>&1 || { grep -E "error|Error|FAILED" "$log" | head -60; exit 1; }
fi
if stage ctest; then
  echo "== ctest" | tee -a "$log"
  (cd build-gpu && ctest -j8 --timeout 900 --output-on-failure) >"$out/ctest.txt" 2>&1
  grep -E "tests passed|tests failed|The following tests|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|\(Subprocess" "$out/ctest.txt" | head -40
fi
if stage fuzz; then
  echo "== differential fuzzer under cudagraphs" | tee -a "$log"
  TG_FUZZ_PROGRAMS=${TG_FUZZ_PROGRAMS:-2000} build-gpu/tests/test_fuzz --gtest_filter='*Cuda*' >"$out/fuzz.txt" 2>&1
  grep -E "^fuzz |fuzz program|PASSED|FAILED" "$out/fuzz.txt" | cut -c1-300 | head -20
fi
if [ -n "${TG_ORACLE:-}" ] && stage oracle; then
  echo "== PyTorch oracle on CUDA, ${TG_ORACLE} programs per mode" | tee -a "$log"
  python3 tests/fuzz/torch_oracle.py --driver build-gpu/tests/fuzz_oracle --device cuda --count "$TG_ORACLE" \
    --first "${TG_ORACLE_FIRST:-1}" --modes "${TG_ORACLE_MODES:-eager,cudagraphs,autocast_eager,autocast_cudagraphs}" \
    ${TG_ORACLE_ARGS:-} >"$out/oracle.txt" 2>&1
  echo "oracle exit code $?" >>"$out/oracle.txt"
  grep -E "passed, .* failed|exit code|FAIL|mismatch" "$out/oracle.txt" | cut -c1-300 | head -30
fi
if [ -n "${TG_SANITIZERS:-${TG_MEMCHECK:-}}" ] && stage sanitizers; then
  # compute-sanitizer over every CUDA graph test (and the device error checks): memcheck, initcheck
  # (reads of never-written device memory) and synccheck; prints each run's ERROR SUMMARY.
  echo "== compute-sanitizer memcheck, initcheck, synccheck on the CUDA graph tests" | tee -a "$log"
  # The ERROR SUMMARY counts CUDA API calls that returned an error too ("Program hit ..."): the graph
  # updater's parameter probe (cuFuncGetParamInfo until the driver says there are no more) and
  # NCCL's own checks of kernel images. Each line also says how many of the errors were those.
  for tool in memcheck initcheck synccheck; do
    for t in ${TG_SANITIZE_TESTS:-test_cudagraphs_seeds test_cudagraph_trees test_cudagraph_pool \
             test_optim_compiled test_optim_step test_device_error test_norm_pool test_sequence_seeds \
             test_linear_cross_entropy_cuda test_add_layer_norm test_async_collectives test_conv \
             test_flash_attention test_linear_epilogues}; do
      printf '%s %s: ' "$tool" "$t"
      compute-sanitizer --tool "$tool" --error-exitcode 1 "build-gpu/tests/$t" --gtest_brief=1 >"$out/sanitizer.log" 2>&1
      { grep -E "ERROR SUMMARY" "$out/sanitizer.log" | tail -1
        printf '(%s of them API return codes) ' "$(grep -c 'Program hit .* on CUDA API call' "$out/sanitizer.log")"
        grep -E "tests? (ran|PASSED)|FAILED" "$out/sanitizer.log" | tail -2; } | tr '\n' ' ' || echo "no summary"
      echo
    done
  done | tee "$out/sanitizers.txt"
fi
if [ -f .data/digits.csv.gz ] && [ -z "${TG_SKIP_DIGITS:-}" ] && stage digits; then
  for flags in "" "--compile none"; do
    echo "== train_digits --device cuda $flags" | tee -a "$log"
    ./build-gpu/examples/train_digits --device cuda $flags 2>&1 | tr '\r' '\n' | grep -v "^epoch" | tail -12 | tee -a "$log"
  done
fi
if stage strict; then
  # Every benchmark with TG_STRICT_CAPTURE=1: a compiled step that would run work outside CUDA graphs
  # (an island, an eager fallback, a re-record) raises "[cudagraphs] strict capture: ..." instead.
  echo "== benchmarks under strict capture" | tee -a "$log"
  for b in ${TG_BENCHES:-build-gpu/bench/bench_*}; do
    [ -x "$b" ] || continue
    name=$(basename "$b")
    TG_STRICT_CAPTURE=1 "$b" --benchmark_min_time=0.05 --benchmark_format=console >"$out/strict_$name.txt" 2>&1
    code=$?
    if [ $code -eq 0 ] && ! grep -q "strict capture" "$out/strict_$name.txt"; then
      echo "$name: passed"
    else
      echo "$name: FAILED (exit $code)"
      grep -m3 -o "strict capture: .*" "$out/strict_$name.txt" | cut -c1-400
    fi
  done | tee "$out/strict.txt"
fi
stage bench || exit 0
echo "== benchmarks" | tee -a "$log"
for b in ${TG_BENCHES:-build-gpu/bench/bench_*}; do
  [ -x "$b" ] || continue
  "$b" --benchmark_min_time=0.2 --benchmark_format=console 2>&1
done >"$out/bench.txt"
grep -E "^BM_|^bench" "$out/bench.txt" | head -80
if [ -n "$anchors" ]; then
  echo "== anchors" | tee -a "$log"
  PT_MODES=${PT_MODES:-} bash "$anchors/run.sh" /tmp/tg_anchors >"$out/anchors_log.txt" 2>&1
  for f in gpu.txt launch_floor.csv pt.csv libtorch.csv; do
    echo "# $f"; cat "/tmp/tg_anchors/$f" 2>/dev/null
  done >"$out/anchors.txt"
  tail -5 /tmp/tg_anchors/pytorch_seed_tests.txt >>"$out/anchors.txt" 2>/dev/null
  cat "$out/anchors.txt"
fi
