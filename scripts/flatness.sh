#!/bin/bash
# Flatness check on its own (the steps of scripts/bench.sh's flatness
# section, one run): larder backs up and restores the same tree with a fresh
# repository and with one whose index holds 10 million synthetic blobs, and
# prints wall time and peak RSS of each command.
#
#   scripts/flatness.sh DIR        # DIR: the tree to back up
#
# Environment: FLAT_SEGMENTS and FLAT_BLOBS (the synthetic index: segments
# and blobs per segment, default 100 and 100,000), FLAT_LARDER (the binary,
# default target/release/larder), FLAT_DIR, FLAT_SHM (work directories).
#
# Needs the release build and the synth_index example:
#   cargo build --release --examples
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
L=${FLAT_LARDER:-$ROOT/target/release/larder}
SYNTH=$ROOT/target/release/examples/synth_index
SRC=${1:?usage: scripts/flatness.sh DIR}
W=${FLAT_DIR:-/var/tmp/larder-flat}
SHM=${FLAT_SHM:-/dev/shm/larder-flat-restore}   # restores go to tmpfs, as in the benchmark
SEGMENTS=${FLAT_SEGMENTS:-100}
BLOBS=${FLAT_BLOBS:-100000}
export LARDER_PASSWORD=bench-passphrase
rm -rf "$W"; mkdir -p "$W"
m() { /usr/bin/time -f "%e s %M KiB" "$@" 2>&1 >/dev/null | tail -1; }
for kind in fresh big; do
    export LARDER_REPOSITORY=$W/repo-$kind LARDER_CACHE_DIR=$W/cache-$kind LARDER_STATE_DIR=$W/state-$kind
    "$L" -q init
    if [ "$kind" = big ]; then
        "$SYNTH" --repo "$LARDER_REPOSITORY" --segments "$SEGMENTS" --blobs "$BLOBS" >/dev/null
        # `find` with no snapshot reads the index and nothing else
        # (`snapshots` does not read the index).
        echo "big: first open (absorbs the index): $(m "$L" find no-such-name)"
    fi
    find "$SRC" -type f -print0 | xargs -0 cat > /dev/null
    echo "$kind: open: $(m "$L" find no-such-name)"
    echo "$kind: snapshots: $(m "$L" snapshots)"
    echo "$kind: cold backup: $(m "$L" -q backup "$SRC")"
    rm -rf "$SHM"; mkdir -p "$SHM"
    echo "$kind: restore: $(m "$L" -q restore latest --target "$SHM")"
    rm -rf "$SHM"
done
rm -rf "$W"
