#!/usr/bin/env bash
# Configures, builds everything (library, tests, benchmarks, examples) and runs the test suites,
# with the CUDA backend when nvcc is found (GPU tests skip themselves without a device). Then two
# sanitizer passes over CPU builds, each in its own build folder, where any report fails the run:
#   - AddressSanitizer (leak detection on) + UndefinedBehaviorSanitizer over the whole suite;
#   - ThreadSanitizer over the programs that run threads (CTest label "threads": the collective
#     backend, DDP, ZeRO, FSDP, the store and launcher, the data loader, captured work).
# TG_SKIP_SANITIZE=1 skips both; TG_SANITIZE_PASSES="address" (or "thread") runs one.
# Each phase prints its wall time, so a CI log shows where the minutes went.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build}"
jobs="${JOBS:-2}"
phase_start=$SECONDS
phase() {
  echo "== $1 (after $((SECONDS - phase_start)) s)"
}

# The examples' data (Debian packages, downloaded but not installed); their tests skip without it.
bash examples/fetch_digits.sh || echo "digits data not fetched: the train_digits tests will skip"
bash examples/fetch_fortunes.sh || echo "fortunes corpus not fetched: the train_gpt tests will skip"

phase "release build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
phase "release tests"
rm -rf "$build/gtest-results"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
bash tests/tools/gtest_summary.sh "$build/gtest-results"

# Configures a sanitizer build of the CPU backend: -O1 with line tables keeps reports readable and
# compiles in far less time than -O2 -g; the library is shared (one link of it, not one per test
# program), and the CPU loops' AVX variants, the same source as the baseline loop, are left out.
# Arguments: NAME BUILD_DIR SANITIZERS [cmake args...].
sanitizer_configure() {
  local name=$1 dir=$2 sanitizers=$3
  shift 3
  phase "$name build"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DTG_CUDA=OFF -DTG_BUILD_BENCH=OFF -DTG_BUILD_EXAMPLES=OFF -DTG_SANITIZE="$sanitizers" \
    -DTG_CPU_ISA_VARIANTS=OFF -DBUILD_SHARED_LIBS=ON "$@"
}

passes=" ${TG_SANITIZE_PASSES:-address thread} "
if [ "${TG_SKIP_SANITIZE:-0}" != 1 ] && [[ "$passes" == *" address "* ]]; then
  san="${SANITIZE_BUILD_DIR:-build-sanitize}"
  sanitizer_configure "address+undefined" "$san" address,undefined
  cmake --build "$san" -j "$jobs"
  phase "address+undefined tests"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
  export LSAN_OPTIONS="suppressions=$PWD/.ci/lsan.supp"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  # install_consumer builds a project without the sanitizer flags against this build: it runs in the
  # plain pass above.
  rm -rf "$san/gtest-results"
  ctest --test-dir "$san" --output-on-failure -j "$jobs" -E '^install_consumer$'
  bash tests/tools/gtest_summary.sh "$san/gtest-results"
  unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
fi

if [ "${TG_SKIP_SANITIZE:-0}" != 1 ] && [[ "$passes" == *" thread "* ]]; then
  tsan="${TSAN_BUILD_DIR:-build-tsan}"
  sanitizer_configure "thread" "$tsan" thread
  # Only the labelled programs (and the launcher and workers they start) are built and run.
  mapfile -t targets < <(ctest --test-dir "$tsan" -L threads -N | sed -n 's/^ *Test *#[0-9]*: //p')
  cmake --build "$tsan" -j "$jobs" --target "${targets[@]}"
  phase "thread tests"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/.ci/tsan.supp"
  rm -rf "$tsan/gtest-results"
  ctest --test-dir "$tsan" --output-on-failure -j "$jobs" -L threads
  bash tests/tools/gtest_summary.sh "$tsan/gtest-results"
  unset TSAN_OPTIONS
fi
phase "done"
