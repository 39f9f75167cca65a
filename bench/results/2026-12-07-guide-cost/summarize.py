#!/usr/bin/env python3
"""Medians and paired differences of cost.sh's lines: summarize.py runs.txt"""
import statistics as st
import sys

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for m, r, w, u, s, k, _br, bg in rows:
    by.setdefault(m, {})[int(r)] = (float(w), float(u), float(s), int(k), int(bg))
for m in ("guided", "force"):
    d = by[m].values()
    print(f"{m}: wall median {st.median(x[0] for x in d):.4f} s (range {min(x[0] for x in d):.3f}-{max(x[0] for x in d):.3f}), "
          f"user median {st.median(x[1] for x in d):.3f} s, sys median {st.median(x[2] for x in d):.3f} s, "
          f"peak {min(x[3] for x in d)}-{max(x[3] for x in d)} KiB, bytes_guided {sorted(set(x[4] for x in d))}")
diff = [by["guided"][r][0] - by["force"][r][0] for r in sorted(by["guided"])]
udiff = [by["guided"][r][1] - by["force"][r][1] for r in sorted(by["guided"])]
print("paired wall difference guided - force, by round:", " ".join(f"{x:+.3f}" for x in diff))
print(f"median paired wall difference {st.median(diff):+.4f} s; guided faster in {sum(x < 0 for x in diff)} of {len(diff)} rounds")
print(f"median paired user difference {st.median(udiff):+.3f} s")
