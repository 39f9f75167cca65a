#!/bin/bash
# incr.sh ROUNDS BIN: the incremental backup of the usual tree's copy
# (/var/tmp/dt/corpus) with and without the listing made while the key
# is derived, round by round, in an order that alternates. For each mode:
# a fresh repository (real key), a cold backup (untimed), the benchmark's
# edits (scripts/bench_data.py edit apply, seed 5: 500 files edited, 100
# added, 100 deleted), the incremental backup timed with its peak RSS,
# the edits reverted. Prints: round mode incr seconds peak_kib.
set -e
R=$1; BIN=$2; TREE=/var/tmp/dt/corpus
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
W=/var/tmp/prewalk-incr
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
rm -rf "$W"; mkdir -p "$W"
one() { # MODE
  rm -rf "$W/repo" "$W/cache" "$W/state" "$W/edit-save"; "$BIN" -q init >/dev/null
  if [ "$1" = off ]; then export LARDER_NO_PREWALK=1; else unset LARDER_NO_PREWALK; fi
  "$BIN" -q backup "$TREE" >/dev/null
  python3 "$ROOT/scripts/bench_data.py" edit apply "$TREE" "$W/edit-save" 5 >/dev/null
  find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
  sync
  local t0=$EPOCHREALTIME
  /usr/bin/time -f %M -o "$W/rss" "$BIN" -q backup "$TREE" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
  local t1=$EPOCHREALTIME
  python3 "$ROOT/scripts/bench_data.py" edit revert "$TREE" "$W/edit-save"
  echo "$r $1 incr $(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$t0" "$t1") $(tail -1 "$W/rss")"
  unset LARDER_NO_PREWALK
}
for r in $(seq "$R"); do
  if ((r % 2)); then one off; one on; else one on; one off; fi
done
rm -rf "$W"
