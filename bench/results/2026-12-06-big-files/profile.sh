#!/bin/bash
# profile.sh N BIN TREE: N rounds of a cold backup of TREE into a fresh
# repository (real key) and a restore of it onto tmpfs, each run once
# under `perf record -g` (999 Hz). Prints per run its time (GNU time,
# taken with perf attached) and the share of samples by category
# (scripts/perf_share.py).
set -euo pipefail
N=${1:?usage: profile.sh N BIN TREE}; BIN=$2; TREE=$3
W=/var/tmp/big-prof; T=/dev/shm/big-prof
export LARDER_PASSWORD="big-files profile"
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
SHARE=$(cd "$(dirname "$0")/../../.." && pwd)/scripts/perf_share.py
categorize() {
  perf report -i "$1" --no-children --sort sym --stdio -g none 2>/dev/null | python3 "$SHARE"
}
for i in $(seq "$N"); do
  rm -rf "$W" "$T"; mkdir -p "$W"; "$BIN" -q init > /dev/null
  find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
  /usr/bin/time -f "cold backup $i (under perf): %e s wall, %U s user, %S s sys, %M KiB" \
    perf record -q -F 999 -g -o "$W/backup.data" "$BIN" -q backup "$TREE" > /dev/null
  categorize "$W/backup.data"
  /usr/bin/time -f "restore $i (under perf): %e s wall, %U s user, %S s sys, %M KiB" \
    perf record -q -F 999 -g -o "$W/restore.data" "$BIN" -q restore latest --target "$T" > /dev/null
  categorize "$W/restore.data"
  rm -rf "$T"
done
rm -rf "$W"
