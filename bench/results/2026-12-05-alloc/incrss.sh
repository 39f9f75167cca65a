#!/bin/bash
# incrss.sh BIN: fresh repo (real key), cold backup of corpus, unchanged backup, edits, incremental backup: wall and peak RSS of the incremental
BIN=$1
export LARDER_PASSWORD=benchpw LARDER_REPOSITORY=/var/tmp/dt/irepo LARDER_CACHE_DIR=/var/tmp/dt/icache LARDER_STATE_DIR=/var/tmp/dt/istate
rm -rf /var/tmp/dt/irepo /var/tmp/dt/icache /var/tmp/dt/istate
$BIN -q init >/dev/null 2>&1 || { echo init failed; exit 1; }
$BIN -q backup /var/tmp/dt/corpus >/dev/null
$BIN -q backup /var/tmp/dt/corpus >/dev/null
python3 /work/main/scripts/bench_data.py edit apply /var/tmp/dt/corpus /var/tmp/dt/isave 5 >/dev/null
/usr/bin/time -f "$(basename $BIN) incr %e s %M KiB" $BIN -q backup /var/tmp/dt/corpus 2>&1 >/dev/null | tail -1
python3 /work/main/scripts/bench_data.py edit revert /var/tmp/dt/corpus /var/tmp/dt/isave
