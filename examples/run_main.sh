#!/usr/bin/env bash
# The main job: trains the GPT example on the fortunes corpus (examples/run_gpt.sh), with the GPU
# preset when a GPU is present and the CPU preset otherwise; arguments go to train_gpt.
set -euo pipefail
exec bash "$(dirname "$0")/run_gpt.sh" "$@"
