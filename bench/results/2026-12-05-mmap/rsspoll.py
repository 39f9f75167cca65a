#!/usr/bin/env python3
# rsspoll.py CMD...: runs CMD, polls /proc/PID/status every ~2 ms; prints the sample with max VmRSS
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
best = None; n = 0
while p.poll() is None:
    try:
        s = open(f"/proc/{p.pid}/status").read()
    except Exception:
        break
    d = {}
    for line in s.splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM", "Threads"):
            d[k] = int(v.split()[0])
    n += 1
    if "VmRSS" in d and (best is None or d["VmRSS"] > best["VmRSS"]):
        best = dict(d); best["t"] = n
    time.sleep(0.002)
print(best, "samples", n)
