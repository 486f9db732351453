#!/usr/bin/env bash
# Builds and runs the GPT training example on the fortunes corpus (fetched on first use); arguments
# go to the program (e.g. --preset cpu, --steps 1000, --logdir runs/gpt). Uses the CUDA backend when
# nvcc is found, and the GPU preset when a GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build}"
[ -s .data/fortunes.txt ] || bash examples/fetch_fortunes.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target train_gpt -j "$(nproc)"
"$build/examples/train_gpt" "$@"
