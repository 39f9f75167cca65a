#!/bin/bash
# ab-restore.sh ROUNDS REPO A B: restores of REPO onto /dev/shm by binaries A and B,
# interleaved, the order alternating by round (LARDER_PASSWORD=pw). One line per
# restore: binary, wall s, user s, sys s, peak KiB.
R=$1; REPO=$2; A=$3; B=$4
export LARDER_PASSWORD=pw
for i in $(seq $R); do
  if [ $((i % 2)) = 1 ]; then order="$A $B"; else order="$B $A"; fi
  for b in $order; do
    rm -rf /dev/shm/r
    /usr/bin/time -f "$(basename $b) %e %U %S %M" $b -r $REPO -q restore latest --target /dev/shm/r
  done
done 2>&1
rm -rf /dev/shm/r
