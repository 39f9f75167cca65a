#!/bin/bash
# abnul.sh ROUNDS TREE OLD NEW: cold backups into fresh repositories, binaries alternating
S=$(rustc --print sysroot)
export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 LARDER_PASSWORD=x LARDER_CACHE_DIR=/var/tmp/zcache LARDER_STATE_DIR=/var/tmp/zstate LARDER_REPOSITORY=/var/tmp/zrepo
R=$1; T=$2; OLD=$3; NEW=$4
if [ $T = src ]; then P="$HOME/.cargo/registry/src $S/lib"; else P=/var/tmp/dt/corpus; fi
tar cf - $P 2>/dev/null | cat > /dev/null
for r in $(seq $R); do
  if [ $((r % 2)) = 0 ]; then order="$OLD $NEW"; else order="$NEW $OLD"; fi
  for L in $order; do
    rm -rf /var/tmp/zrepo /var/tmp/zcache /var/tmp/zstate
    $L -q init
    t=$( { /usr/bin/time -f "%e %U %S %M" $L -q backup $P; } 2>&1 | tail -1)
    echo "$T $(basename $L) $t $(du -sb /var/tmp/zrepo/packs | cut -f1) $(du -sb /var/tmp/zrepo | cut -f1)"
  done
done
