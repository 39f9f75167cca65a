#!/bin/bash
# incr.sh ROUNDS BIN: the second tree's incremental backup (cheap key) on a
# copy of a prepared repository, three ways, alternating each round:
#   all   - the benchmark's edits (scripts/bench_data.py edit apply, seed 5)
#   big   - only the largest file the edits change (librustc_driver, 146.5
#           MiB), with 100 bytes appended
#   none  - nothing changed (an unchanged re-backup)
# Each round first runs an untimed backup on the copy, so that its parent
# snapshot has the ctimes the earlier rounds' reverts left (as in the
# benchmark, where the edits follow a second backup).
# Prints: MODE ROUND peak-KiB wall user sys.
# CORPUS (default /var/tmp/src2) and PREP (default /var/tmp/prep-src2, made
# by ../2026-12-05-mmap/abrss.sh cheap) as there.
set -e
N=$1; BIN=$2
C=${CORPUS:-/var/tmp/src2}; P=${PREP:-/var/tmp/prep-src2}; W=/var/tmp/incr-w
BIG=${BIG:-$C/1-lib/librustc_driver-6108105cd7e839cf.so}
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
for i in $(seq "$N"); do
  for mode in all big none; do
    rm -rf $W; mkdir -p $W; cp -a $P/repo $P/cache $P/state $W/
    "$BIN" -q backup $C >/dev/null
    case $mode in
      all) python3 /work/main/scripts/bench_data.py edit apply $C $W/edit-save 5 >/dev/null ;;
      big) cp -a "$BIG" $W/big-save; head -c 100 /dev/urandom >> "$BIG" ;;
    esac
    sync
    /usr/bin/time -f '%M %e %U %S' -o $W/t "$BIN" -q backup $C >/dev/null
    case $mode in
      all) python3 /work/main/scripts/bench_data.py edit revert $C $W/edit-save ;;
      big) cp -a $W/big-save "$BIG" ;;
    esac
    echo "$mode $i $(cat $W/t)"
  done
done
rm -rf $W
