#!/bin/bash
# ablanes.sh ROUNDS REPO: restore onto tmpfs, LARDER_LANES=0 vs 1 alternating
export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 LARDER_PASSWORD=x LARDER_CACHE_DIR=/var/tmp/scache LARDER_STATE_DIR=/var/tmp/sstate LARDER_REPOSITORY=$2
L=/var/tmp/larder-lanes
cat $2/packs/*/* > /dev/null 2>&1; cat $2/packs/* > /dev/null 2>&1
for r in $(seq $1); do
  if [ $((r % 2)) = 0 ]; then order="0 1"; else order="1 0"; fi
  for v in $order; do
    rm -rf /dev/shm/r; sync
    t=$( { LARDER_LANES=$v /usr/bin/time -f "%e %U %S %M" $L -q restore latest --target /dev/shm/r; } 2>&1 | tail -1)
    echo "lanes=$v $t"
  done
done
rm -rf /dev/shm/r
