#!/usr/bin/env python3
import sys, statistics as st, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if len(p) != 6: continue
        for k, v in zip(("rss", "wall", "user", "sys"), p[2:]):
            d[p[0]][k].append(float(v))
for b, m in d.items():
    print(b, " ".join(f"{k} med {st.median(v):g} ({min(v):g}-{max(v):g})" for k, v in m.items()), "n", len(m["rss"]))
