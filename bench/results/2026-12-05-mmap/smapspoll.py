#!/usr/bin/env python3
# smapspoll.py CMD...: runs CMD, reads /proc/PID/smaps repeatedly; prints the mappings' Rss at the sample of max total
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
best = (0, None); n = 0
while p.poll() is None:
    try:
        s = open(f"/proc/{p.pid}/smaps").read()
    except Exception:
        break
    maps = []; cur = None
    for line in s.splitlines():
        parts = line.split()
        if '-' in parts[0] and not parts[0].endswith(':'):
            cur = [line[:120], 0]; maps.append(cur)
        elif parts[0] == 'Rss:':
            cur[1] = int(parts[1])
    tot = sum(m[1] for m in maps); n += 1
    if tot > best[0]:
        best = (tot, maps)
print("total", best[0], "samples", n)
for m in sorted(best[1], key=lambda m: -m[1])[:25]:
    if m[1] > 0:
        print(f"{m[1]:8d} {m[0]}")
