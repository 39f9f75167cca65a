#!/usr/bin/env python3
# ab.py MODE N BIN... : MODE rb (an unchanged re-backup) or inc (500 edited, 100 added,
# 100 deleted files, fresh edits each round); the binaries in turn, the first
# alternating. The tree and an initialised repository with a cheap key
# (password benchpw) come from AB_TREE, AB_REPO, AB_CACHE, AB_STATE (defaults
# under /var/tmp/dt, where these runs were made); AB_OUT appends every round.
import os, sys, subprocess, time, resource, random, statistics
mode, n, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
env = dict(os.environ, LARDER_PASSWORD='benchpw', LARDER_REPOSITORY=os.environ.get('AB_REPO','/var/tmp/dt/srepo'), LARDER_CACHE_DIR=os.environ.get('AB_CACHE','/var/tmp/dt/scache'),
           LARDER_STATE_DIR=os.environ.get('AB_STATE','/var/tmp/dt/sstate'), LARDER_INSECURE_TEST_KDF='1', LARDER_KDF_WORK_FACTOR='10')
BD = '/work/main/scripts/bench_data.py'
TREE = os.environ.get('AB_TREE', '/var/tmp/dt/src')
def run(b):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.perf_counter()
    subprocess.run([b, '-q', 'backup', TREE], env=env, check=True, stdout=subprocess.DEVNULL)
    t1 = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return t1 - t0, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
res = {b: [] for b in bins}
for i in range(n):
    order = bins if i % 2 == 0 else bins[::-1]
    for b in order:
        if mode == 'inc':
            subprocess.run(['python3', BD, 'edit', 'apply', TREE, '/var/tmp/dt/esave', f'ab{random.random()}'], check=True, stdout=subprocess.DEVNULL)
        res[b].append(run(b))
        if mode == 'inc':
            subprocess.run(['python3', BD, 'edit', 'revert', TREE, '/var/tmp/dt/esave'], check=True)
            subprocess.run([b, '-q', 'backup', TREE], env=env, check=True, stdout=subprocess.DEVNULL)
out = open(os.environ.get('AB_OUT', '/dev/null'), 'a')
for i in range(n):
    for b in bins:
        w, c = res[b][i]
        print(f"{os.path.basename(TREE)} {mode} round {i+1} {os.path.basename(b)} wall_ms {w*1000:.1f} cpu_ms {c*1000:.1f}", file=out)
for b in bins:
    w = [x[0] for x in res[b]]; c = [x[1] for x in res[b]]
    line = f"{os.path.basename(b):14s} wall median {statistics.median(w)*1000:6.1f} ms (min {min(w)*1000:.1f}, max {max(w)*1000:.1f}); cpu median {statistics.median(c)*1000:6.1f} ms"
    print(line); print(os.path.basename(TREE), mode, line, file=out)
