#!/bin/bash
# ab.sh ROUNDS BIN...: restores the second tree onto tmpfs from a prepared
# repository (key of low work factor; /var/tmp/prep-src2, made by
# CORPUS=/var/tmp/src2 PREP=/var/tmp/prep-src2 ../2026-12-05-mmap/abrss.sh
# cheap), each binary in turn, the order
# rotating each round. Prints: binary wall-s user-s system-s peak-KiB.
export LARDER_INSECURE_TEST_KDF=1 LARDER_KDF_WORK_FACTOR=10 LARDER_PASSWORD="larder-bench passphrase 5" LARDER_CACHE_DIR=/var/tmp/prep-src2/cache LARDER_STATE_DIR=/var/tmp/prep-src2/state LARDER_REPOSITORY=/var/tmp/prep-src2/repo
R=$1; shift; bins=("$@")
cat /var/tmp/prep-src2/repo/packs/*/* >/dev/null 2>&1
for r in $(seq $R); do
  n=${#bins[@]}
  for k in $(seq 0 $((n-1))); do
    b=${bins[$(( (k + r) % n ))]}
    rm -rf /dev/shm/r
    t=$( { /usr/bin/time -f "%e %U %S %M" $b -q restore latest --target /dev/shm/r; } 2>&1 | tail -1)
    echo "$(basename $b) $t"
  done
done
rm -rf /dev/shm/r
