#!/usr/bin/env python3
"""larder's speed-up over each peer, round by round, from small_peers.sh's
lines: ratios.py runs.txt. A tool's r-th cold backup, re-backup and restore
are its round r."""
import sys

seen, data = {}, {}
for line in open(sys.argv[1]):
    t, _, step, w, u, s, k, _r, b = line.split()
    tool = "larder" if t.startswith("larder") else t
    if step == "cold":
        seen[tool] = seen.get(tool, 0) + 1
    data[(tool, seen[tool], step)] = (float(w), float(u), float(s), int(k), int(b))
for r in sorted({k[1] for k in data}):
    out = []
    for step, name in (("cold", "cold"), ("restore", "restore")):
        L = data[("larder", r, step)]
        for peer in ("restic", "rustic"):
            P = data[(peer, r, step)]
            out.append(f"{name} vs {peer} {P[0] / L[0]:.2f}× (RSS {L[3] / P[3]:.2f}×)")
    L = data[("larder", r, "rebackup")]
    for peer in ("restic", "rustic"):
        out.append(f"rebackup vs {peer} {data[(peer, r, 'rebackup')][0] / L[0]:.2f}×")
    L = data[("larder", r, "cold")]
    for peer in ("restic", "rustic"):
        out.append(f"repository / {peer}'s {L[4] / data[(peer, r, 'cold')][4]:.3f}×")
    print(f"round {r}: " + "; ".join(out))
