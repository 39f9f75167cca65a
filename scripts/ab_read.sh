#!/usr/bin/env bash
# Interleaved A/B of the short reading commands (`snapshots`, a diff of the
# two oldest snapshots, `ls` of the newest) of two larder binaries on an
# existing repository, named by the usual LARDER_* variables. Prints the
# median wall time of each command for each binary, in milliseconds. For
# costs of a few milliseconds (a lock), where `scripts/ab.sh`'s
# full sequence and GNU time's 10 ms steps are too coarse.
#
#   scripts/ab_read.sh OLD_BINARY NEW_BINARY [ROUNDS]
set -euo pipefail
A=${1:?usage: scripts/ab_read.sh OLD NEW [ROUNDS]}
B=${2:?usage: scripts/ab_read.sh OLD NEW [ROUNDS]}
ROUNDS=${3:-20}
: "${LARDER_REPOSITORY:?set LARDER_REPOSITORY (and the password, cache and state variables)}"
mapfile -t ids < <("$A" --json snapshots | python3 -c 'import json,sys; [print(s["id"]) for s in sorted(json.load(sys.stdin), key=lambda s: s["time"])]')
((${#ids[@]} >= 2)) || { echo "ab_read.sh: the repository needs two snapshots" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= ROUNDS; i++)); do
    if ((i % 2)); then order=(A B); else order=(B A); fi
    for label in "${order[@]}"; do
        if [ "$label" = A ]; then bin=$A; else bin=$B; fi
        for cmd in snapshots diff ls; do
            case $cmd in
                diff) args=(diff "${ids[0]}" "${ids[1]}") ;;
                ls) args=(ls "${ids[-1]}") ;;
                *) args=(snapshots) ;;
            esac
            s=$(date +%s%N)
            "$bin" -q "${args[@]}" >/dev/null
            e=$(date +%s%N)
            echo "$label $cmd $(((e - s) / 1000))" >> "$out"
        done
    done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, cmd, us = line.split()
    d[(label, cmd)].append(int(us) / 1000)
for cmd in ["snapshots", "diff", "ls"]:
    a, b = statistics.median(d[("A", cmd)]), statistics.median(d[("B", cmd)])
    print(f"{cmd:9} A {a:8.1f} ms  B {b:8.1f} ms  B-A {b - a:+.1f} ms  ({len(d[('A', cmd)])} rounds)")
PY
