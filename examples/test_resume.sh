#!/usr/bin/env bash
# Checks that train_digits --resume after epoch 1 ends with the same checkpoint (byte for byte)
# as an uninterrupted run.  test_resume.sh <train_digits> <digits.csv.gz> [extra flags]
set -euo pipefail
prog="$1"
data="$2"
shift 2
if [ ! -s "$data" ]; then
  echo "no digits data at $data (bash examples/fetch_digits.sh); skipping"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
common=(--data "$data" --epochs 3 --target 0 --logdir "$tmp/logs" "$@")
"$prog" "${common[@]}" --save "$tmp/full.safetensors" >/dev/null
"$prog" "${common[@]}" --epochs 1 --save "$tmp/part.safetensors" >/dev/null
"$prog" "${common[@]}" --resume "$tmp/part.safetensors" --save "$tmp/resumed.safetensors" | grep resumed
cmp "$tmp/full.safetensors" "$tmp/resumed.safetensors"
echo "resumed run after epoch 1 ends with the same parameters and optimizer state as the uninterrupted run"
