#!/bin/bash
# restore.sh ROUNDS BIN [TREE]: the restore onto tmpfs of issue 15, timed
# round by round instead of tool by tool. TREE (default the second tree's
# copy, /var/tmp/src2) is backed up once by larder (BIN, real key),
# restic (repository version 2, --compression auto) and rustic (its
# defaults, the benchmark's build), as scripts/bench.sh does. Then each
# round restores the snapshot of each tool onto an empty directory in
# /dev/shm, the order rotating every round, `sync` before each restore as
# bench.sh's measure() does. Prints: round tool wall-s peak-KiB.
set -e
R=$1; BIN=$2; TREE=${3:-/var/tmp/src2}
W=/var/tmp/rounds-restore; T=/dev/shm/rounds-restore
RUSTIC=${BENCH_RUSTIC_ROOT:-$HOME/.cache/larder-bench/rustic}/bin/rustic
PASS="larder-bench passphrase 5"
export LARDER_PASSWORD=$PASS LARDER_REPOSITORY=$W/repo-larder LARDER_CACHE_DIR=$W/cache-larder LARDER_STATE_DIR=$W/state-larder
export RESTIC_PASSWORD=$PASS RESTIC_REPOSITORY=$W/repo-restic RESTIC_CACHE_DIR=$W/cache-restic
export RUSTIC_PASSWORD=$PASS RUSTIC_REPOSITORY=$W/repo-rustic
RX=("$RUSTIC" --no-progress --cache-dir "$W/cache-rustic")
rm -rf "$W" "$T"; mkdir -p "$W"
"$BIN" -q init >/dev/null; "$BIN" -q backup "$TREE" >/dev/null
restic -q init --repository-version 2 >/dev/null; restic -q --compression auto backup "$TREE" >/dev/null
"${RX[@]}" init >/dev/null 2>&1; "${RX[@]}" backup "$TREE" >/dev/null 2>&1
cmd() {
  case $1 in
    larder) CMD=("$BIN" -q restore latest --target "$T") ;;
    restic) CMD=(restic -q restore latest --target "$T") ;;
    rustic) CMD=("${RX[@]}" restore latest "$T") ;;
  esac
}
tools=(larder restic rustic)
for r in $(seq "$R"); do
  for k in 0 1 2; do
    t=${tools[$(( (k + r) % 3 ))]}
    cmd "$t"
    rm -rf "$T"; mkdir -p "$T"; sync
    t0=$EPOCHREALTIME
    /usr/bin/time -f '%M' -o "$W/time" "${CMD[@]}" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
    t1=$EPOCHREALTIME
    echo "$r $t $(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$t0" "$t1") $(tail -1 "$W/time")"
  done
done
rm -rf "$W" "$T"
