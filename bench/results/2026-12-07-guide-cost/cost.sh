#!/usr/bin/env bash
# What the guide (src/archiver/guide.rs) costs where it cannot help: a large
# file whose every chunk differs from its parent's.
#
#     cost.sh ROUNDS TREE BIN
#
# TREE holds img-a.tar and img-b.tar (2026-12-06-big-files' tree). One
# repository gets a snapshot of img-b.tar (in other/) and one of img-a.tar
# (as src/img.tar, the parent). src/img.tar is then overwritten with
# img-b.tar's bytes: a changed file none of whose chunks is the parent's,
# all of them already stored. So each backup of src/ only reads, chunks,
# hashes and looks up; nothing but a tree and a snapshot is written, and the
# guide's table (one index lookup per parent chunk) and its misses are as
# large a share of the time as they can be.
#
# Each round times, in turn (the order alternating):
#   guided: backup --parent BASE src/  (the guide is built and misses)
#   force:  backup --force src/        (the parent, and so the guide, unused)
# and prints: mode round wall_s user_s sys_s peak_kib bytes_read bytes_guided
set -euo pipefail
ROUNDS=${1:?usage: cost.sh ROUNDS TREE BIN}
TREE=${2:?usage: cost.sh ROUNDS TREE BIN}
BIN=${3:?usage: cost.sh ROUNDS TREE BIN}
W=${COST_DIR:-/var/tmp/guide-cost}
rm -rf "$W"; mkdir -p "$W/src" "$W/other"
trap 'rm -rf "$W"' EXIT
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
export LARDER_PASSWORD="guide cost"
cp "$TREE/img-a.tar" "$W/src/img.tar"
cp "$TREE/img-b.tar" "$W/other/img.tar"
"$BIN" -q init
"$BIN" -q backup "$W/other"
"$BIN" -q backup "$W/src"
BASE=$("$BIN" --json snapshots | python3 -c '
import json, sys
print(max(json.load(sys.stdin), key=lambda s: s["time"])["id"])')
cp "$W/other/img.tar" "$W/src/img.tar"
cat "$W/src/img.tar" > /dev/null
run() { # MODE ROUND
    local args=(--parent "$BASE")
    [ "$1" = force ] && args=(--force)
    local t0 t1
    t0=$EPOCHREALTIME
    /usr/bin/time -f '%U %S %M' -o "$W/time" "$BIN" --json backup "${args[@]}" "$W/src" > "$W/out"
    t1=$EPOCHREALTIME
    python3 - "$1" "$2" "$t0" "$t1" "$W/time" "$W/out" <<'PY'
import json, sys
mode, rnd, t0, t1, tf, of = sys.argv[1:]
u, s, m = open(tf).read().split()[-3:]
summary = [json.loads(l) for l in open(of) if l.strip()][-1]
print(mode, rnd, f"{float(t1) - float(t0):.3f}", u, s, m, summary.get("bytes_read"), summary.get("bytes_guided"))
PY
}
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then run guided "$r"; run force "$r"; else run force "$r"; run guided "$r"; fi
done
