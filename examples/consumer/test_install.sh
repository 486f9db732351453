#!/usr/bin/env bash
# Installs a configured tapegraph build into a temporary prefix, then configures, builds and runs
# the consumer project against it with find_package(tapegraph).
#   test_install.sh <build dir> [extra cmake arguments for the consumer]
# TG_DEPENDENCY_PREFIXES (colon-separated) names where tapegraph's own dependencies were found.
set -euo pipefail
build="$1"
shift
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" 
test -f "$tmp/prefix/lib/cmake/tapegraph/tapegraphConfig.cmake"
test -f "$tmp/prefix/lib/cmake/tapegraph/tapegraphConfigVersion.cmake"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
prefixes="$tmp/prefix"
if [ -n "${TG_DEPENDENCY_PREFIXES:-}" ]; then prefixes="$prefixes;${TG_DEPENDENCY_PREFIXES//:/;}"; fi
cmake -S "$here" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefixes" \
  "${launcher[@]}" "$@"
cmake --build "$tmp/build" 
"$tmp/build/consumer"
