#!/usr/bin/env python3
"""Turns the raw samples of one benchmark run (raw.csv, written by
scripts/bench.sh) into the markdown table (table.md). Standard library only,
deterministic: the same raw.csv always gives the same bytes, so a test can
recompute the published table from the committed samples.

Usage: scripts/bench_table.py RAW_CSV [OUT_MD]   (default OUT_MD: stdout)

raw.csv columns: kind,name,tool,run,wall_s,rss_kib,bytes,value
  kind=meta:   name is a key, value its text (machine, versions, corpus...)
  kind=sample: one measured command: name is the row, tool the program,
               run the run number, wall_s seconds, rss_kib peak RSS in KiB,
               bytes the bytes processed or measured (sizes), value a note.
"""

import csv
import re
import sys

TOOLS = ["larder", "restic", "rustic", "borg"]
PEERS15 = ["restic", "rustic"]
MIB = 1 << 20
GIB = 1 << 30


def pct(xs, p):
    """Percentile p (0-100) with linear interpolation between order
    statistics (numpy's default), of a non-empty list."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def med(xs):
    return pct(xs, 50)


def f2(x):
    return f"{x:.2f}"


def fmt_s(x):
    if x < 1:
        return f"{x * 1000:.0f} ms"
    if x < 10:
        return f"{x:.2f} s"
    return f"{x:.1f} s"


def fmt_mib(b):
    return f"{b / MIB:.1f} MiB"


def fmt_rate(x):
    return f"{x:.1f} MiB/s"


def fmt_delta(x):
    return ("+" if x >= 0 else "−") + fmt_s(abs(x))


def fmt_x(x):
    if x is None:
        return "n/a"
    return f"{x:.2f}×"


class Data:
    def __init__(self, path):
        self.meta = {}
        self.samples = {}  # (name, tool) -> list of dict
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if r["kind"] == "meta":
                    self.meta[r["name"]] = r["value"]
                elif r["kind"] == "sample":
                    self.samples.setdefault((r["name"], r["tool"]), []).append(r)

    def tools(self):
        present = {t for (_, t) in self.samples}
        return [t for t in TOOLS if t in present]

    def walls(self, name, tool):
        return [float(r["wall_s"]) for r in self.samples.get((name, tool), []) if r["wall_s"]]

    def rss(self, name, tool):
        return [int(r["rss_kib"]) for r in self.samples.get((name, tool), []) if r["rss_kib"]]

    def nbytes(self, name, tool):
        return [int(r["bytes"]) for r in self.samples.get((name, tool), []) if r["bytes"]]

    def has(self, name, tool):
        return bool(self.samples.get((name, tool)))

    def issue15(self):
        return "rustic" in self.tools() or any(n in ISSUE15_ROWS for (n, _) in self.samples)

    def per_run(self, name, tool, field="wall_s", value=None, agg=None):
        """{run: one figure} of a row: the median of the run's samples
        (`agg` max for RSS), optionally only samples whose value is `value`."""
        runs = {}
        for r in self.samples.get((name, tool), []):
            if r[field] and (value is None or r["value"] == value):
                runs.setdefault(r["run"], []).append(float(r[field]))
        return {k: (agg or med)(v) for k, v in runs.items()}


# Rows of the main table: (name, label, kind). kind "rate" shows MiB/s from
# the bytes processed, "time" shows seconds.
ROWS = [
    ("cold_backup", "cold backup (fresh repository)", "rate"),
    ("second_backup", "second backup, nothing changed", "time"),
    ("incr_backup", "backup after 500 edited, 100 added, 100 deleted files", "time"),
    ("restore_shm", "full restore onto tmpfs (`/dev/shm`)", "rate"),
    ("restore_disk", "full restore onto disk (then `sync`)", "rate"),
    ("diff", "diff of the unchanged and the edited snapshot", "time"),
    ("snapshots", "open: `snapshots` (KDF included)", "time"),
    ("rand_backup", "{rand} random file: first backup", "rate"),
    ("rand_edit_backup", "{rand} random file: backup after 100 × 1 KiB edits", "time"),
    ("prune", "{prune} snapshots: forget all but the last 3 and free their space", "time"),
    ("restore_one", "one small file ({one}) restored from snapshot 1 onto tmpfs", "time"),
    ("check_read", "`check --read-data` after the cold backup (borg: `check --verify-data`), "
     "MiB/s of repository read", "rate"),
]

# Rows that exist only in runs made for issue 15 (rustic, the reference
# pipelines, the new sections): without them the table is what it was.
ISSUE15_ROWS = ["ref_tar_zstd", "ref_untar_shm", "cp_shm", "restore_one", "check_read", "flat_open_cold",
                "flat_restore_one_cold", "snaps_snapshots", "comp_backup"]


def cell(d, name, tool, kind):
    w = d.walls(name, tool)
    if not w:
        return "—"
    m, lo, hi = med(w), pct(w, 5), pct(w, 95)
    out = f"{fmt_s(m)} [{fmt_s(lo)}–{fmt_s(hi)}]"
    if kind == "rate":
        b = med(d.nbytes(name, tool) or [0])
        if m > 0 and b:
            # Throughput percentiles invert the time percentiles.
            out = f"{fmt_rate(b / MIB / m)} [{fmt_rate(b / MIB / hi)}–{fmt_rate(b / MIB / lo)}], {fmt_s(m)}"
    rss = d.rss(name, tool)
    if rss:
        out += f"; RSS {med(rss) / 1024:.0f} MiB"
    return out


def open_cost(d, tool):
    w = d.walls("snapshots", tool)
    return med(w) if w else 0.0


def speedup(d, name, base, tool="larder"):
    """(end to end, work) speed-up of `tool` over `base` on row `name`:
    ratio of median times; work takes each tool's median open cost out."""
    a, b = d.walls(name, tool), d.walls(name, base)
    if not a or not b:
        return None, None
    ta, tb = med(a), med(b)
    e2e = tb / ta if ta > 0 else None
    wa, wb = ta - open_cost(d, tool), tb - open_cost(d, base)
    work = wb / wa if wa > 0 and wb > 0 else None
    return e2e, work


def repo_ratio(d, tool):
    r = d.nbytes("repo_size", tool)
    src = int(d.meta.get("corpus_bytes", "0") or 0)
    if not r or not src:
        return None
    return med(r) / src


def rand_added(d, tool):
    r = d.nbytes("rand_added", tool)
    return med(r) if r else None


def verdict(ok):
    if ok is None:
        return "not measured"
    return "**met**" if ok else "**not met**"


def runs_list(runs, fmt):
    """The per-run figures, in run order: "a, b, c"."""
    return ", ".join(fmt(runs[k]) for k in sorted(runs, key=lambda k: int(k) if k.isdigit() else 0))


def ratio_runs(a, b):
    """{run: a/b} over the runs both have."""
    return {k: a[k] / b[k] for k in a if k in b and b[k] > 0}


def open_runs(d, tool):
    return d.per_run("snapshots", tool)


def speedup_runs(d, name, base, work=False, base_name=None):
    """{run: speed-up of larder over `base` on row `name`}, end to end or as
    work (each tool's open cost in that run taken out). `base_name` reads
    the peer's figures from another row (its samples timed beside
    larder's, `name`_pair)."""
    a, b = d.per_run(name, "larder"), d.per_run(base_name or name, base)
    if work:
        oa, ob = open_runs(d, "larder"), open_runs(d, base)
        a = {k: v - oa[k] for k, v in a.items() if k in oa}
        b = {k: v - ob[k] for k, v in b.items() if k in ob}
        a = {k: v for k, v in a.items() if v > 0}
        b = {k: v for k, v in b.items() if v > 0}
    return ratio_runs(b, a)


def all_runs(runs, ok):
    """Verdict over the per-run figures: None when there are none."""
    if not runs:
        return None
    return all(ok(v) for v in runs.values())


REFS = [
    ("ref_tar_zstd", "`tar -c TREE \\| zstd -3 -T2 > /dev/null` (the cold backup's limit)", "cold_backup"),
    ("ref_tar_zstd_pair", "`tar -c TREE \\| zstd -3 -T2 > /dev/null`, timed beside each of larder's cold backups",
     "cold_backup"),
    ("ref_untar_shm", "`zstd -dc ARCHIVE \\| tar -x` onto tmpfs (the tmpfs restore's limit)", "restore_shm"),
    ("ref_untar_shm_pair", "`zstd -dc ARCHIVE \\| tar -x` onto tmpfs, timed beside each of larder's restores onto tmpfs",
     "restore_shm"),
    ("cp_shm", "`cp -a` of the tree onto tmpfs", "restore_shm"),
    ("cp_disk", "`cp -a` of the tree onto disk, then `sync` (the disk restore's floor)", "restore_disk"),
    ("cp_disk_pair", "`cp -a` onto disk, then `sync`, timed back to back with larder's restore onto disk", "restore_disk"),
]


def render_refs(d, w):
    """The reference pipelines of issue 15 beside larder's comparable rows."""
    if not d.has("ref_tar_zstd", "ref"):
        return
    w("## Reference pipelines: the plainest commands that move the same bytes")
    w("")
    w("| pipeline | time | larder's row | larder / pipeline (per run) |")
    w("|---|---|---|---|")
    for name, label, row in REFS:
        tool = "cp" if name.startswith("cp_disk") else "ref"
        if not d.has(name, tool):
            continue
        ref = d.per_run(name, tool)
        lr = d.per_run(row, "larder")
        rr = ratio_runs(lr, ref)
        ratio = "—" if not rr else f"{med(list(rr.values())):.2f}× ({runs_list(rr, lambda x: f'{x:.2f}×')})"
        w(f"| {label} | {cell(d, name, tool, 'rate')} | {row} | {ratio} |")
    w("")


PAIRS = [
    ("cold_backup", "cold backup (fresh repository)"),
    ("restore_shm", "full restore onto tmpfs (`/dev/shm`)"),
]


def render_pairs(d, w):
    """The peers' samples timed beside larder's, against their own slots."""
    peers = [t for t in d.tools() if t != "larder" and any(d.has(n + "_pair", t) for n, _ in PAIRS)]
    if not peers:
        return
    w("## Peers timed beside larder")
    w("")
    w("Each of larder's cold backups and restores onto tmpfs also has "
      + " and ".join(f"{t}'s" for t in peers) + " timed right beside it (before it or after it in turn, into and from a "
      "repository of their own), so that both meet the same minute of this shared machine. "
      "Issue 15's targets against those peers for these two rows are judged on these pairs.")
    w("")
    w("| row | peer | peer beside larder | peer in its own slot | larder's speed-up, beside (per run) "
      "| larder's speed-up, slots (per run) |")
    w("|---|---|---|---|---|---|")
    for name, label in PAIRS:
        for t in peers:
            if not d.has(name + "_pair", t):
                continue
            beside = speedup_runs(d, name, t, base_name=name + "_pair")
            slots = speedup_runs(d, name, t)
            w(f"| {label} | {t} | {cell(d, name + '_pair', t, 'rate')} | {cell(d, name, t, 'rate')} "
              f"| {xs(beside)} | {xs(slots)} |")
    w("")


def split_runs(d, name, kind, field="wall_s", agg=None):
    return d.per_run(name, "larder", field, kind, agg)


def render_flat15(d, w):
    """Issue 15's rows of the flatness part: the first open and a one-file
    restore with an empty cache, snapshots' RSS, open-time delta."""
    if not d.has("flat_open_cold", "larder"):
        return
    w("Issue 15's flatness rows: per run, ratios big / fresh (RSS) and the open-time difference.")
    w("")
    w("| | fresh | big index | big vs fresh (per run) |")
    w("|---|---|---|---|")
    # Runs before the flat_open_cmd key opened with `snapshots`, which then
    # read the index.
    cmd = d.meta.get("flat_open_cmd", "snapshots")
    for name, label in [("flat_open_cold", f"first open with an empty cache (`{cmd}`)"),
                        ("flat_restore_one_cold", "one small file restored with an empty cache, end to end"),
                        ("flat_open", f"open (`{cmd}`)"),
                        ("flat_snapshots", "`snapshots`"),
                        ("flat_backup", "cold backup"), ("flat_restore", "restore onto tmpfs"),
                        ("flat_prune", "prune `--dry-run`")]:
        fw, bw = split_runs(d, name, "fresh"), split_runs(d, name, "big")
        fr, br = split_runs(d, name, "fresh", "rss_kib", max), split_runs(d, name, "big", "rss_kib", max)
        if not fw or not bw:
            continue
        delta = {k: bw[k] - fw[k] for k in bw if k in fw}
        rss = ratio_runs(br, fr)
        w(f"| {label}: time | {fmt_s(med(list(fw.values())))} | {fmt_s(med(list(bw.values())))} | "
          f"{runs_list(delta, fmt_delta)} |")
        if fr and br:
            w(f"| {label}: peak RSS | {med(list(fr.values())) / 1024:.0f} MiB | {med(list(br.values())) / 1024:.0f} MiB | "
              f"{runs_list(rss, lambda x: f'{x:.2f}×')} |")
    w("")


SNAPS_ROWS = [("snaps_snapshots", "`snapshots`"), ("snaps_forget", "`forget --keep-last 3 --dry-run`"),
              ("snaps_find", "`find NAME`"), ("snaps_backup", "re-backup of the unchanged tree")]


def render_snaps(d, w):
    if not d.has("snaps_snapshots", "larder"):
        return
    m = d.meta
    many = m.get("snaps_many", "1000")
    w(f"## Flat in the number of snapshots: 10 vs {many}")
    w("")
    w(f"larder, a small tree ({m.get('snaps_tree', '?')}) in a repository with 10 snapshots and one with "
      f"{many}, one file changed in each snapshot; `find` looks for `{m.get('snaps_find', '?')}` in every "
      "snapshot. Each command opens with the passphrase (KDF included).")
    w("")
    w(f"| command | 10 snapshots | {many} snapshots | {many} / 10 (per run) |")
    w("|---|---|---|---|")
    for name, label in SNAPS_ROWS:
        a, b = split_runs(d, name, "10"), split_runs(d, name, many)
        if not a or not b:
            continue
        ra, rb = split_runs(d, name, "10", "rss_kib", max), split_runs(d, name, many, "rss_kib", max)
        rr = ratio_runs(b, a)
        w(f"| {label} | {fmt_s(med(list(a.values())))}; RSS {med(list(ra.values()) or [0]) / 1024:.0f} MiB | "
          f"{fmt_s(med(list(b.values())))}; RSS {med(list(rb.values()) or [0]) / 1024:.0f} MiB | "
          f"{runs_list(rr, lambda x: f'{x:.2f}×')} |")
    w("")


COMP_LEVELS = [("off", "off (stored)"), ("fast", "fast"), ("auto", "auto"), ("better", "better"), ("max", "max")]


def render_comp(d, w):
    tools = [t for t in ("larder", "restic") if d.has("comp_backup", t)]
    if not tools and "comp_larder" not in d.meta:
        return
    m = d.meta
    w("## Compression levels")
    w("")
    # The words larder was run with, and what each meant (the repository's
    # level is in larder's settings line).
    words = [lvl for lvl, _ in COMP_LEVELS
             if lvl in ("off", "fast", "auto", "max")
             or any(r["value"] == lvl for r in d.samples.get(("comp_backup", "larder"), []))]
    conf = re.search(r"zstd level (\d+)", m.get("larder_settings", ""))
    meaning = {"off": "off", "fast": "1", "auto": f"the repository's level {conf.group(1) if conf else 3}",
               "better": "3", "max": "19"}
    w(f"A cold backup into a fresh repository with each level, on {m.get('comp_tree', 'a subset of the corpus')}; "
      f"larder `backup --compression {'|'.join(words)}` (zstd {', '.join(meaning[x] for x in words)}), "
      "restic `--compression off|auto|max`. Size: the repository after the backup, against the source.")
    w("")
    if "comp_larder" in m:
        w(f"larder: {m['comp_larder']}.")
        w("")
    if not tools:
        return
    w("| level | " + " | ".join(tools) + " |")
    w("|---|" + "---|" * len(tools))
    for lvl, label in COMP_LEVELS:
        cells = []
        for t in tools:
            rows = [r for r in d.samples.get(("comp_backup", t), []) if r["value"] == lvl]
            sizes = [int(r["bytes"]) for r in d.samples.get(("comp_size", t), []) if r["value"] == lvl and r["bytes"]]
            if not rows:
                cells.append("—")
                continue
            walls = [float(r["wall_s"]) for r in rows]
            b = int(rows[0]["bytes"] or 0)
            c = f"{fmt_s(med(walls))}"
            if b:
                c = f"{fmt_rate(b / MIB / med(walls))}, " + c
            if sizes and b:
                c += f"; {fmt_mib(med(sizes))} ({med(sizes) / b * 100:.1f} %)"
            rss = [int(r["rss_kib"]) for r in rows if r["rss_kib"]]
            if rss:
                c += f"; RSS {med(rss) / 1024:.0f} MiB"
            cells.append(c)
        if any(c != "—" for c in cells):
            w(f"| {label} | " + " | ".join(cells) + " |")
    w("")


def xs(runs):
    return runs_list(runs, lambda x: f"{x:.2f}×")


def stage_limit_runs(d):
    """{run: the machine's limit for a cold backup, bytes/s}: the cores over
    the summed per-byte cost of the stages measured in that run."""
    stages = ["read", "chunk", "hash", "compress", "encrypt"]
    cores = int(d.meta.get("nproc", "2") or 2)
    per = [ratio_runs(d.per_run("stage_" + s, "stages"), d.per_run("stage_" + s, "stages", "bytes"))
           for s in stages]
    runs = set.intersection(*(set(p) for p in per)) if all(per) else set()
    return {k: cores / sum(p[k] for p in per) for k in runs}


def targets15(d):
    """(target, measured, verdict-or-None) rows of issue 15's targets, each
    judged on every run's own figures."""
    tools, m = d.tools(), d.meta
    out = []
    corpus_b = int(m.get("corpus_bytes", "0") or 0)
    for peer, need in [("restic", 2.5), ("rustic", 3.0)]:
        if peer not in tools or not d.has("cold_backup", "larder"):
            continue
        e, wk = speedup_runs(d, "cold_backup", peer), speedup_runs(d, "cold_backup", peer, work=True)
        ok = all_runs(e, lambda x: x >= need) and all_runs(wk, lambda x: x >= need)
        measured = f"work {xs(wk)}; end to end {xs(e)}"
        # Judged on the peer's samples timed beside larder's where the run
        # has them: its own slot is minutes away.
        if d.has("cold_backup_pair", peer):
            pe = speedup_runs(d, "cold_backup", peer, base_name="cold_backup_pair")
            pw = speedup_runs(d, "cold_backup", peer, work=True, base_name="cold_backup_pair")
            ok = all_runs(pe, lambda x: x >= need) and all_runs(pw, lambda x: x >= need)
            measured = f"{peer} beside larder: work {xs(pw)}; end to end {xs(pe)} ({peer}'s own slot: {measured})"
        out.append((f"cold backup ≥ {need:g}× {peer}'s speed (work and end to end)", measured, ok))
        sz = ratio_runs(d.per_run("repo_size", "larder", "bytes"), d.per_run("repo_size", peer, "bytes"))
        out.append((f"repository no larger than {peer}'s", f"larder / {peer}: {xs(sz)}",
                    all_runs(sz, lambda x: x <= 1.0)))
    # The cold backup's own work: less larder's open cost (its key
    # derivation), per run.
    cold, op = d.per_run("cold_backup", "larder"), open_runs(d, "larder")
    cold_work = {k: v - op[k] for k, v in cold.items() if k in op and v > op[k]}
    # Against the pipeline timed beside larder's cold backups where the run
    # has it: the reference row's samples are minutes away. Judged end to
    # end; the same ratio as work (the open, which the pipeline does not
    # have, taken out) is shown beside it.
    paired = d.has("ref_tar_zstd_pair", "ref")
    pipe = d.per_run("ref_tar_zstd_pair" if paired else "ref_tar_zstd", "ref")
    ref = ratio_runs(cold, pipe)
    if ref:
        work = ratio_runs(cold_work, pipe)
        out.append(("cold backup within 1.2× of `tar \\| zstd -3 -T2`",
                    f"larder / pipeline{' beside it' if paired else ''}: {xs(ref)}"
                    + (f"; as work, its open cost taken out: {xs(work)}" if work else ""),
                    all_runs(ref, lambda x: x <= 1.2)))
    lim = stage_limit_runs(d)
    if lim and corpus_b and d.has("cold_backup", "larder"):
        share = {k: corpus_b / cold_work[k] / lim[k] for k in lim if k in cold_work}
        out.append(("cold backup ≥ 75 % of the machine's stage limit (work)",
                    runs_list(share, lambda x: f"{x * 100:.1f} %"), all_runs(share, lambda x: x >= 0.75)))
    for name, label in [("second_backup", "unchanged re-backup"), ("incr_backup", "incremental backup"),
                        ("diff", "diff")]:
        for peer in [p for p in PEERS15 if p in tools]:
            wk = speedup_runs(d, name, peer, work=True)
            if wk or d.has(name, peer):
                out.append((f"{label}: work ≥ 5× {peer}'s", f"work {xs(wk)}; end to end {xs(speedup_runs(d, name, peer))}",
                            all_runs(wk, lambda x: x >= 5)))
    for peer, need in [("restic", 3.0), ("rustic", 2.0)]:
        if peer in tools and d.has("restore_shm", peer):
            e = speedup_runs(d, "restore_shm", peer)
            measured = f"end to end {xs(e)}; work {xs(speedup_runs(d, 'restore_shm', peer, work=True))}"
            if d.has("restore_shm_pair", peer):
                e = speedup_runs(d, "restore_shm", peer, base_name="restore_shm_pair")
                pw = speedup_runs(d, "restore_shm", peer, work=True, base_name="restore_shm_pair")
                measured = f"{peer} beside larder: end to end {xs(e)}; work {xs(pw)} ({peer}'s own slot: {measured})"
            out.append((f"restore onto tmpfs ≥ {need:g}× {peer}'s speed (end to end)", measured,
                        all_runs(e, lambda x: x >= need)))
    # Against the pipeline timed beside larder's restores where the run has
    # it: the reference row's single sample is minutes away.
    paired = d.has("ref_untar_shm_pair", "ref")
    untar = "ref_untar_shm_pair" if paired else "ref_untar_shm"
    r = ratio_runs(d.per_run("restore_shm", "larder"), d.per_run(untar, "ref"))
    if r:
        out.append(("restore onto tmpfs within 1.1× of `zstd -dc \\| tar -x`",
                    f"larder / pipeline{' beside it' if paired else ''}: {xs(r)}",
                    all_runs(r, lambda x: x <= 1.1)))
    # Against the `cp -a` timed back to back with the restore where the run
    # has it: this disk's speed drifts over minutes, and the two are
    # otherwise timed minutes apart.
    paired = d.has("cp_disk_pair", "cp")
    cp_name = "cp_disk_pair" if paired else "cp_disk"
    r = ratio_runs(d.per_run("restore_disk", "larder"), d.per_run(cp_name, "cp"))
    if r:
        out.append(("restore onto disk within 1.5× of `cp -a`",
                    f"larder / `cp -a`{' back to back' if paired else ''}: {xs(r)}",
                    all_runs(r, lambda x: x <= 1.5)))
    for peer in [t for t in tools if t != "larder"]:
        worst, runs = None, {}
        for name in ["cold_backup", "incr_backup", "restore_shm", "restore_disk", "prune"]:
            rr = ratio_runs(d.per_run(name, "larder", "rss_kib", agg=max), d.per_run(name, peer, "rss_kib", agg=max))
            for k, v in rr.items():
                runs[name + "/" + k] = v
                if worst is None or v > worst[0]:
                    worst = (v, name, k)
        if worst:
            out.append((f"peak RSS ≤ ½ {peer}'s (cold, incremental, restore, prune)",
                        f"worst {worst[0]:.2f}× ({worst[1]}, run {worst[2]})", all(v <= 0.5 for v in runs.values())))
    if "restic" in tools:
        rr = ratio_runs(d.per_run("snapshots", "larder", "rss_kib", agg=max),
                        d.per_run("snapshots", "restic", "rss_kib", agg=max))
        if rr:
            out.append(("`snapshots` peak RSS ≤ restic's", f"larder / restic: {xs(rr)}", all_runs(rr, lambda x: x <= 1.0)))
    blobs = m.get("synth_blobs", "?")
    cmd = m.get("flat_open_cmd", "snapshots")
    for name, label in [("flat_backup", "backup"), ("flat_restore", "restore"), ("flat_prune", "prune"),
                        ("flat_open", f"`{cmd}`"), ("flat_snapshots", "`snapshots`"),
                        ("flat_open_cold", "first open (empty cache)"),
                        ("flat_restore_one_cold", "one-file restore (empty cache)")]:
        rr = ratio_runs(split_runs(d, name, "big", "rss_kib", max), split_runs(d, name, "fresh", "rss_kib", max))
        if rr and d.has("flat_open_cold", "larder"):
            out.append((f"{blobs} blobs: {label} peak RSS ≤ 1.2× a fresh repository's", xs(rr),
                        all_runs(rr, lambda x: x <= 1.2)))
    if d.has("flat_open_cold", "larder"):
        fo, bo = split_runs(d, "flat_open", "fresh"), split_runs(d, "flat_open", "big")
        delta = {k: bo[k] - fo[k] for k in bo if k in fo}
        out.append((f"{blobs} blobs: open within 0.1 s of a fresh repository's", runs_list(delta, fmt_delta),
                    all_runs(delta, lambda x: x <= 0.1)))
        c = split_runs(d, "flat_open_cold", "big")
        out.append((f"{blobs} blobs: first open with an empty cache ≤ 15 s", runs_list(c, fmt_s),
                    all_runs(c, lambda x: x <= 15)))
        c = split_runs(d, "flat_restore_one_cold", "big")
        out.append((f"{blobs} blobs: one-file restore with an empty cache ≤ 20 s end to end", runs_list(c, fmt_s),
                    all_runs(c, lambda x: x <= 20)))
    many = m.get("snaps_many", "1000")
    for name, label in SNAPS_ROWS:
        rr = ratio_runs(split_runs(d, name, many), split_runs(d, name, "10"))
        if rr:
            out.append((f"{many} snapshots: {label} ≤ 2× its time with 10", xs(rr), all_runs(rr, lambda x: x <= 2)))
    return out


def render_targets15(d, w):
    if not d.issue15() or "larder" not in d.tools():
        return
    rows = targets15(d)
    if not rows:
        return
    w("## Targets of issue 15")
    w("")
    w("Per-run figures (run 1, run 2, ...); **met** only if met in every run.")
    w("")
    w("| target | measured (per run) | verdict |")
    w("|---|---|---|")
    for target, measured, ok in rows:
        w(f"| {target} | {measured} | {verdict(ok)} |")
    w("")


S3_ROWS = [
    ("s3_backup", "cold backup into an empty bucket"),
    ("s3_rebackup", "second backup, nothing changed"),
    ("s3_restore", "restore of the latest snapshot onto tmpfs"),
]


def s3_values(d, name, tool):
    rows = d.samples.get((name, tool), [])
    return [int(r["value"]) for r in rows if r["value"]], [int(r["bytes"]) for r in rows if r["bytes"]]


def render_s3(d, w):
    """The S3 rows (issue 13): time, requests made and bytes moved, larder
    against restic on moto's server."""
    tools = [t for t in ("larder", "restic") if any(d.has(n, t) for n, _ in S3_ROWS)]
    if not tools:
        return
    w(f"## Over S3 ({d.meta.get('version_moto', 'moto')} on 127.0.0.1)")
    w("")
    w("Each tool with a server of its own per run and its own local cache; requests counted from the "
      "server's log, bytes moved (both ways) by a relay in front of it (`scripts/tcp_count.py`).")
    w("")
    head = "| work | " + " | ".join(tools) + " |"
    both = "larder" in tools and "restic" in tools
    if both:
        head += " larder vs restic: speed-up / requests / bytes |"
    w(head)
    w("|" + "---|" * (1 + len(tools) + (1 if both else 0)))
    verdicts = []
    for name, label in S3_ROWS:
        if not any(d.has(name, t) for t in tools):
            continue
        cells = []
        for t in tools:
            walls = d.walls(name, t)
            reqs, moved = s3_values(d, name, t)
            if not walls:
                cells.append("—")
                continue
            c = f"{fmt_s(med(walls))} [{fmt_s(pct(walls, 5))}–{fmt_s(pct(walls, 95))}]"
            if reqs:
                c += f"; {med(reqs):.0f} requests"
            if moved:
                c += f"; {fmt_mib(med(moved))} moved"
            rss = d.rss(name, t)
            if rss:
                c += f"; RSS {med(rss) / 1024:.0f} MiB"
            cells.append(c)
        if both:
            e2e, _ = speedup(d, name, "restic")
            (lr, lb), (rr, rb) = s3_values(d, name, "larder"), s3_values(d, name, "restic")
            rq = f"{med(lr) / med(rr):.2f}" if lr and rr and med(rr) > 0 else "n/a"
            by = f"{med(lb) / med(rb):.2f}" if lb and rb and med(rb) > 0 else "n/a"
            cells.append(f"{fmt_x(e2e)} / {rq} / {by}")
            if e2e is not None and lr and rr:
                verdicts.append((label, e2e, med(lr), med(rr)))
        w(f"| {label} | " + " | ".join(cells) + " |")
    w("")
    if verdicts:
        w("## Targets of issue 13 (S3)")
        w("")
        w("| target | measured | verdict |")
        w("|---|---|---|")
        for label, e2e, lr, rr in verdicts:
            w(f"| {label}: fewer requests than restic | {lr:.0f} vs {rr:.0f} | {verdict(lr < rr)} |")
            w(f"| {label}: faster than restic | {fmt_x(e2e)} | {verdict(e2e > 1)} |")
        w("")


def render(d):
    m = d.meta
    tools = d.tools()
    out = []
    w = out.append
    names = "larder vs restic vs rustic vs borg" if "rustic" in tools else "larder vs restic vs borg"
    w(f"# Benchmark: {names} ({m.get('date', '?')})")
    w("")
    if m.get("small") == "1":
        w("> **Small development run** (`BENCH_SMALL=1`): a reduced corpus; these figures")
        w("> exercise the script and are not the published comparison.")
        w("")
    w(f"- **Machine:** {m.get('nproc', '?')} cores, {m.get('cpu_model', '?')}, "
      f"{m.get('mem_total', '?')} memory, Linux {m.get('kernel', '?')}; "
      f"disk: {m.get('disk_fs', '?')}, tmpfs at `/dev/shm`.")
    rustic_v = f"{m['version_rustic']}; " if "version_rustic" in m else ""
    w(f"- **Versions:** {m.get('version_larder', '?')}; {m.get('version_restic', '?')}; {rustic_v}"
      f"{m.get('version_borg', '?')}; {m.get('version_rustc', '?')}.")
    corpus_b = int(m.get("corpus_bytes", "0") or 0)
    w(f"- **Data:** {m.get('corpus_files', '?')} files, {corpus_b / GIB:.3f} GiB "
      f"({fmt_mib(corpus_b)}) in the tree: {m.get('corpus_sources', '?')}; plus a "
      f"{int(m.get('random_bytes', '0') or 0) / MIB:.0f} MiB seeded random file "
      f"({m.get('random_generator', '?')}). Edits chosen with seed {m.get('seed', '?')}.")
    w(f"- **Settings:** all repositories with a passphrase. larder: {m.get('larder_settings', '?')}. "
      f"restic: {m.get('restic_settings', '?')}. "
      + (f"rustic: {m['rustic_settings']}. " if "rustic_settings" in m else "")
      + f"borg: {m.get('borg_settings', '?')}.")
    w(f"- **Method:** {m.get('runs', '?')} runs; each run gives every tool the same sequence "
      "(cold backup into a fresh repository, unchanged second backup, `snapshots`, the file edits "
      "and a third backup, diff of snapshots 2 and 3, restore of snapshot 1 onto tmpfs and onto disk, "
      "then the random file in another fresh repository), tools in rotating order, after a warm-up "
      "that reads the tree into the page cache and runs each tool once; the tree is read into the page "
      "cache again before every cold backup (this machine's DAMON reclaim drops page cache left idle "
      "for a few minutes). Wall time from the shell "
      "around the command, peak RSS from GNU time (`%M`). Figures are medians with the 5th–95th "
      "percentiles in brackets (linear interpolation over the runs). \"Work\" speed-ups subtract each "
      "tool's own median `snapshots` time (its open cost, KDF included) from both times."
      + (f" Within each run the read-only rows (`snapshots`, the diff, the restore onto tmpfs) are "
         f"timed {m['repeat']} times and the run's figure is their median." if m.get("repeat") else "")
      + (f" So are the cold backup (each time into a fresh repository), its reference "
         f"`tar | zstd` and the stages alone, timed {m['cold_repeat']} times per run."
         if int(m.get("cold_repeat", "1")) > 1 else "")
      + (" Each run also times the reference pipelines (below), restores one small file from snapshot 1 "
         "and runs `check --read-data` after the cold backup. A target of issue 15 is **met** only if it "
         "is met in every run: its verdict uses the per-run figures (each run's own medians, its own open "
         "cost, the largest RSS of the run), all of which are listed." if d.issue15() else "")
      + (" larder's restore onto disk is timed back to back with a `cp -a` of the tree to the same "
         "filesystem (then `sync`; in turn first, by run), and its target is judged against that copy: "
         "this disk's speed drifts over minutes." if d.has("cp_disk_pair", "cp") else "")
      + (" Before every restore onto disk (each tool's) and before the reference `cp -a` onto disk, an "
         "untimed `cp -a` of the tree (then `sync`) spends the fast burst this disk writes after a rest, "
         "so that each is timed at the disk's sustained speed."
         if m.get("disk_primed") == "1" and d.has("restore_disk", "larder") else "")
      + (" Each of larder's cold backups is timed beside a `tar | zstd` and a run of the stages alone "
         "(before it or after it in turn), and its two cold-backup limits are judged against those samples."
         if d.has("ref_tar_zstd_pair", "ref") else "")
      + (" Its restore onto tmpfs is timed beside a `zstd -dc ARCHIVE | tar -x` onto tmpfs each time "
         "(the pipeline first or second in turn), and its target is judged against those samples."
         if d.has("ref_untar_shm_pair", "ref") else ""))
    w("")

    # Main table (absent from an S3-only run).
    has_main = any(d.has(n, t) for n, _, _ in ROWS for t in tools)
    head = "| work | " + " | ".join(tools) + " |"
    if "larder" in tools:
        others = [t for t in tools if t != "larder"]
        head += "".join(f" larder vs {t}: end to end / work |" for t in others)
    else:
        others = []
    if has_main:
        w("## Results")
        w("")
        w(head)
        w("|" + "---|" * (1 + len(tools) + len(others)))
    rb = int(m.get("random_bytes", "0") or 0)
    rand_label = f"{rb / GIB:g} GiB" if rb >= GIB else f"{rb / MIB:g} MiB"
    for name, label, kind in ROWS:
        if not any(d.has(name, t) for t in tools):
            continue
        cells = [cell(d, name, t, kind) for t in tools]
        for o in others:
            if name in ("snapshots", "restore_one"):
                # Dominated by the open: "work" would divide noise.
                e2e, _ = speedup(d, name, o)
                cells.append(f"{fmt_x(e2e)}")
            else:
                e2e, work = speedup(d, name, o)
                cells.append(f"{fmt_x(e2e)} / {fmt_x(work)}")
        label = label.replace("{rand}", rand_label).replace("{prune}", m.get("prune_snapshots", "30"))
        label = label.replace("{one}", m.get("one_file", "?"))
        w(f"| {label} | " + " | ".join(cells) + " |")
    # Sizes.
    if any(repo_ratio(d, t) is not None for t in tools):
        cells = []
        for t in tools:
            r = repo_ratio(d, t)
            cells.append("—" if r is None else f"{r * 100:.1f} % ({fmt_mib(med(d.nbytes('repo_size', t)))})")
        for o in others:
            a, b = repo_ratio(d, "larder"), repo_ratio(d, o)
            cells.append("n/a" if not a or not b else f"size ratio {a / b:.2f}")
        w("| repository size / source size (after the cold backup) | " + " | ".join(cells) + " |")
    if any(rand_added(d, t) is not None for t in tools):
        cells = []
        for t in tools:
            r = d.nbytes("rand_added", t)
            cells.append("—" if not r else f"{fmt_mib(med(r))} [{fmt_mib(pct(r, 5))}–{fmt_mib(pct(r, 95))}]")
        for o in others:
            a, b = rand_added(d, "larder"), rand_added(d, o)
            cells.append("n/a" if a is None or not b else f"size ratio {a / b:.2f}")
        w(f"| {rand_label} random file, 100 scattered 1 KiB edits: bytes added | " + " | ".join(cells) + " |")
    if any(d.has("prune_size_after", t) for t in tools):
        cells = []
        for t in tools:
            b, a = d.nbytes("prune_size_before", t), d.nbytes("prune_size_after", t)
            cells.append("—" if not a or not b else f"{fmt_mib(med(b))} → {fmt_mib(med(a))}")
        for o in others:
            a, b = d.nbytes("prune_size_after", "larder"), d.nbytes("prune_size_after", o)
            cells.append("n/a" if not a or not b else f"size ratio {med(a) / med(b):.2f}")
        w("| repository size before → after the prune | " + " | ".join(cells) + " |")
    w("")
    cp = d.walls("cp_disk", "cp")
    if cp:
        line = (f"Floor for the restore onto disk: `cp -a` of the same tree to the same filesystem "
                f"(then `sync`) takes {fmt_s(med(cp))} [{fmt_s(pct(cp, 5))}–{fmt_s(pct(cp, 95))}]")
        if corpus_b:
            line += f", {fmt_rate(corpus_b / MIB / med(cp))}"
        w(line + ".")
        w("")
    render_refs(d, w)
    render_pairs(d, w)

    # Stages.
    stages = ["read", "chunk", "hash", "compress", "encrypt"]
    if all(d.has("stage_" + s, "stages") for s in stages):
        w("## The machine's limit: each stage alone, one core, same data")
        w("")
        w("| stage | MiB/s on one core | s per GiB |")
        w("|---|---|---|")
        total = 0.0
        extra = ["walk"] if d.has("stage_walk", "stages") else []
        for s in extra + stages:
            walls = d.walls("stage_" + s, "stages")
            b = med(d.nbytes("stage_" + s, "stages"))
            per_gib = med(walls) / b * GIB
            if s != "walk":
                total += per_gib
            note = " (not in the sum)" if s == "walk" else ""
            w(f"| {s}{note} | {fmt_rate(b / MIB / med(walls))} | {per_gib:.3f} |")
        cores = int(m.get("nproc", "2") or 2)
        limit = cores * GIB / total / MIB if total else 0
        cat = d.walls("read_cat", "stages")
        if cat:
            b = med(d.nbytes("read_cat", "stages"))
            w(f"| read with `cat` of every file (not in the sum) | {fmt_rate(b / MIB / med(cat))} | {med(cat) / b * GIB:.3f} |")
        w(f"| **sum (read..encrypt)** | {fmt_rate(GIB / total / MIB) if total else 'n/a'} | {total:.3f} |")
        w("")
        if d.has("stage_train", "stages"):
            w(f"The compress stage uses a dictionary trained as a fresh repository's first backup trains one; "
              f"training it took {med(d.walls('stage_train', 'stages')):.3f} s (once per repository, not in the sum).")
            w("")
        cold = d.walls("cold_backup", "larder")
        if cold and corpus_b and limit:
            rate = corpus_b / MIB / med(cold)
            work = med(cold) - open_cost(d, "larder")
            line = (f"On {cores} cores the stages allow {fmt_rate(limit)} (sum of per-byte costs / {cores}); "
                    f"larder's cold backup runs at {fmt_rate(rate)} end to end: **{rate / limit * 100:.0f} %** "
                    "of that limit")
            if work > 0:
                wr = corpus_b / MIB / work
                line += f"; without its open cost (KDF), {fmt_rate(wr)}: **{wr / limit * 100:.0f} %**"
            w(line + ".")
            w("")

    # Flatness.
    if d.has("flat_open", "larder"):
        w("## Flat as the repository grows: fresh vs synthetic index")
        w("")
        w(f"The same tree backed up (cold) and restored (onto tmpfs) by larder with a fresh repository and "
          f"with one whose index holds {m.get('synth_blobs', '?')} more synthetic blobs "
          f"({m.get('synth_desc', 'written through the library')}). Open = second "
          f"`{m.get('flat_open_cmd', 'snapshots')}` (the first absorbs the new index segments).")
        w("")
        w("| | fresh | big index | ratio |")
        w("|---|---|---|---|")
        for name, label in [("flat_backup", "cold backup peak RSS"), ("flat_restore", "restore peak RSS"),
                            ("flat_prune", "prune (`--dry-run`: marks every blob) peak RSS")]:
            fr = [int(r["rss_kib"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "fresh"]
            bg = [int(r["rss_kib"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "big"]
            if fr and bg:
                w(f"| {label} | {med(fr) / 1024:.0f} MiB | {med(bg) / 1024:.0f} MiB | {med(bg) / med(fr):.2f} |")
        for name, label in [("flat_backup", "cold backup time"), ("flat_restore", "restore time"),
                            ("flat_prune", "prune (`--dry-run`) time"),
                            ("flat_open", f"open (`{m.get('flat_open_cmd', 'snapshots')}`)"),
                            ("flat_snapshots", "`snapshots`")]:
            fr = [float(r["wall_s"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "fresh"]
            bg = [float(r["wall_s"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "big"]
            if fr and bg:
                w(f"| {label} | {fmt_s(med(fr))} | {fmt_s(med(bg))} | {med(bg) / med(fr):.2f} |")
        ab = d.walls("flat_absorb", "larder")
        if ab:
            w(f"| first open after the segments were added (absorbs them) | — | {fmt_s(med(ab))} | |")
        w("")
        render_flat15(d, w)
    render_snaps(d, w)
    render_comp(d, w)

    # Targets.
    # Issue 5's targets need the main rows (a prune-only run has none).
    if "larder" in tools and "restic" in tools and d.has("cold_backup", "larder"):
        w("## Targets of issue 5")
        w("")
        w("| target | measured | verdict |")
        w("|---|---|---|")
        e2e, work = speedup(d, "cold_backup", "restic")
        ra, rr = repo_ratio(d, "larder"), repo_ratio(d, "restic")
        ok = None if work is None else work >= 2.5 and (ra is not None and rr is not None and ra <= rr)
        rs = "n/a" if ra is None or rr is None else f"{ra * 100:.1f} % vs {rr * 100:.1f} %"
        w(f"| cold backup ≥ 2.5× restic, repository no larger | work {fmt_x(work)}, end to end {fmt_x(e2e)}; size {rs} | {verdict(ok)} |")
        for name, label in [("second_backup", "unchanged second backup"), ("incr_backup", "incremental backup"),
                            ("diff", "diff")]:
            e2e, work = speedup(d, name, "restic")
            ok = None if work is None or e2e is None else work >= 5 and e2e >= 2
            w(f"| {label}: work ≥ 5×, end to end ≥ 2× restic | work {fmt_x(work)}, end to end {fmt_x(e2e)} | {verdict(ok)} |")
        e2e, work = speedup(d, "restore_shm", "restic")
        ok = None if work is None else work >= 3
        w(f"| restore onto tmpfs ≥ 3× restic | work {fmt_x(work)}, end to end {fmt_x(e2e)} | {verdict(ok)} |")
        rd = d.walls("restore_disk", "larder")
        cpp = d.walls("cp_disk_pair", "cp")
        floor, beside = (cpp, " back to back") if cpp else (cp, "")
        if rd and floor:
            r = med(rd) / med(floor)
            rw = (med(rd) - open_cost(d, "larder")) / med(floor)
            w(f"| restore onto disk within 1.5× of `cp -a` | end to end {r:.2f}× `cp -a`{beside} "
              f"(work {rw:.2f}×) | {verdict(r <= 1.5)} |")
        a, b = rand_added(d, "larder"), rand_added(d, "restic")
        if a is not None and b:
            w(f"| edited random file adds ≤ 1/3 of restic | {fmt_mib(a)} vs {fmt_mib(b)} ({a / b:.2f}) | {verdict(a <= b / 3)} |")
        worst = None
        for name, _, _ in ROWS:
            la, re_ = d.rss(name, "larder"), d.rss(name, "restic")
            if la and re_:
                r = med(la) / med(re_)
                if worst is None or r > worst[0]:
                    worst = (r, name)
        if worst:
            w(f"| peak RSS ≤ ½ restic's in every row | worst: {worst[1]} at {worst[0]:.2f}× restic | {verdict(worst[0] <= 0.5)} |")
        fl = []
        for name in ["flat_backup", "flat_restore"]:
            fr = [int(r["rss_kib"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "fresh"]
            bg = [int(r["rss_kib"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "big"]
            if fr and bg:
                fl.append(med(bg) / med(fr))
        fo = [float(r["wall_s"]) for r in d.samples.get(("flat_open", "larder"), []) if r["value"] == "fresh"]
        bo = [float(r["wall_s"]) for r in d.samples.get(("flat_open", "larder"), []) if r["value"] == "big"]
        if fl and fo and bo:
            beyond = med(bo) - med(fo)
            ok = max(fl) <= 1.2 and beyond < 1.0
            w(f"| with {m.get('synth_blobs', '?')} blobs: RSS ≤ 1.2× fresh, open < 1 s beyond the KDF | "
              f"RSS {max(fl):.2f}×, open {fmt_s(med(bo))} ({fmt_s(beyond)} beyond a fresh open) | {verdict(ok)} |")
        if all(d.has("stage_" + s, "stages") for s in stages) and d.walls("cold_backup", "larder") and corpus_b:
            total = sum(med(d.walls("stage_" + s, "stages")) / med(d.nbytes("stage_" + s, "stages"))
                        for s in stages)
            cores = int(m.get("nproc", "2") or 2)
            t_cold = med(d.walls("cold_backup", "larder"))
            share = corpus_b / t_cold / (cores / total)
            t_work = t_cold - open_cost(d, "larder")
            share_w = corpus_b / t_work / (cores / total) if t_work > 0 else None
            sw = "n/a" if share_w is None else f"{share_w * 100:.1f} %"
            w(f"| cold backup ≥ 75 % of the machine's limit | work {sw}, end to end {share * 100:.1f} % | "
              f"{verdict(None if share_w is None else share_w >= 0.75)} |")
        w("")
    if "larder" in tools and "restic" in tools and d.has("prune", "larder"):
        w("## Targets of issue 11 (prune)")
        w("")
        w("| target | measured | verdict |")
        w("|---|---|---|")
        e2e, work = speedup(d, "prune", "restic")
        ok = None if e2e is None else e2e >= 2
        w(f"| forget + prune ≥ 2× restic's speed | end to end {fmt_x(e2e)}, work {fmt_x(work)} | {verdict(ok)} |")
        la, re_ = d.rss("prune", "larder"), d.rss("prune", "restic")
        if la and re_:
            r = med(la) / med(re_)
            w(f"| prune peak RSS ≤ ½ restic's | {med(la) / 1024:.0f} MiB vs {med(re_) / 1024:.0f} MiB ({r:.2f}×) | {verdict(r <= 0.5)} |")
        for o in [t for t in tools if t != "larder"]:
            a, b = d.nbytes("prune_size_after", "larder"), d.nbytes("prune_size_after", o)
            if a and b:
                w(f"| repository after prune no larger than {o}'s | {fmt_mib(med(a))} vs {fmt_mib(med(b))} | {verdict(med(a) <= med(b))} |")
        fr = [int(r["rss_kib"]) for r in d.samples.get(("flat_prune", "larder"), []) if r["value"] == "fresh"]
        bg = [int(r["rss_kib"]) for r in d.samples.get(("flat_prune", "larder"), []) if r["value"] == "big"]
        if fr and bg:
            r = med(bg) / med(fr)
            w(f"| prune with {m.get('synth_blobs', '?')} blobs: RSS ≤ 1.2× the small repository's | {r:.2f}× | {verdict(r <= 1.2)} |")
        w("")
    render_targets15(d, w)
    render_s3(d, w)
    w(f"Raw samples: `raw.csv` (SHA-256 in `raw.sha256`); this table is generated from them by "
      "`scripts/bench_table.py` and checked by `tests/it/bench_table.rs`.")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    text = render(Data(argv[1]))
    if len(argv) > 2:
        with open(argv[2], "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
