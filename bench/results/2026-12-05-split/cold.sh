#!/bin/bash
# cold.sh ROUNDS BIN: cold backups of the second tree (cheap key) into a
# fresh repository, split on (default) and off (LARDER_SPLIT_MIN above
# any file), alternating. After each: the repository's size, and what
# `prune --dry-run` finds unused (the helper's chunks that no file took).
# Prints: SPLIT ROUND peak-KiB wall user sys repo-KiB, then prune's lines.
set -e
N=$1; BIN=$2
C=${CORPUS:-/var/tmp/src2}; W=/var/tmp/split-cold
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
find $C -type f -exec cat {} + > /dev/null
for i in $(seq "$N"); do
  for split in on off; do
    if [ $split = on ]; then unset LARDER_SPLIT_MIN; else export LARDER_SPLIT_MIN=1000000000000; fi
    rm -rf $W; mkdir -p $W
    "$BIN" -q init >/dev/null
    sync
    /usr/bin/time -f '%M %e %U %S' -o $W/t "$BIN" -q backup $C >/dev/null
    echo "$split $i $(cat $W/t) $(du -sk $W/repo | cut -f1)"
    "$BIN" prune --dry-run | grep -E "unused|repository:" | sed 's/^/  /'
  done
done
rm -rf $W
