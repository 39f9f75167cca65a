#!/usr/bin/env python3
"""summary.py FILE... : per file (ab.sh's or chunkmin.sh's lines), per
minimum chunk size, the medians over the rounds of each step's wall time,
of the work (a backup's wall time less the round's `snapshots`), and of the
bytes each backup after the first added to the repository."""
import statistics
import sys

for path in sys.argv[1:]:
    runs = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m, r, step, wall, _u, _s, _kib, _repo, size = line.split()
        runs.setdefault((int(m), r), {})[step] = (float(wall), int(size))
    print(path)
    for m in sorted({k[0] for k in runs}):
        rounds = [v for (mm, _), v in runs.items() if mm == m]
        cols = []
        for step in rounds[0]:
            walls = [v[step][0] for v in rounds]
            col = f"{step} {statistics.median(walls):.2f} s"
            if step in ("rebackup", "incremental"):
                work = [v[step][0] - v["snapshots"][0] for v in rounds]
                col += f" (work {statistics.median(work):.2f})"
            if step == "backup":
                col += f" repo {statistics.median(v[step][1] for v in rounds) / 1e6:.1f} MB"
            if step == "incremental":
                prev = "rebackup" if "rebackup" in rounds[0] else "backup"
                added = [v[step][1] - v[prev][1] for v in rounds]
                col += f" added {statistics.median(added) / 1e6:.2f} MB"
            cols.append(col)
        print(f"  min {m >> 10} KiB ({len(rounds)} rounds): " + "; ".join(cols))
