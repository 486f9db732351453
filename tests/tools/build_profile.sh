#!/usr/bin/env bash
# Prints where a build's time went, from Ninja's log: the heaviest steps (compiles and links), the
# total compile and link CPU-seconds, and the compile seconds per top-level folder and per kind of
# source. Reads the last run of each output in BUILD/.ninja_log (a clean build gives the whole
# picture; an incremental one shows only what it rebuilt).
# Usage: tests/tools/build_profile.sh BUILD_DIR [TOP_N]
set -euo pipefail
build=${1:?usage: build_profile.sh BUILD_DIR [TOP_N]}
top=${2:-25}
log="$build/.ninja_log"
[ -f "$log" ] || { echo "build_profile: no $log (build with Ninja first)" >&2; exit 1; }
# The build graph's current outputs: the log still holds those of sources since removed.
targets=$(mktemp)
trap 'rm -f "$targets"' EXIT
ninja -C "$build" -t targets all 2>/dev/null | sed 's/: .*//' >"$targets" || true
python3 - "$log" "$top" "$targets" <<'PY'
import collections, os, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
log, top = sys.argv[1], int(sys.argv[2])
current = set(open(sys.argv[3]).read().split())
last = {}
with open(log) as f:
    for line in f:
        if line.startswith('#'):
            continue
        start, end, _mtime, target, _hash = line.rstrip('\n').split('\t')
        if not current or target in current:
            last[target] = (int(end) - int(start)) / 1000.0
def kind(target):
    if target.endswith('.o'):
        src = target[:-2]
        if '.dir/' in src:  # <subdir>/CMakeFiles/<target>.dir/<source>.o
            prefix = src.split('CMakeFiles/', 1)[0]
            src = prefix + src.split('.dir/', 1)[1]
        return 'compile', src
    if target.endswith(('.gch', '.pch')):
        return 'compile', target
    return 'link', target
compile_s = link_s = 0.0
by_folder, by_ext = collections.Counter(), collections.Counter()
rows = []
for target, secs in last.items():
    k, name = kind(target)
    rows.append((secs, k, name))
    if k == 'compile':
        compile_s += secs
        folder = name.split('/', 1)[0] if '/' in name else '.'
        by_folder[folder] += secs
        by_ext[os.path.splitext(name)[1] or name] += secs
    else:
        link_s += secs
rows.sort(reverse=True)
print(f'{len(last)} steps: {compile_s:.0f} s compiling, {link_s:.0f} s linking (CPU-seconds, each step as timed)')
print(f'\nheaviest {top} steps:')
for secs, k, name in rows[:top]:
    print(f'  {secs:7.1f} s  {k:7s}  {name}')
print('\ncompile seconds by folder:')
for folder, secs in by_folder.most_common():
    print(f'  {secs:7.1f} s  {folder}/')
print('\ncompile seconds by source kind:')
for ext, secs in by_ext.most_common():
    print(f'  {secs:7.1f} s  {ext}')
PY
