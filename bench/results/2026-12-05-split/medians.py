#!/usr/bin/env python3
"""Medians of runs-1.txt, runs-2.txt (ab.sh) and cold.txt (cold.sh): python3 medians.py > medians.txt"""
import statistics as st

for f in ['runs-1.txt', 'runs-2.txt']:
    rows = [l.split() for l in open(f)]
    for mode in ['all', 'big']:
        for sp in ['on', 'off']:
            w = [float(r[4]) for r in rows if r[0] == mode and r[1] == sp]
            m = [int(r[3]) for r in rows if r[0] == mode and r[1] == sp]
            print(f"{f} {mode} split {sp}: median wall {st.median(w):.3f} s of {len(w)}, peak RSS {max(m)} KiB")
rows = [l.split() for l in open('cold.txt') if not l.startswith(' ')]
for sp in ['on', 'off']:
    w = [float(r[3]) for r in rows if r[0] == sp]
    k = [int(r[6]) for r in rows if r[0] == sp]
    print(f"cold.txt split {sp}: median wall {st.median(w):.3f} s of {len(w)}, repository {min(k)}-{max(k)} KiB")
