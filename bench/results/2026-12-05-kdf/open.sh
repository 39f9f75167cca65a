#!/bin/bash
# open.sh N BIN: `snapshots` N times on a small repository with the real
# key and on one with a cheap test key (LARDER_INSECURE_TEST_KDF), in
# turn: how much of larder's open is the key derivation. Prints MODE wall.
set -e
N=$1; BIN=$2; W=/var/tmp/kdf-open
rm -rf $W; mkdir -p $W
export LARDER_PASSWORD=pw LARDER_STATE_DIR=$W/state LARDER_CACHE_DIR=$W/cache
"$BIN" -q -r $W/real init >/dev/null
LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 "$BIN" -q -r $W/cheap init >/dev/null
for r in real cheap; do "$BIN" -q -r $W/$r backup /usr/share/doc/git >/dev/null; done
for i in $(seq "$N"); do
  /usr/bin/time -f "real %e s" "$BIN" -r $W/real snapshots >/dev/null
  /usr/bin/time -f "cheap %e s" "$BIN" -r $W/cheap snapshots >/dev/null
done 2>&1
rm -rf $W
