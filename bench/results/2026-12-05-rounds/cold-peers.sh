#!/bin/bash
# cold-peers.sh ROUNDS BIN [TREE]: the cold backup against restic's and
# rustic's, timed round by round. TREE defaults to the second tree's copy,
# /var/tmp/src2. Each round, the order rotating, each tool backs TREE up
# into a fresh repository (init untimed; the tree read into the page cache
# and `sync` before each backup), set up as scripts/bench.sh sets it up,
# then lists its snapshots (its open, which bench_table.py takes out of
# the work). Prints: round tool cold-s open-s repository-bytes.
set -e
R=$1; BIN=$2; TREE=${3:-/var/tmp/src2}
W=/var/tmp/rounds-peers
RUSTIC=${BENCH_RUSTIC_ROOT:-$HOME/.cache/larder-bench/rustic}/bin/rustic
PASS="larder-bench passphrase 5"
export LARDER_PASSWORD=$PASS LARDER_REPOSITORY=$W/repo-larder LARDER_CACHE_DIR=$W/cache-larder LARDER_STATE_DIR=$W/state-larder
export RESTIC_PASSWORD=$PASS RESTIC_REPOSITORY=$W/repo-restic RESTIC_CACHE_DIR=$W/cache-restic
export RUSTIC_PASSWORD=$PASS RUSTIC_REPOSITORY=$W/repo-rustic
RX=("$RUSTIC" --no-progress --cache-dir "$W/cache-rustic")
rm -rf "$W"; mkdir -p "$W"
secs() { # CMD...: runs it after a sync, prints its wall seconds
  sync
  local t0=$EPOCHREALTIME
  "$@" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
  python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$t0" "$EPOCHREALTIME"
}
one() { # TOOL
  rm -rf "$W/repo-$1" "$W/cache-$1" "$W/state-$1"
  case $1 in
    larder) "$BIN" -q init; B=("$BIN" -q backup "$TREE"); S=("$BIN" snapshots) ;;
    restic) restic -q init --repository-version 2; B=(restic -q --compression auto backup "$TREE"); S=(restic snapshots) ;;
    rustic) "${RX[@]}" init; B=("${RX[@]}" backup "$TREE"); S=("${RX[@]}" snapshots) ;;
  esac >/dev/null 2>&1
  find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
  local c o
  c=$(secs "${B[@]}"); o=$(secs "${S[@]}")
  echo "$r $1 $c $o $(du -sb "$W/repo-$1" | cut -f1)"
}
tools=(larder restic rustic)
for r in $(seq "$R"); do
  for k in 0 1 2; do one "${tools[$(( (k + r) % 3 ))]}"; done
done
rm -rf "$W"
