#!/bin/bash
# count.sh BIN TREE...: how much of each tree the prototype lists before
# the key is ready (LARDER_PREWALK_REPORT makes it say so), against the
# tree's directories and entries; three cold backups (real key) each.
set -e
BIN=$1; shift
W=/var/tmp/prewalk-count
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
for TREE in "$@"; do
  echo "$TREE: $(find "$TREE" -type d | wc -l) directories, $(( $(find "$TREE" | wc -l) - 1 )) entries below it"
  for i in 1 2 3; do
    rm -rf "$W"; mkdir -p "$W"; "$BIN" -q init >/dev/null
    LARDER_PREWALK_REPORT=1 "$BIN" -q backup "$TREE" 2>&1 >/dev/null | grep prewalk
  done
done
rm -rf "$W"
