#!/usr/bin/env python3
"""Makes table.md from samples.txt alone (lines: run set mode round wall user sys maxrss_kib bytes).

A mode helps only if its median wall time is at least 10 % below `read`'s
in both runs (the rule of ../2026-12-02-mmap)."""
import collections, statistics, sys

SETS = {
    "backup-r": "backup of a 1 GiB file of random bytes",
    "backup-c": "backup of one 781 MiB tar of the benchmark tree",
    "check-corepo": "`check --read-data` of the benchmark tree's repository (146 MiB, 10 packs)",
    "check-crepo": "`check --read-data` of the tar's repository (135 MiB)",
    "restore-corepo": "restore of the benchmark tree onto tmpfs (742 MiB)",
}
rows = collections.defaultdict(list)
for line in open(sys.argv[1] if len(sys.argv) > 1 else "samples.txt"):
    p = line.split()
    rows[(p[1], p[2], p[0])].append((float(p[4]), float(p[5]) + float(p[6]), int(p[7])))
out = ["# memmap2 in larder's own commands, end to end (prototype.patch)", "",
       "Median wall time of the interleaved rounds in each of two separate runs "
       "(rounds per run in brackets), CPU (user + sys) medians, the highest peak RSS; "
       "speed is `read`'s median time over the mode's. Verdict: helps only if at least "
       "1.10× in both runs.", "",
       "| command | mode | wall, run 1 / run 2 | CPU, run 1 / run 2 | peak RSS | speed against `read` | verdict |",
       "|---|---|---|---|---|---|---|"]
for s, title in SETS.items():
    modes = [m for m in ("read", "reuse", "mmap", "mmap-whole", "mmap-32MiB") if (s, m, "1") in rows]
    for m in modes:
        med = {r: statistics.median(x[0] for x in rows[(s, m, r)]) for r in ("1", "2")}
        cpu = {r: statistics.median(x[1] for x in rows[(s, m, r)]) for r in ("1", "2")}
        rss = max(x[2] for r in ("1", "2") for x in rows[(s, m, r)]) / 1024
        n = len(rows[(s, m, "1")])
        if m == "read":
            speed, verdict = "—", "(larder today)"
        else:
            sp = [statistics.median(x[0] for x in rows[(s, "read", r)]) / med[r] for r in ("1", "2")]
            speed = f"{sp[0]:.2f}×, {sp[1]:.2f}×"
            verdict = "**helps**" if min(sp) >= 1.10 else "no gain"
        out.append(f"| {title} | {m} | {med['1']:.2f} / {med['2']:.2f} s [{n}] | "
                   f"{cpu['1']:.2f} / {cpu['2']:.2f} s | {rss:.1f} MiB | {speed} | {verdict} |")
print("\n".join(out))
