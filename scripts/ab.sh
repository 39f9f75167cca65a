#!/usr/bin/env bash
# Interleaved A/B comparison of two larder binaries on one tree: each round
# runs A then B (then B then A in the next round, so neither is always
# first) through the daily sequence on a fresh repository, and prints the
# median wall time, CPU time and peak RSS of each step for each binary.
# Interleaving keeps a noisy, shared machine's drift out of the ratio.
#
#   scripts/ab.sh OLD_BINARY NEW_BINARY TREE [ROUNDS]
#
# Steps: cold backup, unchanged re-backup, `snapshots`, restore onto tmpfs
# (AB_SHM, default /dev/shm/larder-ab), diff of the two snapshots, then
# `forget --keep-last 1 --prune` (which deletes no data: both snapshots
# hold the same tree; what it costs is reading the index and the trees).
# Writes every sample to AB_OUT (default /tmp/larder-ab.csv).
set -euo pipefail
A=${1:?usage: scripts/ab.sh OLD NEW TREE [ROUNDS]}
B=${2:?usage: scripts/ab.sh OLD NEW TREE [ROUNDS]}
TREE=${3:?usage: scripts/ab.sh OLD NEW TREE [ROUNDS]}
ROUNDS=${4:-5}
W=${AB_DIR:-/var/tmp/larder-ab}
SHM=${AB_SHM:-/dev/shm/larder-ab}
OUT=${AB_OUT:-/tmp/larder-ab.csv}
command -v /usr/bin/time >/dev/null || { echo "ab.sh: GNU time (/usr/bin/time) is required" >&2; exit 1; }
export LARDER_PASSWORD=ab-passphrase
rm -rf "$W" "$SHM"; mkdir -p "$W" "$SHM"
trap 'rm -rf "$W" "$SHM"' EXIT
echo "bin,round,step,wall_s,cpu_s,rss_kib" > "$OUT"
step() { # LABEL ROUND STEP CMD...
    local label=$1 round=$2 name=$3; shift 3
    /usr/bin/time -f '%e %U %S %M' -o "$W/time" "$@" >/dev/null 2>"$W/err" ||
        { echo "ab.sh: $label $name failed:" >&2; cat "$W/err" >&2; exit 1; }
    read -r wall user sys rss < <(tail -1 "$W/time")
    echo "$label,$round,$name,$wall,$(python3 -c "print(round($user+$sys,2))"),$rss" >> "$OUT"
}
run_one() { # LABEL BINARY ROUND
    local label=$1 bin=$2 r=$3
    export LARDER_REPOSITORY=$W/repo-$label LARDER_CACHE_DIR=$W/cache-$label LARDER_STATE_DIR=$W/state-$label
    rm -rf "$LARDER_REPOSITORY" "$LARDER_CACHE_DIR" "$LARDER_STATE_DIR"
    "$bin" -q init
    find "$TREE" -type f -print0 | xargs -0 cat >/dev/null 2>&1 || true
    step "$label" "$r" cold_backup "$bin" -q backup "$TREE"
    step "$label" "$r" warm_backup "$bin" -q backup "$TREE"
    step "$label" "$r" snapshots "$bin" snapshots
    rm -rf "$SHM/r"; mkdir -p "$SHM/r"
    step "$label" "$r" restore_shm "$bin" -q restore latest --target "$SHM/r"
    rm -rf "$SHM/r"
    mapfile -t ids < <("$bin" --json snapshots | python3 -c 'import json,sys; [print(s["id"]) for s in sorted(json.load(sys.stdin), key=lambda s: s["time"])]')
    step "$label" "$r" diff "$bin" diff "${ids[0]}" "${ids[1]}"
    step "$label" "$r" prune "$bin" -q forget --keep-last 1 --prune
}
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then run_one A "$A" "$r"; run_one B "$B" "$r"
    else run_one B "$B" "$r"; run_one A "$A" "$r"; fi
    echo "round $r of $ROUNDS done" >&2
done
python3 - "$OUT" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
steps = []
for r in rows:
    if r["step"] not in steps:
        steps.append(r["step"])
def med(b, s, k):
    return statistics.median(float(r[k]) for r in rows if r["bin"] == b and r["step"] == s)
print(f"{'step':<12} {'A wall':>8} {'B wall':>8} {'B/A':>6}   {'A cpu':>7} {'B cpu':>7} {'B/A':>6}   {'A RSS':>8} {'B RSS':>8}")
for s in steps:
    aw, bw, ac, bc = med("A", s, "wall_s"), med("B", s, "wall_s"), med("A", s, "cpu_s"), med("B", s, "cpu_s")
    ar, br = med("A", s, "rss_kib") / 1024, med("B", s, "rss_kib") / 1024
    print(f"{s:<12} {aw:8.2f} {bw:8.2f} {bw / aw if aw else 0:6.2f}   {ac:7.2f} {bc:7.2f} {bc / ac if ac else 0:6.2f}   {ar:7.0f}M {br:7.0f}M")
PY
