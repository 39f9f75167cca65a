#!/usr/bin/env python3
"""medians.py FILE...: per file, each item's median wall time and peak
RSS with the listing made during the key derivation (on) and without
(off), the ratio off/on of the medians, and in how many rounds on was
faster."""
import statistics as st
import sys
from collections import defaultdict

for f in sys.argv[1:]:
    rows = defaultdict(dict)  # (item) -> mode -> {round: (s, kib)}
    for line in open(f):
        r, mode, item, s, kib = line.split()
        rows[item].setdefault(mode, {})[int(r)] = (float(s), int(kib))
    print(f)
    for item, modes in rows.items():
        off, on = modes["off"], modes["on"]
        mo = st.median(v[0] for v in off.values())
        mn = st.median(v[0] for v in on.values())
        ro = st.median(v[1] for v in off.values())
        rn = st.median(v[1] for v in on.values())
        wins = sum(on[r][0] < off[r][0] for r in on if r in off)
        print(f"  {item}: off {mo:.3f} s ({min(v[0] for v in off.values()):.3f}-{max(v[0] for v in off.values()):.3f}), "
              f"on {mn:.3f} s ({min(v[0] for v in on.values()):.3f}-{max(v[0] for v in on.values()):.3f}); "
              f"off/on {mo / mn:.3f}; on faster in {wins} of {len(on)}; "
              f"peak RSS medians {ro:.0f} / {rn:.0f} KiB (+{(rn - ro) / 1024:.1f} MiB)")
