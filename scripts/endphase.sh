#!/usr/bin/env bash
# How long a cold backup takes after its last source file is opened: the
# end of the pipeline (last packs, the index segment and its cache insert,
# the snapshot), which no stage of the stage limit counts. For each round,
# each binary backs TREE up into a fresh repository under `strace
# --seccomp-bpf` (only openat and exit_group are stopped, so the end is not
# slowed) and prints its milliseconds from the last openat under TREE to
# exit_group, then the medians.
#
#   scripts/endphase.sh TREE ROUNDS BINARY...
set -euo pipefail
TREE=$(realpath "${1:?usage: scripts/endphase.sh TREE ROUNDS BINARY...}")
ROUNDS=${2:?usage: scripts/endphase.sh TREE ROUNDS BINARY...}
shift 2
command -v strace >/dev/null || { echo "endphase.sh: strace is required" >&2; exit 1; }
W=$(mktemp -d /var/tmp/larder-endphase.XXXXXX)
trap 'rm -rf "$W"' EXIT
export LARDER_PASSWORD=endphase LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
for r in $(seq "$ROUNDS"); do
    for b in "$@"; do
        rm -rf "$W/repo" "$W/cache" "$W/state"
        "$b" -q init >/dev/null
        strace --seccomp-bpf -f -ttt -e trace=openat,exit_group -o "$W/trace" \
            "$b" -q backup "$TREE" >/dev/null
        python3 - "$b" "$TREE/" "$W/trace" <<'PY'
import sys
binary, tree, trace = sys.argv[1:]
last = end = None
for line in open(trace):
    parts = line.split()
    if len(parts) < 3:
        continue
    if "openat(" in line and tree in line:
        last = float(parts[1])
    elif "exit_group" in line:
        end = float(parts[1])
print(binary, f"{(end - last) * 1000:.0f}")
PY
    done
done | tee "$W/out"
python3 - "$W/out" <<'PY'
import sys, statistics
by = {}
for line in open(sys.argv[1]):
    b, ms = line.rsplit(" ", 1)
    by.setdefault(b, []).append(int(ms))
for b, v in by.items():
    print(f"median {statistics.median(v):.0f} ms  {b}  ({' '.join(map(str, sorted(v)))})")
PY
