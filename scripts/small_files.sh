#!/bin/bash
# A cold backup of many small files: makes trees of N files of SIZE random
# bytes (1,000 to a directory) and backs each up with each given larder
# binary into a fresh local repository (key of low work factor), in turn,
# ROUNDS times. Prints one line per backup: binary, files, wall, user and
# system seconds, peak RSS (KiB, GNU time), index segments and packs written.
#
#   scripts/small_files.sh ROUNDS "50000 300000" LARDER...
#
# Environment: SMALL_SIZE (bytes per file, default 1024), SMALL_DIR (work
# directory, default /var/tmp/larder-small; the trees are kept there between
# invocations), SMALL_TIMEOUT (seconds a backup may run before it is killed
# and reported as such, default 900).
set -euo pipefail
ROUNDS=${1:?usage: scripts/small_files.sh ROUNDS "N..." LARDER...}
COUNTS=${2:?}
shift 2
SIZE=${SMALL_SIZE:-1024}
W=${SMALL_DIR:-/var/tmp/larder-small}
LIMIT=${SMALL_TIMEOUT:-900}
export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 LARDER_PASSWORD=small-files
mkdir -p "$W"
for n in $COUNTS; do
    t=$W/tree-$n-$SIZE
    [ -d "$t" ] || python3 "$(dirname "$0")/small_tree.py" "$t" "$n" "$SIZE"
done
for r in $(seq "$ROUNDS"); do
    for n in $COUNTS; do
        t=$W/tree-$n-$SIZE
        find "$t" -type f -print0 | xargs -0 cat > /dev/null
        for l in "$@"; do
            rm -rf "$W/repo" "$W/cache" "$W/state"
            export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
            "$l" -q init
            out=$( { /usr/bin/time -f "%e %U %S %M" timeout -s KILL "$LIMIT" "$l" -q backup "$t"; } 2>&1 | tail -1 || true)
            # timeout's own times are what GNU time sees of a killed run.
            if awk -v w="${out%% *}" -v l="$LIMIT" 'BEGIN { exit !(w + 0 >= l) }'; then
                out="killed after ${LIMIT} s"
            fi
            echo "$(basename "$l") $n $out segments $(ls "$W/repo/index" | wc -l) packs $(find "$W/repo/packs" -type f | wc -l)"
        done
    done
done
rm -rf "$W/repo" "$W/cache" "$W/state"
