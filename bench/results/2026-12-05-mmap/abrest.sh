#!/bin/bash
# abrest.sh MODE ROUNDS BIN...: restore latest snapshot of the prepared repo onto /dev/shm; rss_kib wall user sys
set -e
MODE=$1; N=$2; shift 2; BINS=("$@")
P=/var/tmp/dt/prep-$MODE; D=/dev/shm/abr
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_REPOSITORY=$P/repo LARDER_CACHE_DIR=$P/cache LARDER_STATE_DIR=$P/state
if [ "$MODE" = cheap ]; then export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10; fi
for i in $(seq $N); do
  if [ $((i % 2)) = 1 ]; then order=("${BINS[@]}"); else order=($(printf '%s\n' "${BINS[@]}" | tac)); fi
  for b in "${order[@]}"; do
    rm -rf $D; mkdir -p $D; sync
    /usr/bin/time -f '%M %e %U %S' -o /tmp/abr.t $b -q restore latest --target $D >/dev/null
    echo "$(basename $b) $i $(cat /tmp/abr.t)"
  done
done
rm -rf $D
