#!/usr/bin/env bash
# train_gpt --profile on a small CPU model: the table is printed, and the Chrome trace parses and
# names the model's ops. Usage: test_gpt_profile.sh TRAIN_GPT CORPUS WORKDIR (exit 77: no corpus).
set -euo pipefail
train_gpt=$1 corpus=$2 dir=$3
[ -s "$corpus" ] || exit 77
mkdir -p "$dir"
out=$("$train_gpt" --preset cpu --data "$corpus" --logdir "$dir/run" --layers 2 --d-model 64 --context 64 \
  --steps 6 --profile-warmup 2 --profile-steps 3 --profile "$dir/trace.json" --sample-chars 0)
grep -q "profile of steps 3 to 5" <<<"$out" || { echo "no profile report in:"; echo "$out"; exit 1; }
grep -q "Self CPU time total" <<<"$out" || { echo "no table in:"; echo "$out"; exit 1; }
python3 - "$dir/trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["name"] for e in events if e.get("ph") == "X"}
missing = {"linear", "layer_norm", "adam_step_"} - names
assert not missing, f"trace lacks {missing}; it has {sorted(names)[:20]}"
print(f"trace: {len(events)} events, ops include linear, layer_norm, adam_step_")
PY
