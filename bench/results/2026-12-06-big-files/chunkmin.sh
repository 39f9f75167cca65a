#!/bin/bash
# chunkmin.sh ROUNDS TREE BIN "MIN..." : larder with another minimum chunk
# size (BIN is a build with xchunk.patch, which reads LARDER_XCHUNK_MIN at
# `init`; average 256 KiB and maximum 1 MiB as committed). Per round and
# minimum, in an order that rotates by round: a fresh copy of TREE, a fresh
# repository (real key), a cold backup, then 100 blocks of 1 KiB edited at
# random offsets of the copy's largest file (edit.py, seeded by the round, as
# incr.sh does), the incremental backup, and `snapshots` (the open cost).
# CHUNKMIN_EDIT=insert inserts the 100 blocks instead (edit.py's modes).
# One line per step: MIN ROUND STEP WALL_S USER_S SYS_S PEAK_KIB repo BYTES.
set -euo pipefail
R=${1:?usage: chunkmin.sh ROUNDS TREE BIN "MIN..."}; TREE=$2; BIN=$3; MINS=($4)
W=${CHUNKMIN_DIR:-/var/tmp/chunkmin}
export LARDER_PASSWORD=chunkmin LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
k=${#MINS[@]}
for r in $(seq "$R"); do
    for i in $(seq 0 $((k - 1))); do
        m=${MINS[$(((i + r - 1) % k))]}
        rm -rf "$W"; mkdir -p "$W"; cp -a "$TREE" "$W/tree"
        BIG=$(find "$W/tree" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
        LARDER_XCHUNK_MIN=$m "$BIN" -q init > /dev/null
        find "$W/tree" -type f -print0 | xargs -0 cat > /dev/null
        step() {
            /usr/bin/time -o "$W/time" -f "%e %U %S %M" "$BIN" -q "$@" > /dev/null
            echo "$m $r $1 $(cat "$W/time") repo $(du -sb "$W/repo" | cut -f1)"
        }
        step backup "$W/tree"
        python3 "$(dirname "$0")/edit.py" "$BIG" "$r" "${CHUNKMIN_EDIT:-overwrite}"
        step backup "$W/tree" | sed 's/ backup / incremental /'
        step snapshots
    done
done
rm -rf "$W"
