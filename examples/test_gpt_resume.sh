#!/usr/bin/env bash
# Checks that train_gpt resumed from a mid-epoch checkpoint logs the same training loss, step by
# step, as the uninterrupted run: relative difference at most 1e-5 at each of the 100 steps after it.
#   test_gpt_resume.sh <train_gpt> <fortunes.txt> [extra flags, e.g. --preset cpu]
set -euo pipefail
bin="$1" corpus="$2"
shift 2
if [ ! -s "$corpus" ]; then
  echo "no corpus at $corpus (examples/fetch_fortunes.sh fetches it): skipped"
  exit 77
fi
here="$(cd "$(dirname "$0")" && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
common=(--data "$corpus" --steps 130 --log-every 1 --eval-every 1000 --sample-chars 0 "$@")
"$bin" "${common[@]}" --logdir "$dir/whole" > "$dir/whole.log"
"$bin" "${common[@]}" --logdir "$dir/first" --save "$dir/ckpt.safetensors" --ckpt-every 1000 --stop-at 30 \
  > "$dir/first.log"
"$bin" "${common[@]}" --logdir "$dir/resumed" --resume "$dir/ckpt.safetensors" > "$dir/resumed.log"
grep -h "resumed from" "$dir/resumed.log"
python3 - "$here/../tests/tools/read_tfevents.py" "$dir/whole" "$dir/resumed" <<'PY'
import json, subprocess, sys
reader, whole, resumed = sys.argv[1:]
def losses(d):
    out = json.loads(subprocess.check_output([sys.executable, reader, d]))["scalars"]
    return {r["step"]: r["value"] for r in out if r["tag"] == "train/loss"}
a, b = losses(whole), losses(resumed)
steps = sorted(b)
assert steps == list(range(31, 131)), f"the resumed run logged steps {steps[:3]}...{steps[-3:]}, expected 31..130"
worst = max(abs(b[s] - a[s]) / max(abs(a[s]), 1e-30) for s in steps)
print(f"resumed at step 30: 100 steps compared, largest relative loss difference {worst:.2e}")
bitwise = sum(a[s] == b[s] for s in steps)
print(f"bitwise equal at {bitwise} of 100 steps")
sys.exit(0 if worst <= 1e-5 else 1)
PY
