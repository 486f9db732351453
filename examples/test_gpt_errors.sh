#!/usr/bin/env bash
# Bad input to train_gpt gives a clear error and loses nothing: a missing corpus, an unusable log
# directory, and a checkpoint of another model shape (which must stay as it was, even when it is
# also the --save target).   test_gpt_errors.sh <train_gpt> <fortunes.txt>
set -euo pipefail
bin="$1" corpus="$2"
if [ ! -s "$corpus" ]; then
  echo "no corpus at $corpus (examples/fetch_fortunes.sh fetches it): skipped"
  exit 77
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
small=(--preset cpu --layers 2 --d-model 32 --heads 2 --context 32 --batch-size 4 --eval-batches 2 --sample-chars 0)

# Runs train_gpt expecting failure with `message` in its error output.
expect_error() {
  local message="$1"
  shift
  if "$bin" "$@" > "$dir/out" 2>&1; then
    echo "FAIL: train_gpt $* succeeded; expected an error with: $message"
    exit 1
  fi
  if ! grep -qF -- "$message" "$dir/out"; then
    echo "FAIL: train_gpt $* said:"
    cat "$dir/out"
    echo "expected: $message"
    exit 1
  fi
  echo "ok: $(grep -F -- "$message" "$dir/out" | head -1)"
}

expect_error "cannot read the corpus \"$dir/missing.txt\"" "${small[@]}" --data "$dir/missing.txt" --logdir "$dir/logs"
touch "$dir/file"
expect_error "cannot create log directory '$dir/file/logs'" "${small[@]}" --data "$corpus" --logdir "$dir/file/logs"
expect_error "--steps takes a positive integer, got \"ten\"" "${small[@]}" --steps ten

"$bin" "${small[@]}" --data "$corpus" --logdir "$dir/logs" --steps 3 --save "$dir/ckpt.safetensors" > /dev/null
cp "$dir/ckpt.safetensors" "$dir/before.safetensors"
expect_error "the checkpoint's model has layers 2, this run's has 3" "${small[@]}" --layers 3 --data "$corpus" \
  --logdir "$dir/logs" --steps 6 --resume "$dir/ckpt.safetensors" --save "$dir/ckpt.safetensors"
head -c 100 "$dir/before.safetensors" > "$dir/truncated.safetensors"
expect_error "truncated.safetensors" "${small[@]}" --data "$corpus" --logdir "$dir/logs" --steps 6 \
  --resume "$dir/truncated.safetensors"
cmp "$dir/ckpt.safetensors" "$dir/before.safetensors"
echo "ok: the checkpoint is unchanged"
