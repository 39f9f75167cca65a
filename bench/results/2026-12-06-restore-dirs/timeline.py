"""How busy the two cores were through one command, in buckets of time.

Usage: perf record -a -g -e cpu-clock -F 1999 -o T.data -- COMMAND
       perf script -i T.data -F comm,tid,time,ip,sym > T.txt
       python3 timeline.py T.txt [BUCKET_SECONDS]

Per bucket (0.02 s unless given), from the command's first sample: the
idle samples (the `swapper` task) of all samples, and the samples of
each of the command's threads. Where more than 30 % of a bucket is idle,
the command's most frequent frames there follow (the first of larder's
own frames in each stack, else its leaf). The last line is the idle
share over the whole command."""
import collections
import sys

bucket = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
samples, cur = [], None
for line in open(sys.argv[1]):
    if not line.strip():
        if cur:
            samples.append(cur)
        cur = None
        continue
    if not line.startswith((" ", "\t")):
        p = line.split()
        cur = [p[0], p[1], float(p[2].rstrip(":")), []]
    else:
        p = line.split(None, 1)
        if cur is not None and len(p) > 1:
            cur[3].append(p[1].strip())
if cur:
    samples.append(cur)
own = [s for s in samples if s[0].startswith("larder")]
t0 = min(s[2] for s in own)
t1 = max(s[2] for s in own)
buckets = collections.defaultdict(list)
for s in samples:
    if t0 <= s[2] <= t1:
        buckets[int((s[2] - t0) / bucket)].append(s)


def frame(stack):
    for f in stack:
        if "::" in f and "larder" in f:
            return f[:70]
    return stack[0][:40] if stack else "?"


idle_all = total_all = 0
for k in sorted(buckets):
    ss = buckets[k]
    idle = sum(1 for s in ss if s[0] == "swapper")
    idle_all += idle
    total_all += len(ss)
    tids = collections.Counter(s[1] for s in ss if s[0].startswith("larder"))
    print(f"{k * bucket:5.2f} s  idle {idle:3d}/{len(ss):3d}  threads {dict(tids)}")
    if idle > 0.3 * len(ss):
        c = collections.Counter(frame(s[3]) for s in ss if s[0].startswith("larder"))
        print("        " + "; ".join(f"{n}x {f}" for f, n in c.most_common(4)))
print(f"idle {idle_all} of {total_all} samples ({100 * idle_all / max(total_all, 1):.1f} %)")
