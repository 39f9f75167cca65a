#!/bin/bash
# ab.sh ROUNDS BIN [TREE]: the prototype's backup with and without the
# listing made while the key is derived (LARDER_NO_PREWALK set: without),
# round by round. TREE defaults to the usual tree's copy,
# /var/tmp/dt/corpus. Each round, both modes in an order that alternates;
# for each: a fresh repository (real key, init untimed), the tree read
# into the page cache, then a cold backup and an unchanged re-backup,
# each timed with its peak RSS (GNU time's %M).
# Prints: round mode item seconds peak_kib.
set -e
R=$1; BIN=$2; TREE=${3:-/var/tmp/dt/corpus}
W=/var/tmp/prewalk-ab
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
rm -rf "$W"; mkdir -p "$W"
timed() { # MODE LABEL CMD...
  sync
  local t0=$EPOCHREALTIME
  /usr/bin/time -f %M -o "$W/rss" "${@:3}" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
  local t1=$EPOCHREALTIME
  echo "$r $1 $2 $(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$t0" "$t1") $(tail -1 "$W/rss")"
}
one() { # MODE
  rm -rf "$W/repo" "$W/cache" "$W/state"; "$BIN" -q init >/dev/null
  find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
  if [ "$1" = off ]; then export LARDER_NO_PREWALK=1; else unset LARDER_NO_PREWALK; fi
  timed "$1" cold "$BIN" -q backup "$TREE"
  timed "$1" again "$BIN" -q backup "$TREE"
  unset LARDER_NO_PREWALK
}
for r in $(seq "$R"); do
  if ((r % 2)); then one off; one on; else one on; one off; fi
done
rm -rf "$W"
