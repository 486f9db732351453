#!/usr/bin/env bash
# Configures, builds everything (library, tests, benchmarks, examples) and runs the test suites.
# Uses the CUDA backend when nvcc is found; GPU tests skip themselves when no device is present.
# Then builds the CPU test suite with AddressSanitizer (leak detection on) and UndefinedBehavior-
# Sanitizer in its own build dir and runs it: any report fails the run (TG_SKIP_SANITIZE=1 skips).
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build}"
jobs="${JOBS:-2}"
# The examples' data (Debian packages, downloaded but not installed); their tests skip without it.
bash examples/fetch_digits.sh || echo "digits data not fetched: the train_digits tests will skip"
bash examples/fetch_fortunes.sh || echo "fortunes corpus not fetched: the train_gpt tests will skip"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
rm -rf "$build/gtest-results"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
bash tests/tools/gtest_summary.sh "$build/gtest-results"

if [ "${TG_SKIP_SANITIZE:-0}" != 1 ]; then
  san="${SANITIZE_BUILD_DIR:-build-sanitize}"
  cmake -S . -B "$san" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_CUDA=OFF -DTG_BUILD_BENCH=OFF \
    -DTG_BUILD_EXAMPLES=OFF -DTG_SANITIZE=address,undefined
  cmake --build "$san" -j "$jobs"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  # install_consumer builds a project without the sanitizer flags against this build: it runs in the
  # plain pass above.
  rm -rf "$san/gtest-results"
  ctest --test-dir "$san" --output-on-failure -j "$jobs" -E '^install_consumer$'
  bash tests/tools/gtest_summary.sh "$san/gtest-results"

fi
