# pathwalk.py PERF.data: samples in all; the walk thread's samples, those
# of them in the index cache's lookups and in mkdir/mkdirat and openat, and
# of the last the ones in the kernel's path walk.
import subprocess, sys
out = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "tid,ip,sym"],
                     capture_output=True, text=True).stdout
tot = walker = calls = walk = look = 0
for s in out.split("\n\n"):
    ls = [x.strip() for x in s.strip().split("\n") if x.strip()]
    if not ls:
        continue
    fr = [x.split(None, 1)[1] if len(x.split(None, 1)) > 1 else x for x in ls[1:]]
    tot += 1
    if not any("TreeRestorer" in f for f in fr) or any("rayon" in f for f in fr):
        continue
    walker += 1
    if any("index::cache::lookup_on" in f for f in fr):
        look += 1
    if any(f.startswith(("__x64_sys_mkdir", "__x64_sys_openat")) for f in fr):
        calls += 1
        walk += any(k in f for f in fr for k in ("link_path_walk", "path_init", "strncpy_from_user", "getname"))
print(f"{sys.argv[1]}: samples {tot}; walk thread {walker}: index lookups {look}, mkdir/openat {calls}, path walk in them {walk}")
