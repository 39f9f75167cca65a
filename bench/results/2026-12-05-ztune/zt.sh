#!/bin/bash
# usage: [TREE='DIR...'] zt.sh ROUNDS variant...  (TREE: the second tree unless given)   (variant "-" = default, else LARDER_ZTUNE value, or Ln for level)
S=$(rustc --print sysroot)
export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 LARDER_PASSWORD=x LARDER_CACHE_DIR=/var/tmp/zcache LARDER_STATE_DIR=/var/tmp/zstate LARDER_REPOSITORY=/var/tmp/zrepo
L=/var/tmp/larder-zt
R=$1; shift
P=${TREE:-"$HOME/.cargo/registry/src $S/lib"}
tar cf - $P 2>/dev/null | cat > /dev/null
for r in $(seq $R); do for v in "$@"; do
  rm -rf /var/tmp/zrepo /var/tmp/zcache /var/tmp/zstate
  $L -q init
  lv=""; zt=""
  case $v in -) ;; L*) lv="--compression ${v#L}";; *) zt=$v;; esac
  if [ -n "$zt" ]; then e="env LARDER_ZBIG=${zt%%:*} LARDER_ZTUNE=${zt#*:}"; else e=""; fi
  t=$( { $e /usr/bin/time -f "%e %U %S" $L -q backup $lv $P; } 2>&1 | tail -1)
  echo "$v $t $(du -sb /var/tmp/zrepo/packs | cut -f1)"
done; done
