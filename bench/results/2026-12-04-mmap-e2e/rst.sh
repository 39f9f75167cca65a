#!/bin/bash
# rst.sh BIN REPO RUN ROUNDS: restore of REPO's latest snapshot onto tmpfs, read / mmap interleaved
set -eu
BIN=$1; R=$2; RUN=$3; N=$4
export LARDER_PASSWORD=benchpw LARDER_CACHE_DIR=$(dirname $R)/cache-$(basename $R) LARDER_REPOSITORY=$R
export LARDER_STATE_DIR=$(dirname $R)/state-rst; rm -rf $LARDER_STATE_DIR
unset LARDER_MMAP_RESTORE
T=/dev/shm/mmap-rst
for i in $(seq "$N"); do
  if [ $((i % 2)) = 0 ]; then order="read mmap"; else order="mmap read"; fi
  for m in $order; do
    rm -rf $T; cat $R/packs/*/* >/dev/null
    if [ $m = mmap ]; then env=(LARDER_MMAP_RESTORE=$R); else env=(); fi
    r=$(env "${env[@]}" /usr/bin/time -f "%e %U %S %M" "$BIN" -q restore latest --target $T 2>&1 >/dev/null | tail -1)
    echo "$RUN restore-$(basename $R) $m $i $r $(du -sb $T | cut -f1)"
  done
done
rm -rf $T
