#!/bin/bash
# ab.sh ROUNDS TREE BIN "MIN..." : the benchmark's daily rows of larder with
# each minimum chunk size, on a benchmark tree. BIN is a build with
# ../2026-12-06-big-files/xchunk.patch (`init` reads LARDER_XCHUNK_MIN;
# average 256 KiB and maximum 1 MiB as committed). Per round and minimum, in
# an order that rotates by round, with the real key: a fresh repository, the
# tree read into the page cache, then
#   backup       the cold backup
#   rebackup     an unchanged re-backup
#   incremental  a backup after scripts/bench_data.py's edits (seed 5 as the
#                benchmark's: 500 files edited, 100 added, 100 deleted;
#                reverted after)
#   restore      the first snapshot restored onto tmpfs
#   snapshots    the open cost, taken out to give the work
# One line per step: MIN ROUND STEP WALL_S USER_S SYS_S PEAK_KIB repo BYTES.
set -euo pipefail
R=${1:?usage: ab.sh ROUNDS TREE BIN "MIN..."}; TREE=$2; BIN=$3; MINS=($4)
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/../../../scripts/bench_data.py
W=${AB_DIR:-/var/tmp/chunkmin-ab}; SHM=${AB_SHM:-/dev/shm/chunkmin-ab}
export LARDER_PASSWORD=chunkmin LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
k=${#MINS[@]}
for r in $(seq "$R"); do
    for i in $(seq 0 $((k - 1))); do
        m=${MINS[$(((i + r - 1) % k))]}
        rm -rf "$W" "$SHM"; mkdir -p "$W" "$SHM"
        LARDER_XCHUNK_MIN=$m "$BIN" -q init > /dev/null
        find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
        step() {
            local name=$1; shift
            /usr/bin/time -o "$W/time" -f "%e %U %S %M" "$BIN" -q "$@" > /dev/null
            echo "$m $r $name $(cat "$W/time") repo $(du -sb "$W/repo" | cut -f1)"
        }
        step backup backup "$TREE"
        step rebackup backup "$TREE"
        python3 "$DATA" edit apply "$TREE" "$W/save" 5 > /dev/null
        step incremental backup "$TREE"
        python3 "$DATA" edit revert "$TREE" "$W/save"
        first=$("$BIN" snapshots --json | python3 -c 'import json,sys; print(sorted(json.load(sys.stdin), key=lambda s: s["time"])[0]["id"])')
        step restore restore "$first" --target "$SHM/t"
        rm -rf "$SHM/t"
        step snapshots snapshots
    done
done
rm -rf "$W" "$SHM"
