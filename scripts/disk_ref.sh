#!/usr/bin/env bash
# A restore onto disk against `cp -a` of the same tree, interleaved: each
# round backs nothing up again; it restores the snapshot of TREE onto disk
# and copies TREE with `cp -a` onto the same filesystem (in turn first),
# each timed with the `sync` that follows it, so both pay for their writes
# reaching the disk. The benchmark times the two minutes apart, where the
# disk's own noise (`cp -a` plus `sync` ranged 4.5-25 s across its runs)
# decides the ratio; pairs taken back to back are closer to a comparison.
#
#   scripts/disk_ref.sh LARDER_BINARY TREE [ROUNDS]
#
# Work and output go to DISK_DIR (default /var/tmp/larder-disk, which must
# be on a disk, not tmpfs); every sample to DISK_OUT (default
# /tmp/larder-disk.csv). Prints each pair's ratio and the medians.
set -euo pipefail
BIN=${1:?usage: scripts/disk_ref.sh LARDER TREE [ROUNDS]}
TREE=${2:?usage: scripts/disk_ref.sh LARDER TREE [ROUNDS]}
ROUNDS=${3:-5}
W=${DISK_DIR:-/var/tmp/larder-disk}
OUT=${DISK_OUT:-/tmp/larder-disk.csv}
command -v /usr/bin/time >/dev/null || { echo "disk_ref.sh: GNU time (/usr/bin/time) is required" >&2; exit 1; }
export LARDER_PASSWORD=disk-ref-passphrase
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
rm -rf "$W"; mkdir -p "$W"
trap 'rm -rf "$W"' EXIT
"$BIN" -q init
"$BIN" -q backup "$TREE"
echo "round,what,wall_s" > "$OUT"
timed() { # ROUND WHAT CMD...
    local round=$1 what=$2; shift 2
    rm -rf "$W/out"; mkdir -p "$W/out"; sync
    /usr/bin/time -f '%e' -o "$W/time" sh -c '"$@" && sync' sh "$@" >/dev/null 2>"$W/err" ||
        { echo "disk_ref.sh: $what failed:" >&2; cat "$W/err" >&2; exit 1; }
    echo "$round,$what,$(tail -1 "$W/time")" >> "$OUT"
}
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then
        timed "$r" larder "$BIN" -q restore latest --target "$W/out"
        timed "$r" cp cp -a "$TREE" "$W/out/"
    else
        timed "$r" cp cp -a "$TREE" "$W/out/"
        timed "$r" larder "$BIN" -q restore latest --target "$W/out"
    fi
done
rm -rf "$W/out"
python3 - "$OUT" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(r["round"], {})[r["what"]] = float(r["wall_s"])
for k, v in by.items():
    print(f"round {k}: larder {v['larder']:.2f} s, cp -a {v['cp']:.2f} s, larder / cp -a {v['larder'] / v['cp']:.2f}")
lm = statistics.median(v["larder"] for v in by.values())
cm = statistics.median(v["cp"] for v in by.values())
print(f"medians: larder {lm:.2f} s, cp -a {cm:.2f} s, ratio of medians {lm / cm:.2f}")
PY
