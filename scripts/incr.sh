#!/bin/sh
# Times a cold backup and an incremental backup with many changed files on a
# real tree, for comparing two larder builds.
#
#   scripts/incr.sh BIN [SOURCE] [WORK]
#
# Each run copies SOURCE (default /usr/share/doc) to WORK/tree (default
# WORK=/var/tmp/larder-incr), backs it up into a new repository (the cold
# row), appends a line to 500 files, adds 100 and deletes 100 (the same files
# every run: every Nth of the sorted list), and backs it up again (the
# incremental row). Prints one line per row: seconds, peak RSS, and what the
# backup summary says it read. Run it several times per build, with nothing
# else busy (not beside scripts/bench.sh).
set -eu
BIN=${1:?usage: scripts/incr.sh BIN [SOURCE] [WORK]}
SRC=${2:-/usr/share/doc}
WORK=${3:-/var/tmp/larder-incr}
rm -rf "$WORK"
mkdir -p "$WORK"
cp -a "$SRC" "$WORK/tree"
export LARDER_REPOSITORY="$WORK/repo" LARDER_PASSWORD=incr \
    LARDER_CACHE_DIR="$WORK/cache" LARDER_STATE_DIR="$WORK/state"
# A cheap key (scrypt N = 2^10), so the times are the backup's work and not
# the 0.5 s of the default key derivation.
export LARDER_KDF_WORK_FACTOR=10 LARDER_INSECURE_TEST_KDF=1
"$BIN" --quiet init >/dev/null

timed() {
    label=$1
    shift
    /usr/bin/time -f "%e s %M KiB" -o "$WORK/time" "$BIN" --json "$@" >"$WORK/out"
    read_bytes=$(tail -n 1 "$WORK/out" | sed -n 's/.*"bytes_read":\([0-9]*\).*/\1/p')
    changed=$(tail -n 1 "$WORK/out" | sed -n 's/.*"files_changed":\([0-9]*\).*/\1/p')
    new=$(tail -n 1 "$WORK/out" | sed -n 's/.*"files_new":\([0-9]*\).*/\1/p')
    echo "$label: $(cat "$WORK/time"), read $read_bytes bytes, $changed changed, $new new"
}

timed cold backup "$WORK/tree"

find "$WORK/tree" -type f | LC_ALL=C sort >"$WORK/files"
total=$(wc -l <"$WORK/files")
step=$((total / 700))
[ "$step" -ge 1 ] || step=1
# Lines 1, 1+step, …: the first 500 are edited, the next 100 deleted.
awk -v s="$step" 'NR % s == 1' "$WORK/files" | head -n 600 >"$WORK/picked"
head -n 500 "$WORK/picked" | while IFS= read -r f; do
    echo "an appended line" >>"$f"
done
tail -n 100 "$WORK/picked" | while IFS= read -r f; do
    rm -f "$f"
done
i=0
while [ $i -lt 100 ]; do
    f=$(sed -n "$((i * step + 2))p" "$WORK/files")
    d=$(dirname "${f:-$WORK/tree/x}")
    [ -d "$d" ] || d="$WORK/tree"
    head -c $((4096 + i * 512)) /dev/urandom >"$d/added-$i"
    i=$((i + 1))
done

timed incremental backup "$WORK/tree"
