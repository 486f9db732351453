#!/usr/bin/env bash
# Builds and runs the digits training example (train_digits); arguments go to the program
# (e.g. --device cpu, --epochs 30). Uses the CUDA backend when nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build}"
[ -s .data/digits.csv.gz ] || bash examples/fetch_digits.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target train_digits -j "$(nproc)"
"$build/examples/train_digits" "$@"
