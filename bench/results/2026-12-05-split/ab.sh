#!/bin/bash
# ab.sh ROUNDS BIN: the second tree's incremental backup (cheap key) on a
# copy of a prepared repository, with the large-file split on (the
# default, files of 32 MiB and more read by two workers) and off
# (LARDER_SPLIT_MIN above any file), alternating each round, two ways:
#   all - the benchmark's edits (scripts/bench_data.py edit apply, seed 5)
#   big - only librustc_driver (146.5 MiB), with 100 bytes appended
# Each round first runs an untimed backup on the copy, as in
# ../2026-12-05-incr-src/incr.sh. Prints: MODE SPLIT ROUND peak-KiB wall user sys.
# CORPUS (default /var/tmp/src2) and PREP (default /var/tmp/prep-src2).
set -e
N=$1; BIN=$2
C=${CORPUS:-/var/tmp/src2}; P=${PREP:-/var/tmp/prep-src2}; W=/var/tmp/split-w
BIG=${BIG:-$C/1-lib/librustc_driver-6108105cd7e839cf.so}
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
for i in $(seq "$N"); do
  for mode in all big; do
    for split in on off; do
      if [ $split = on ]; then unset LARDER_SPLIT_MIN; else export LARDER_SPLIT_MIN=1000000000000; fi
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
      echo "$mode $split $i $(cat $W/t)"
    done
  done
done
rm -rf $W
