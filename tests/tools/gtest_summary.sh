#!/usr/bin/env bash
# Totals the JUnit reports the gtest programs wrote under DIR (one CTest test per program):
# how many test cases ran, passed, were skipped (no GPU, no data) and failed, over how many programs.
# Exits 1 when a case failed or no report is there.
set -euo pipefail
dir="${1:?usage: gtest_summary.sh BUILD_DIR/gtest-results}"
shopt -s nullglob
reports=("$dir"/*.xml)
if [ ${#reports[@]} -eq 0 ]; then
  echo "gtest summary: no reports in $dir" >&2
  exit 1
fi
tests=0 failed=0 skipped=0
for f in "${reports[@]}"; do
  # The root element carries the program's totals; each skipped case holds a <skipped> element.
  root=$(grep -m1 -o '<testsuites [^>]*>' "$f")
  t=$(sed -n 's/.* tests="\([0-9]*\)".*/\1/p' <<<"$root")
  fl=$(sed -n 's/.* failures="\([0-9]*\)".*/\1/p' <<<"$root")
  er=$(sed -n 's/.* errors="\([0-9]*\)".*/\1/p' <<<"$root")
  sk=$(grep -c '<skipped' "$f" || true)
  tests=$((tests + t)) failed=$((failed + fl + er)) skipped=$((skipped + sk))
done
echo "gtest summary: ${tests} test cases in ${#reports[@]} programs: $((tests - failed - skipped)) passed," \
     "${skipped} skipped, ${failed} failed"
[ "$failed" -eq 0 ]
