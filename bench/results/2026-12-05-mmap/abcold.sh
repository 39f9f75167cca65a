#!/bin/bash
# abcold.sh MODE ROUNDS BIN...: cold backup of the usual tree into a fresh repo; rss_kib wall user sys
set -e
MODE=$1; N=$2; shift 2; BINS=("$@")
C=/var/tmp/dt/corpus; W=/var/tmp/dt/abc
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
if [ "$MODE" = cheap ]; then export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10; fi
find $C -type f -print0 | xargs -0 cat > /dev/null
for i in $(seq $N); do
  if [ $((i % 2)) = 1 ]; then order=("${BINS[@]}"); else order=($(printf '%s\n' "${BINS[@]}" | tac)); fi
  for b in "${order[@]}"; do
    rm -rf $W; mkdir -p $W; ${BINS[0]} -q init >/dev/null; sync
    /usr/bin/time -f '%M %e %U %S' -o $W/t $b -q backup $C >/dev/null
    echo "$(basename $b) $i $(cat $W/t)"
  done
done
rm -rf $W
