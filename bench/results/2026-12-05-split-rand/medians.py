"""Medians of ab.sh's output (runs-1.txt, runs-2.txt): wall and user+system
seconds, peak RSS and the bytes the edit backup added, per row and split."""
import statistics
import sys

for name in sys.argv[1:] or ["runs-1.txt", "runs-2.txt"]:
    rows = {}
    for line in open(name):
        f = line.split()
        row, split = f[0], f[1]
        kib, wall, user, sys_ = int(f[3]), float(f[4]), float(f[5]), float(f[6])
        added = int(f[8]) if len(f) > 8 else None
        rows.setdefault((row, split), []).append((kib, wall, user + sys_, added))
    for (row, split), s in sorted(rows.items()):
        med = lambda i: statistics.median(x[i] for x in s)
        line = (f"{name} {row:5} {split:3} n={len(s)} wall {med(1):.3f} s"
                f" (min {min(x[1] for x in s):.2f})  cpu {med(2):.2f} s  peak {med(0):.0f} KiB")
        if s[0][3] is not None:
            line += f"  added {med(3) / 1e6:.1f} MB"
        print(line)
