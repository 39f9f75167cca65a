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
import sys

TOOLS = ["larder", "restic", "borg"]
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
]


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
    w(f"# Benchmark: larder vs restic vs borg ({m.get('date', '?')})")
    w("")
    if m.get("small") == "1":
        w("> **Small development run** (`BENCH_SMALL=1`): a reduced corpus; these figures")
        w("> exercise the script and are not the published comparison.")
        w("")
    w(f"- **Machine:** {m.get('nproc', '?')} cores, {m.get('cpu_model', '?')}, "
      f"{m.get('mem_total', '?')} memory, Linux {m.get('kernel', '?')}; "
      f"disk: {m.get('disk_fs', '?')}, tmpfs at `/dev/shm`.")
    w(f"- **Versions:** {m.get('version_larder', '?')}; {m.get('version_restic', '?')}; "
      f"{m.get('version_borg', '?')}; {m.get('version_rustc', '?')}.")
    corpus_b = int(m.get("corpus_bytes", "0") or 0)
    w(f"- **Data:** {m.get('corpus_files', '?')} files, {corpus_b / GIB:.3f} GiB "
      f"({fmt_mib(corpus_b)}) in the tree: {m.get('corpus_sources', '?')}; plus a "
      f"{int(m.get('random_bytes', '0') or 0) / MIB:.0f} MiB seeded random file "
      f"({m.get('random_generator', '?')}). Edits chosen with seed {m.get('seed', '?')}.")
    w(f"- **Settings:** all repositories with a passphrase. larder: {m.get('larder_settings', '?')}. "
      f"restic: {m.get('restic_settings', '?')}. borg: {m.get('borg_settings', '?')}.")
    w(f"- **Method:** {m.get('runs', '?')} runs; each run gives every tool the same sequence "
      "(cold backup into a fresh repository, unchanged second backup, `snapshots`, the file edits "
      "and a third backup, diff of snapshots 2 and 3, restore of snapshot 1 onto tmpfs and onto disk, "
      "then the random file in another fresh repository), tools in rotating order, after a warm-up "
      "that reads the tree into the page cache and runs each tool once; the tree is read into the page "
      "cache again before every cold backup (this machine's DAMON reclaim drops page cache left idle "
      "for a few minutes). Wall time from the shell "
      "around the command, peak RSS from GNU time (`%M`). Figures are medians with the 5th–95th "
      "percentiles in brackets (linear interpolation over the runs). \"Work\" speed-ups subtract each "
      "tool's own median `snapshots` time (its open cost, KDF included) from both times.")
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
            if name == "snapshots":
                e2e, _ = speedup(d, name, o)
                cells.append(f"{fmt_x(e2e)}")
            else:
                e2e, work = speedup(d, name, o)
                cells.append(f"{fmt_x(e2e)} / {fmt_x(work)}")
        label = label.replace("{rand}", rand_label).replace("{prune}", m.get("prune_snapshots", "30"))
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
          f"({m.get('synth_desc', 'written through the library')}). Open = second `snapshots` "
          "(the first absorbs the new index segments).")
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
                            ("flat_prune", "prune (`--dry-run`) time"), ("flat_open", "open (`snapshots`)")]:
            fr = [float(r["wall_s"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "fresh"]
            bg = [float(r["wall_s"]) for r in d.samples.get((name, "larder"), []) if r["value"] == "big"]
            if fr and bg:
                w(f"| {label} | {fmt_s(med(fr))} | {fmt_s(med(bg))} | {med(bg) / med(fr):.2f} |")
        ab = d.walls("flat_absorb", "larder")
        if ab:
            w(f"| first open after the segments were added (absorbs them) | — | {fmt_s(med(ab))} | |")
        w("")

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
        if rd and cp:
            r = med(rd) / med(cp)
            rw = (med(rd) - open_cost(d, "larder")) / med(cp)
            w(f"| restore onto disk within 1.5× of `cp -a` | end to end {r:.2f}× `cp -a` (work {rw:.2f}×) | {verdict(r <= 1.5)} |")
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
            sw = "n/a" if share_w is None else f"{share_w * 100:.0f} %"
            w(f"| cold backup ≥ 75 % of the machine's limit | work {sw}, end to end {share * 100:.0f} % | "
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
