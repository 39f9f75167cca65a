#!/bin/bash
# run.sh BIN WORK RUN ROUNDS: backups of large files, larder's read against
# memmap2, with BIN built from prototype.patch (its switches LARDER_MMAP_MIN and
# LARDER_MMAP_WIN choose the mode; without them BIN reads as larder does).
# WORK holds r/rand.bin (1 GiB from /dev/urandom) and c/corpus.tar (a tar of the
# benchmark tree). Prints one line per sample:
#   run set mode round wall_s user_s sys_s maxrss_kib repo_bytes
# Each backup goes into a fresh repository. Modes are interleaved, their order
# rotated each round; a cheap key (work factor 10) keeps the key derivation's
# noise out.
set -eu
BIN=$1; W=$2; RUN=$3; N=$4
export LARDER_PASSWORD=benchpw LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10
export LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
unset LARDER_MMAP_MIN LARDER_MMAP_WIN LARDER_MMAP_CHECK
cd "$W"
modes=(read mmap-whole mmap-32MiB)
for set in r c; do
  for i in $(seq "$N"); do
    k=$(( i % 3 )); order=("${modes[@]:$k}" "${modes[@]:0:$k}")
    for m in "${order[@]}"; do
      rm -rf repo cache state
      LARDER_REPOSITORY=$W/repo "$BIN" -q init >/dev/null
      cat "$set"/* >/dev/null
      case $m in
        read) env=() ;;
        mmap-whole) env=(LARDER_MMAP_MIN=1 LARDER_MMAP_WIN=0) ;;
        mmap-32MiB) env=(LARDER_MMAP_MIN=1 LARDER_MMAP_WIN=33554432) ;;
      esac
      r=$(env "${env[@]}" LARDER_REPOSITORY=$W/repo /usr/bin/time -f "%e %U %S %M" "$BIN" -q backup "$W/$set" 2>&1 >/dev/null | tail -1)
      echo "$RUN backup-$set $m $i $r $(du -sb repo | cut -f1)"
    done
  done
done
