#!/bin/bash
# A/B of a cold backup into a large repository: binaries A and B, rounds
# interleaved, each backing up TREE into its own copy of one repository
# whose index holds SEG x BLOBS synthetic blobs (40 x 250,000 by default:
# 10 million, in segments as prunes wrote them before abfaff6), with the
# index already absorbed into the copied cache. The tree is read into the
# page cache before each backup. Wall time, CPU times and peak RSS.
#
#   scripts/ab_backup_big.sh A_LARDER B_LARDER TREE [ROUNDS]
#
# Needs examples/synth_index (cargo build --release --examples). Work
# directory $W (default /var/tmp/larder-ab-big), removed at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/ab_backup_big.sh A_LARDER B_LARDER TREE [ROUNDS]"
A=${1:?$usage} B=${2:?$usage} TREE=${3:?$usage}
ROUNDS=${4:-4}
SYNTH=${SYNTH:-$ROOT/target/release/examples/synth_index}
SEG=${SEG:-40} BLOBS=${BLOBS:-250000}
W=${W:-/var/tmp/larder-ab-big}
export LARDER_PASSWORD=bench-passphrase
rm -rf "$W"; mkdir -p "$W"
use() { export LARDER_REPOSITORY=$W/repo-$1 LARDER_CACHE_DIR=$W/cache-$1 LARDER_STATE_DIR=$W/state-$1; }
use template
"$A" -q init
"$SYNTH" --repo "$LARDER_REPOSITORY" --segments "$SEG" --blobs "$BLOBS" >/dev/null
"$A" find no-such-name >/dev/null 2>&1   # absorbs the index into the cache
for ((r = 1; r <= ROUNDS; r++)); do
    for L in "$A" "$B"; do
        rm -rf "$W/repo-x" "$W/cache-x" "$W/state-x"
        use x
        cp -a "$W/repo-template" "$W/repo-x"
        cp -a "$W/cache-template" "$W/cache-x"
        find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
        echo "round $r $L: $(/usr/bin/time -f '%e s %U user %S sys %M KiB' "$L" -q backup "$TREE" 2>&1 >/dev/null | tail -1)"
    done
done
rm -rf "$W"
