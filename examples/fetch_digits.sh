#!/usr/bin/env bash
# Puts the UCI handwritten digits (scikit-learn's copy, 1797 samples) at .data/digits.csv.gz by
# extracting that one file from Debian's python3-sklearn package, which is downloaded but not installed.
set -euo pipefail
cd "$(dirname "$0")/.."

out=.data/digits.csv.gz
member=./usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
if [ -s "$out" ]; then
  echo "digits data: $out (already present)"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
if ! (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1); then
  # A fresh machine may have no package lists yet.
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update >/dev/null
  (cd "$tmp" && apt-get download python3-sklearn)
fi
dpkg-deb --fsys-tarfile "$tmp"/python3-sklearn_*.deb | tar -x -C "$tmp" "$member"
mkdir -p .data
cp "$tmp/$member" "$out"
echo "digits data: $out ($(zcat "$out" | wc -l) samples)"
