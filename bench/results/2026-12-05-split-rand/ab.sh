#!/bin/bash
# ab.sh ROUNDS BIN: the usual tree benchmark's random-file rows, with the
# large-file split on (the default: files of 32 MiB and more read by two
# workers) and off (LARDER_SPLIT_MIN above any file), alternating each
# round. As in scripts/bench.sh: a 1 GiB seeded random file (seed 5) backed
# up into a fresh repository (first), then 100 scattered 1 KiB edits
# (scripts/bench_data.py randedit, seed 5 and the round) and a second
# backup (edit). Cheap key (the rows time the work, not the key).
# Prints: ROW SPLIT ROUND peak-KiB wall user sys, and the bytes the edit
# backup added.
set -e
N=$1; BIN=$2; W=${W:-/var/tmp/split-rand}
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
rm -rf $W; mkdir -p $W/rand
python3 /work/main/scripts/bench_data.py randfile $W/random.pristine 1073741824 5
for i in $(seq "$N"); do
  for split in on off; do
    if [ $split = on ]; then unset LARDER_SPLIT_MIN; else export LARDER_SPLIT_MIN=1000000000000; fi
    rm -rf $W/repo $W/cache $W/state
    cp $W/random.pristine $W/rand/random.bin
    "$BIN" -q init >/dev/null
    sync
    /usr/bin/time -f '%M %e %U %S' -o $W/t "$BIN" -q backup $W/rand >/dev/null
    echo "first $split $i $(cat $W/t)"
    s1=$(du -sb $W/repo | cut -f1)
    python3 /work/main/scripts/bench_data.py randedit $W/rand/random.bin "5$i" >/dev/null
    sync
    /usr/bin/time -f '%M %e %U %S' -o $W/t "$BIN" -q backup $W/rand >/dev/null
    s2=$(du -sb $W/repo | cut -f1)
    echo "edit $split $i $(cat $W/t) added $((s2 - s1))"
  done
done
rm -rf $W
