#!/bin/bash
# cold.sh ROUNDS BIN STAGES [TREE]: the cold backup's two limits of issue
# 15, timed round by round. TREE defaults to the usual tree's copy,
# /var/tmp/dt/corpus. Each round, in an order that alternates:
# - larder's cold backup (BIN, real key) into a fresh repository, the
#   tree read into the page cache first, `sync` before it (init untimed);
#   then `snapshots` on it (larder's open: the key derivation and reading
#   the repository, which bench_table.py takes out of the work);
# - the pipeline `tar -c TREE | zstd -3 -T2 > /dev/null`;
# then each stage alone on one core (STAGES, the examples/stages binary,
# at level 1, the level of a new repository, as bench.sh runs it).
# Prints: round item seconds [bytes] (stage lines: the stage's bytes).
set -e
R=$1; BIN=$2; STAGES=$3; TREE=${4:-/var/tmp/dt/corpus}
W=/var/tmp/rounds-cold
export LARDER_PASSWORD="larder-bench passphrase 5" LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
rm -rf "$W"; mkdir -p "$W"
timed() { # LABEL CMD...
  sync
  local t0=$EPOCHREALTIME
  "${@:2}" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
  echo "$r $1 $(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$t0" "$EPOCHREALTIME")"
}
larder_cold() {
  rm -rf "$W/repo" "$W/cache" "$W/state"; "$BIN" -q init >/dev/null
  find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
  timed cold "$BIN" -q backup "$TREE"
  timed open "$BIN" snapshots
}
pipeline() {
  timed pipeline sh -c 'tar -C "$1" -cf - "$2" | zstd -3 -T2 -c > /dev/null' sh "$(dirname "$TREE")" "$(basename "$TREE")"
}
for r in $(seq "$R"); do
  if ((r % 2)); then larder_cold; pipeline; else pipeline; larder_cold; fi
  "$STAGES" --level 1 "$TREE" | python3 -c '
import json, sys
for s in map(json.loads, sys.stdin):
    print(sys.argv[1], "stage_" + s["stage"], "%.3f" % s["seconds"], s["bytes"])' "$r"
done
echo "tree $(find "$TREE" -type f -printf '%s\n' | awk '{s += $1} END {print s}') bytes in $(find "$TREE" -type f | wc -l) files"
rm -rf "$W"
