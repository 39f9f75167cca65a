#!/bin/bash
# blobs.sh BIN TREE "MIN..." : how many blobs one backup of TREE makes with
# each minimum chunk size (BIN built with ../2026-12-06-big-files/xchunk.patch),
# from `stats --mode raw-data --json` (blobs of data and trees). A cheap test
# key: only the counts matter here. One line per minimum: MIN blobs N
# uncompressed BYTES stored BYTES.
set -euo pipefail
BIN=${1:?usage: blobs.sh BIN TREE "MIN..."}; TREE=$2
W=${BLOBS_DIR:-/var/tmp/chunkmin-blobs}
export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 LARDER_PASSWORD=blobs
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
for m in $3; do
    rm -rf "$W"; mkdir -p "$W"
    LARDER_XCHUNK_MIN=$m "$BIN" -q init > /dev/null
    "$BIN" -q backup "$TREE" > /dev/null
    "$BIN" stats --mode raw-data --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(sys.argv[1], "blobs", s["total_blob_count"], "uncompressed", s["total_uncompressed_size"], "stored", s["total_size"])' "$m"
done
rm -rf "$W"
