#!/usr/bin/env python3
"""Medians of the A/B outputs named (default ab-1.txt and ab-2.txt; rows:
binary, wall s, user s, system s, peak RSS KiB)."""
import statistics
import sys
for name in sys.argv[1:] or ("ab-1.txt", "ab-2.txt"):
    rows = {}
    for line in open(name):
        b, *v = line.split()
        rows.setdefault(b, []).append([float(x) for x in v])
    for b, vs in sorted(rows.items()):
        wall = [v[0] for v in vs]
        print(f"{name} {b}: {len(vs)} restores, wall median {statistics.median(wall):.3f} s "
              f"(range {min(wall):.2f}-{max(wall):.2f}), user + system median "
              f"{statistics.median(v[1] + v[2] for v in vs):.2f} s, "
              f"peak RSS median {statistics.median(v[3] for v in vs):.0f} KiB, largest {max(v[3] for v in vs):.0f} KiB")
