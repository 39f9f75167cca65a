#!/bin/bash
# abrss.sh MODE ROUNDS BIN... (CORPUS=DIR PREP=DIR: another tree and where its prepared repository goes; the usual tree by default): incremental backup peak RSS (KiB) and wall, binaries alternated, on prepared repos
# NOEDIT=1: an unchanged re-backup instead (no edits applied)
# MODE real|cheap. Prepared once per MODE in /var/tmp/dt/prep-MODE (init + cold + re-backup by the first BIN).
set -e
MODE=$1; N=$2; shift 2; BINS=("$@")
C=${CORPUS:-/var/tmp/dt/corpus}; P=${PREP:-/var/tmp/dt/prep-$MODE}; W=/var/tmp/dt/abw
export LARDER_PASSWORD="larder-bench passphrase 5"
if [ "$MODE" = cheap ]; then export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10; fi
if [ ! -d $P ]; then
  mkdir -p $P
  LARDER_REPOSITORY=$P/repo LARDER_CACHE_DIR=$P/cache LARDER_STATE_DIR=$P/state ${BINS[0]} -q init >/dev/null
  LARDER_REPOSITORY=$P/repo LARDER_CACHE_DIR=$P/cache LARDER_STATE_DIR=$P/state ${BINS[0]} -q backup $C >/dev/null
  LARDER_REPOSITORY=$P/repo LARDER_CACHE_DIR=$P/cache LARDER_STATE_DIR=$P/state ${BINS[0]} -q backup $C >/dev/null
fi
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
for i in $(seq $N); do
  if [ $((i % 2)) = 1 ]; then order=("${BINS[@]}"); else order=($(printf '%s\n' "${BINS[@]}" | tac)); fi
  for b in "${order[@]}"; do
    rm -rf $W; mkdir -p $W; cp -a $P/repo $P/cache $P/state $W/
    [ "${NOEDIT:-0}" = 1 ] || python3 /work/main/scripts/bench_data.py edit apply $C $W/edit-save 5 >/dev/null
    sync
    /usr/bin/time -f '%M %e %U %S' -o $W/t $b -q backup $C >/dev/null
    [ "${NOEDIT:-0}" = 1 ] || python3 /work/main/scripts/bench_data.py edit revert $C $W/edit-save
    echo "$(basename $b) $i $(cat $W/t)"
  done
done
rm -rf $W
