#!/bin/bash
# usage: zb.sh ROUNDS TREE variant...   (variant: "-" default, or a level for binary blobs, LARDER_ZBIN)
export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 LARDER_PASSWORD=x LARDER_CACHE_DIR=/var/tmp/zb/cache LARDER_STATE_DIR=/var/tmp/zb/state LARDER_REPOSITORY=/var/tmp/zb/repo
L=${ZB_LARDER:-/var/tmp/larder-zb}
R=$1; shift; P=$1; shift
tar cf - $P 2>/dev/null | cat > /dev/null
for r in $(seq $R); do for v in "$@"; do
  rm -rf /var/tmp/zb/repo /var/tmp/zb/cache /var/tmp/zb/state
  $L -q init
  if [ "$v" = - ]; then e=""; else e="env LARDER_ZBIN=$v"; fi
  t=$( { $e /usr/bin/time -f "%e %U %S %M" $L -q backup $P; } 2>&1 | tail -1)
  echo "$v $t $(du -sb /var/tmp/zb/repo | cut -f1)"
done; done
