#!/bin/bash
# A/B of the first command on a new machine (an empty index cache) against
# a repository whose index holds SEG x BLOBS synthetic blobs (10 million by
# default, as bench.sh's flatness part): `snapshots` with OLD and NEW, and
# NEW's `find` of no snapshot, which reads the index (absorbs it into the
# empty cache) and nothing else. Wall time and peak RSS per command.
#
#   scripts/ab_open.sh OLD_LARDER NEW_LARDER [ROUNDS]
#
# Needs examples/synth_index (cargo build --release --examples). The
# repository is made once in $W (default /var/tmp/larder-ab-open) and kept
# for the next call; remove $W to make it again.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:?usage: scripts/ab_open.sh OLD_LARDER NEW_LARDER [ROUNDS]}
NEW=${2:?usage: scripts/ab_open.sh OLD_LARDER NEW_LARDER [ROUNDS]}
ROUNDS=${3:-3}
SYNTH=${SYNTH:-$ROOT/target/release/examples/synth_index}
SEG=${SEG:-2442} BLOBS=${BLOBS:-4096}
W=${W:-/var/tmp/larder-ab-open}
export LARDER_PASSWORD=bench-passphrase LARDER_REPOSITORY=$W/repo LARDER_STATE_DIR=$W/state LARDER_CACHE_DIR=$W/cache
m() { /usr/bin/time -f "%e s %M KiB" "$@" 2>&1 >/dev/null | tail -1; }
if [ ! -f "$W/made" ]; then
    rm -rf "$W"; mkdir -p "$W"
    "$NEW" -q init
    "$SYNTH" --repo "$LARDER_REPOSITORY" --segments "$SEG" --blobs "$BLOBS" >/dev/null
    touch "$W/made"
fi
echo "$(ls "$LARDER_REPOSITORY/index" | wc -l) index segments of $BLOBS blobs"
for ((r = 1; r <= ROUNDS; r++)); do
    rm -rf "$LARDER_CACHE_DIR"; echo "round $r: old snapshots, empty cache: $(m "$OLD" snapshots)"
    echo "round $r: old snapshots, warm cache: $(m "$OLD" snapshots)"
    rm -rf "$LARDER_CACHE_DIR"; echo "round $r: new snapshots, empty cache: $(m "$NEW" snapshots)"
    echo "round $r: new find (absorbs the index), empty cache: $(m "$NEW" find no-such-name)"
    echo "round $r: new snapshots, warm cache: $(m "$NEW" snapshots)"
done
