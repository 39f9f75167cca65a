"""Summarises restore-*.txt, cold-*.txt and cold-peers-*.txt (this directory,
or the directory given as the only argument) into summary.txt: per series,
the medians, the ratio of the medians, and in how many rounds each of issue
15's targets was met round by round."""
import glob
import os
import sys
from statistics import median

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
STAGES = ["read", "chunk", "hash", "compress", "encrypt"]
CORES = 2


def rows(path):
    with open(path) as f:
        return [line.split() for line in f if line[0].isdigit()]


def restore(path):
    t = {}
    for r, tool, wall, rss in rows(path):
        t.setdefault(int(r), {})[tool] = (float(wall), int(rss))
    rounds = sorted(t)
    out = [f"{os.path.basename(path)}: {len(rounds)} rounds"]
    for tool in ["larder", "restic", "rustic"]:
        w = [t[r][tool][0] for r in rounds]
        out.append(f"  {tool:7s} wall median {median(w):.3f} s (min {min(w):.3f}, max {max(w):.3f}); "
                   f"peak RSS median {median(t[r][tool][1] for r in rounds):.0f} KiB")
    for peer, need in [("restic", 3.0), ("rustic", 2.0)]:
        per = [t[r][peer][0] / t[r]["larder"][0] for r in rounds]
        mid = median(t[r][peer][0] for r in rounds) / median(t[r]["larder"][0] for r in rounds)
        out.append(f"  {peer} / larder: ratio of medians {mid:.2f}x; per round median {median(per):.2f}x "
                   f"(min {min(per):.2f}, max {max(per):.2f}); >= {need:g}x in {sum(x >= need for x in per)} "
                   f"of {len(per)} rounds")
        lm = median(t[r]["larder"][0] for r in rounds)
        need_s = median(t[r][peer][0] for r in rounds) / need
        out.append(f"    (computed: {need:g}x {peer}'s median needs larder at {need_s:.3f} s, "
                   f"{(1 - need_s / lm) * 100:.1f} % less than its median)")
    return out


def cold(path):
    t, total = {}, None
    with open(path) as f:
        for line in f:
            p = line.split()
            if p[0] == "tree":
                total = int(p[1])
            elif p[0].isdigit():
                t.setdefault(int(p[0]), {})[p[1]] = (float(p[2]), int(p[3]) if len(p) > 3 else None)
    rounds = sorted(t)
    out = [f"{os.path.basename(path)}: {len(rounds)} rounds, tree {total} bytes"]
    e2e, work, share, walked = [], [], [], []
    for r in rounds:
        d = t[r]
        c, o, pipe = d["cold"][0], d["open"][0], d["pipeline"][0]
        limit = CORES / sum(d["stage_" + s][0] / d["stage_" + s][1] for s in STAGES)
        e2e.append(c / pipe)
        work.append((c - o) / pipe)
        share.append(total / (c - o) / limit)
        # The limit with the walk (listing and stat-ing the tree, one core,
        # which the limit leaves out) added to the stages' cost.
        with_walk = CORES / (CORES / limit + d["stage_walk"][0] / d["stage_walk"][1])
        walked.append(total / (c - o) / with_walk)
    for name, key in [("cold", "cold"), ("open", "open"), ("pipeline", "pipeline"), ("walk", "stage_walk")]:
        w = [t[r][key][0] for r in rounds]
        out.append(f"  {name:8s} median {median(w):.3f} s (min {min(w):.3f}, max {max(w):.3f})")
    for label, xs, ok, fmt in [
        ("cold / pipeline, end to end (<= 1.2x)", e2e, lambda x: x <= 1.2, "{:.2f}x"),
        ("cold less open / pipeline (as work)", work, lambda x: x <= 1.2, "{:.2f}x"),
        ("share of the stage limit, work (>= 75 %)", [x * 100 for x in share], lambda x: x >= 75, "{:.1f} %"),
        ("the same with the walk stage in the limit (computed)", [x * 100 for x in walked], lambda x: x >= 75,
         "{:.1f} %"),
    ]:
        out.append(f"  {label}: per round median {fmt.format(median(xs))} (min {fmt.format(min(xs))}, "
                   f"max {fmt.format(max(xs))}); met in {sum(map(ok, xs))} of {len(xs)} rounds")
    return out


def cold_peers(path):
    t = {}
    for r, tool, c, o, size in rows(path):
        t.setdefault(int(r), {})[tool] = (float(c), float(o), int(size))
    rounds = sorted(t)
    out = [f"{os.path.basename(path)}: {len(rounds)} rounds"]
    for tool in ["larder", "restic", "rustic"]:
        c = [t[r][tool][0] for r in rounds]
        out.append(f"  {tool:7s} cold median {median(c):.3f} s (min {min(c):.3f}, max {max(c):.3f}); "
                   f"open median {median(t[r][tool][1] for r in rounds):.3f} s; "
                   f"repository median {median(t[r][tool][2] for r in rounds):.0f} bytes")
    for peer, need in [("restic", 2.5), ("rustic", 3.0)]:
        e2e = [t[r][peer][0] / t[r]["larder"][0] for r in rounds]
        work = [(t[r][peer][0] - t[r][peer][1]) / (t[r]["larder"][0] - t[r]["larder"][1]) for r in rounds]
        both = sum(a >= need and b >= need for a, b in zip(e2e, work))
        size = [t[r]["larder"][2] / t[r][peer][2] for r in rounds]
        out.append(f"  {peer} / larder: end to end per round median {median(e2e):.2f}x (min {min(e2e):.2f}, "
                   f"max {max(e2e):.2f}); work median {median(work):.2f}x (min {min(work):.2f}, max {max(work):.2f}); "
                   f">= {need:g}x both ways in {both} of {len(rounds)} rounds")
        out.append(f"  larder's repository / {peer}'s: median {median(size):.3f}x (min {min(size):.3f}, "
                   f"max {max(size):.3f})")
    return out


lines = []
for p in sorted(glob.glob(os.path.join(HERE, "restore-*.txt"))):
    lines += restore(p)
for p in sorted(glob.glob(os.path.join(HERE, "cold-[0-9]*.txt"))):
    lines += cold(p)
for p in sorted(glob.glob(os.path.join(HERE, "cold-peers-*.txt"))):
    lines += cold_peers(p)
print("\n".join(lines))
