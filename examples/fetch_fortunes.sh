#!/usr/bin/env bash
# Puts an English text corpus at .data/fortunes.txt: the cookie files of Debian's `fortunes` package
# (about 2.4 MB of quotations, jokes and verse, entries separated by lines of a single '%'), which is
# downloaded but not installed. The files are joined in name order.
set -euo pipefail
cd "$(dirname "$0")/.."

out=.data/fortunes.txt
if [ -s "$out" ]; then
  echo "fortunes corpus: $out (already present)"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
if ! (cd "$tmp" && apt-get download fortunes >/dev/null 2>&1); then
  # A fresh machine may have no package lists yet.
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update >/dev/null
  (cd "$tmp" && apt-get download fortunes)
fi
dpkg-deb -x "$tmp"/fortunes_*.deb "$tmp/root"
dir="$tmp/root/usr/share/games/fortunes"
mkdir -p .data
# The cookie files themselves (not the .dat indexes, not the .u8 links to the same files), each
# closed by a '%' line so that the last entry of one file never runs into the first of the next.
find "$dir" -maxdepth 1 -type f ! -name '*.dat' -print0 | sort -z |
  while IFS= read -r -d '' f; do cat "$f"; printf '%%\n'; done > "$out.tmp"
mv "$out.tmp" "$out"
echo "fortunes corpus: $out ($(wc -c < "$out") bytes, $(grep -c '^%$' "$out") entries)"
