#!/bin/bash
# incr.sh ROUNDS TREE LARDER: an edited large file, larder against restic and
# rustic. TREE is copied to $W/tree; each tool backs the copy up once into a
# fresh repository of its own (untimed, real keys, own caches). Then each
# round edits 100 blocks of 1 KiB at random offsets of the copy's largest
# file (edit.py, seeded by the round) and times, per tool in an order
# that rotates by round: a backup of the copy (the incremental), then
# `snapshots` (the tool's open cost, to take out for the work). One line per
# step: TOOL ROUND STEP WALL_S USER_S SYS_S PEAK_KIB. INCR_EDIT=insert
# inserts the 100 blocks instead (edit.py MODE).
set -euo pipefail
R=${1:?usage: incr.sh ROUNDS TREE LARDER}; TREE=$2; LARDER=$3
RUSTIC=${SMALL_RUSTIC:-$HOME/.cache/larder-bench/rustic/bin/rustic}
W=${INCR_DIR:-/var/tmp/big-incr}
rm -rf "$W"; mkdir -p "$W"; cp -a "$TREE" "$W/tree"
BIG=$(find "$W/tree" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
export RESTIC_REPOSITORY=$W/restic RESTIC_CACHE_DIR=$W/restic-cache RESTIC_PASSWORD=incr
export RUSTIC_REPOSITORY=$W/rustic RUSTIC_PASSWORD=incr
export LARDER_REPOSITORY=$W/larder LARDER_CACHE_DIR=$W/larder-cache LARDER_STATE_DIR=$W/larder-state LARDER_PASSWORD=incr
run() { # TOOL ARGS...
    case $1 in
        restic) shift; restic -q "$@" ;;
        rustic) shift; "$RUSTIC" --no-progress --cache-dir "$W/rustic-cache" "$@" ;;
        larder) shift; "$LARDER" -q "$@" ;;
    esac
}
restic -q init --repository-version 2 > /dev/null
run rustic init > /dev/null 2>&1
run larder init > /dev/null
for t in larder restic rustic; do run $t backup "$W/tree" > /dev/null 2>&1; done
TOOLS=(larder restic rustic)
for r in $(seq "$R"); do
    python3 "$(dirname "$0")/edit.py" "$BIG" "$r" "${INCR_EDIT:-overwrite}"
    find "$W/tree" -type f -print0 | xargs -0 cat > /dev/null
    for i in 0 1 2; do
        t=${TOOLS[$(((i + r - 1) % 3))]}
        /usr/bin/time -o "$W/time" -f "%e %U %S %M" bash -c "$(declare -f run); $(declare -p W LARDER RUSTIC); run $t backup $W/tree" > /dev/null 2>&1
        echo "$t $r incremental $(cat "$W/time")"
        /usr/bin/time -o "$W/time" -f "%e %U %S %M" bash -c "$(declare -f run); $(declare -p W LARDER RUSTIC); run $t snapshots" > /dev/null 2>&1
        echo "$t $r snapshots $(cat "$W/time")"
    done
done
rm -rf "$W"
