#!/usr/bin/env python3
"""ratios.py FILE...: per round of incr.sh's lines (TOOL ROUND STEP WALL USER
SYS PEAK_KIB), larder's incremental backup end to end and as work (less its
`snapshots`), and each peer's time over larder's, end to end and as work."""
import sys

for path in sys.argv[1:]:
    t = {}
    for line in open(path):
        f = line.split()
        if len(f) == 7 and f[2] in ("incremental", "snapshots"):
            t[(f[0], int(f[1]), f[2])] = (float(f[3]), int(f[6]))
    print(f"## {path}")
    for r in sorted({k[1] for k in t}):
        (li, lrss), (ls, _) = t[("larder", r, "incremental")], t[("larder", r, "snapshots")]
        row = [f"round {r}: larder {li:.2f} s, work {li - ls:.2f} s, peak {lrss} KiB"]
        for peer in ("restic", "rustic"):
            (pi, prss), (ps, _) = t[(peer, r, "incremental")], t[(peer, r, "snapshots")]
            row.append(f"{peer} {pi:.2f} s: {pi / li:.2f}x end to end, {(pi - ps) / (li - ls):.2f}x work, RSS {lrss / prss:.2f}x")
        print("; ".join(row))
