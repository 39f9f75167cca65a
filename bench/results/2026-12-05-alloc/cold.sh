#!/bin/bash
# cold.sh BIN N : N cold backups of the corpus into fresh repos; prints wall and RSS
BIN=$1; N=${2:-3}
export LARDER_PASSWORD=benchpw LARDER_REPOSITORY=/var/tmp/dt/repo LARDER_CACHE_DIR=/var/tmp/dt/cache LARDER_STATE_DIR=/var/tmp/dt/state
for i in $(seq $N); do
  rm -rf /var/tmp/dt/repo /var/tmp/dt/cache /var/tmp/dt/state
  $BIN -q init >/dev/null 2>&1 || { echo init failed; exit 1; }
  tar -cf - -C /var/tmp/dt corpus | cat >/dev/null
  /usr/bin/time -f "%e s %U u %S s %M KiB" $BIN -q backup /var/tmp/dt/corpus 2>&1 >/dev/null | tail -1
done
