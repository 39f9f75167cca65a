#!/bin/bash
# same.sh BIN [TREE]: a backup without the listing made while the key is
# derived, then one with it (--force: every file read again), into one
# repository (real key); prints each snapshot's root tree, which should
# be the same.
set -e
BIN=$1; TREE=${2:-/var/tmp/dt/corpus}
W=/var/tmp/prewalk-same
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
rm -rf "$W"; mkdir -p "$W"; "$BIN" -q init >/dev/null
LARDER_NO_PREWALK=1 "$BIN" -q backup "$TREE" >/dev/null
"$BIN" -q backup --force "$TREE" >/dev/null
"$BIN" snapshots --json | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    print(s["tree"], s["summary"]["files_new"], "new files")'
rm -rf "$W"
