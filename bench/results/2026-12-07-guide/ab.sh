#!/bin/bash
# ab.sh ROUNDS MODE BIN_A BIN_B: an edited large file, two larder builds, each
# with its own repository of the same tree copy. Each round edits the largest
# file (edit.py MODE, seeded by the round), then times per build (order
# alternating by round) the incremental backup and `snapshots`.
set -euo pipefail
R=$1; MODE=$2; A=$3; B=$4
EDIT=/work/main/bench/results/2026-12-06-big-files/edit.py
W=/var/tmp/guide-ab/w; rm -rf $W; mkdir -p $W; cp -a /var/tmp/bigtree $W/tree
BIG=$W/tree/img-a.tar
export LARDER_PASSWORD=ab
for n in a b; do
  bin=$A; [ $n = b ] && bin=$B
  LARDER_REPOSITORY=$W/repo-$n LARDER_CACHE_DIR=$W/cache-$n LARDER_STATE_DIR=$W/state-$n $bin -q init >/dev/null
  LARDER_REPOSITORY=$W/repo-$n LARDER_CACHE_DIR=$W/cache-$n LARDER_STATE_DIR=$W/state-$n $bin -q backup $W/tree >/dev/null
done
for r in $(seq $R); do
  python3 $EDIT $BIG $r $MODE
  cat $W/tree/* > /dev/null
  order="a b"; [ $((r % 2)) = 0 ] && order="b a"
  for n in $order; do
    bin=$A; [ $n = b ] && bin=$B
    export LARDER_REPOSITORY=$W/repo-$n LARDER_CACHE_DIR=$W/cache-$n LARDER_STATE_DIR=$W/state-$n
    /usr/bin/time -o $W/t -f "%e %U %S %M" $bin -q backup $W/tree > /dev/null
    echo "$n $r incremental $(cat $W/t)"
    /usr/bin/time -o $W/t -f "%e %U %S %M" $bin -q snapshots > /dev/null
    echo "$n $r snapshots $(cat $W/t)"
  done
done
for n in a b; do
  LARDER_REPOSITORY=$W/repo-$n LARDER_CACHE_DIR=$W/cache-$n LARDER_STATE_DIR=$W/state-$n ${A} -q ls latest --json 2>/dev/null | head -c 0 || true
done
du -sb $W/repo-a $W/repo-b
