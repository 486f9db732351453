#!/usr/bin/env bash
# Configures, builds everything (library, tests, benchmarks, examples) and runs the test suites.
# Uses the CUDA backend when nvcc is found; GPU tests skip themselves when no device is present.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build}"
jobs="${JOBS:-2}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
