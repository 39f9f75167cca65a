#!/bin/bash
# chk.sh BIN REPO RUN ROUNDS: check --read-data of REPO, read / reuse / mmap interleaved
set -eu
BIN=$1; R=$2; RUN=$3; N=$4
export LARDER_PASSWORD=benchpw LARDER_CACHE_DIR=$(dirname $R)/cache-$(basename $R) LARDER_REPOSITORY=$R
export LARDER_STATE_DIR=$(dirname $R)/state-chk; rm -rf $LARDER_STATE_DIR
unset LARDER_MMAP_CHECK LARDER_CHECK_REUSE
modes=(read reuse mmap)
for i in $(seq "$N"); do
  k=$(( i % 3 )); order=("${modes[@]:$k}" "${modes[@]:0:$k}")
  for m in "${order[@]}"; do
    cat $R/packs/*/* >/dev/null
    case $m in read) env=();; reuse) env=(LARDER_CHECK_REUSE=1);; mmap) env=(LARDER_MMAP_CHECK=$R);; esac
    r=$(env "${env[@]}" /usr/bin/time -f "%e %U %S %M" "$BIN" -q check --read-data 2>&1 >/dev/null | tail -1)
    echo "$RUN check-$(basename $R) $m $i $r $(du -sb $R | cut -f1)"
  done
done
