#!/usr/bin/env python3
# abfast.py ROUNDS BIN...: unchanged re-backups of the usual tree (cheap key) into one copy of prep-cheap,
# binaries alternated; wall by perf_counter; prints medians
import os, subprocess, sys, time, shutil, statistics as st
n = int(sys.argv[1]); bins = sys.argv[2:]
W = "/var/tmp/dt/abf"; P = "/var/tmp/dt/prep-cheap"
shutil.rmtree(W, ignore_errors=True); os.makedirs(W)
for d in ("repo", "cache", "state"):
    subprocess.run(["cp", "-a", f"{P}/{d}", W], check=True)
env = dict(os.environ, LARDER_PASSWORD="larder-bench passphrase 5", LARDER_INSECURE_TEST_KDF="1", LARDER_KDF_WORK_FACTOR="10",
           LARDER_REPOSITORY=f"{W}/repo", LARDER_CACHE_DIR=f"{W}/cache", LARDER_STATE_DIR=f"{W}/state")
res = {b: [] for b in bins}
for i in range(n):
    order = bins if i % 2 == 0 else bins[::-1]
    for b in order:
        t = time.perf_counter()
        subprocess.run([b, "-q", "backup", "/var/tmp/dt/corpus"], env=env, check=True, stdout=subprocess.DEVNULL)
        res[b].append(time.perf_counter() - t)
for b, v in res.items():
    print(os.path.basename(b), "median %.1f ms (%.1f-%.1f) n %d" % (1000 * st.median(v), 1000 * min(v), 1000 * max(v), len(v)), " ".join("%.0f" % (1000 * x) for x in v))
shutil.rmtree(W)
