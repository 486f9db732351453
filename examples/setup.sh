#!/usr/bin/env bash
# Installs the Debian 12 packages tapegraph needs to build, test and benchmark (a no-op when all
# are present). The examples fetch their data (the fortunes corpus, the digits) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ libeigen3-dev libopenblas-dev libdnnl-dev libgtest-dev libbenchmark-dev zlib1g-dev nlohmann-json3-dev libgloo-dev python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "installing: ${missing[*]}"
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
