#!/usr/bin/env bash
# What survives a backup and restore: larder vs restic, default options.
#
#   scripts/fidelity.sh              mode A: build an exotic tree, back it up and
#                                    restore it with larder and with restic, and
#                                    compare each restore with the source, one
#                                    row per category; writes
#                                      bench/fidelity/table.md      the table
#                                      bench/fidelity/*.diff        raw diffs
#                                      bench/fidelity/details-*.txt every mismatch
#                                      bench/fidelity/*.log         tool output
#   scripts/fidelity.sh --real DIR   mode B: larder alone on a real tree (run it
#                                    niced); compares bsdtar mtree (sha256),
#                                    getfattr, getfacl and hard link groups;
#                                    writes bench/fidelity/real-<basename>.txt
#
# Installs restic, libarchive-tools (bsdtar), attr, acl and time from Debian's
# packages if any is missing (skip with FIDELITY_SKIP_INSTALL=1); builds larder
# (release) only if target/release/larder is missing. Run as root for the
# device, foreign-owner and trusted.*/security.* rows. Work area:
# FIDELITY_DIR (default a fresh /var/tmp/larder-fidelity.XXXXXX), removed at
# exit unless FIDELITY_KEEP=1.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/fidelity
MODE=A
REAL=
case "${1:-}" in
    --real) MODE=B; REAL=${2:?usage: scripts/fidelity.sh --real DIR} ;;
    "") ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "usage: scripts/fidelity.sh [--real DIR]" >&2; exit 2 ;;
esac
say() { printf '== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- install
need=()
command -v restic   >/dev/null || need+=(restic)
command -v bsdtar   >/dev/null || need+=(libarchive-tools)
command -v getfattr >/dev/null || need+=(attr)
command -v getfacl  >/dev/null || need+=(acl)
[ -x /usr/bin/time ]           || need+=(time)
command -v python3  >/dev/null || need+=(python3)
if [ "${#need[@]}" -gt 0 ] && [ "${FIDELITY_SKIP_INSTALL:-0}" != 1 ]; then
    say "installing ${need[*]} from Debian's packages"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
for c in bsdtar getfattr setfattr getfacl setfacl python3 /usr/bin/time; do
    command -v "$c" >/dev/null || { echo "fidelity.sh: $c is missing" >&2; exit 1; }
done
[ "$MODE" = B ] || command -v restic >/dev/null || { echo "fidelity.sh: restic is missing" >&2; exit 1; }
LARDER=$ROOT/target/release/larder
if [ ! -x "$LARDER" ]; then
    say "building larder (release)"
    nice -n 10 cargo build --release --quiet --bin larder
fi

# ---------------------------------------------------------------- work area
mkdir -p "$OUT"
W=${FIDELITY_DIR:-$(mktemp -d /var/tmp/larder-fidelity.XXXXXX)}
mkdir -p "$W"
cleanup() { [ "${FIDELITY_KEEP:-0}" = 1 ] || rm -rf "$W"; }
trap cleanup EXIT
PASS="larder fidelity passphrase"
IS_ROOT=0; [ "$(id -u)" = 0 ] && IS_ROOT=1

# The comparison helper (bytes paths throughout: names need not be UTF-8).
PY=$W/fid.py
cat > "$PY" <<'PYEOF'
import os, sys, json, pickle, stat, subprocess, collections

MT = ["bsdtar", "-cf", "-", "--format=mtree",
      "--options=mtree:sha256,mtree:nlink,mtree:device,mtree:!flags", "."]
GETFATTR = ["getfattr", "-R", "-d", "-m", "-", "-h", "--absolute-names", "-e", "hex", "."]
GETFACL = ["getfacl", "-R", "-p", "-P", "."]
SLACK = 2 << 20   # allocation slack allowed for a sparse restore

def b(s): return os.fsencode(s)
def show(rel):
    r = repr(os.fsdecode(rel) if isinstance(rel, bytes) else rel)[1:-1]
    return r if len(r) <= 60 else r[:28] + "…" + r[-28:]

def walk_list(root):
    root = b(root).rstrip(b"/")
    out = []
    for d, dirs, files in os.walk(root, followlinks=False):
        for n in dirs + files:
            out.append(b"." + os.path.join(d, n)[len(root):])
    return sorted(out)

def reset_atimes(root, lst):
    """Past, distinct atimes (mtime kept): under relatime any read moves them."""
    root = b(root).rstrip(b"/")
    for i, rel in enumerate(lst):
        p = root + rel[1:]
        st = os.lstat(p)
        a = (1_000_000_000 + i * 3600) * 10**9 + (i * 7919 + 13) % 10**9
        os.utime(p, ns=(a, st.st_mtime_ns), follow_symlinks=False)

F = ("mode", "uid", "gid", "nlink", "dev", "ino", "size", "blocks",
     "atime_ns", "mtime_ns", "ctime_ns", "rdev")
def stat_snap(root, lst):
    """lstat only: no directory is listed and no file opened (atimes stay)."""
    root = b(root).rstrip(b"/")
    out = {}
    for rel in lst:
        try:
            st = os.lstat(root + rel[1:])
            out[rel] = {k: getattr(st, "st_" + k) for k in F}
        except OSError:
            out[rel] = None
    return out

def dumps(root, prefix):
    r = subprocess.run(MT, cwd=root, capture_output=True)
    lines = sorted(l for l in r.stdout.split(b"\n")
                   if l and not l.startswith(b"#") and not l.startswith(b". "))
    open(prefix + ".mtree", "wb").write(b"\n".join(lines) + b"\n")
    open(prefix + ".mtree.err", "wb").write(r.stderr)
    for cmd, ext in ((GETFATTR, ".xattr"), (GETFACL, ".acl")):
        r = subprocess.run(cmd, cwd=root, capture_output=True)
        blocks = parse_blocks_bytes(r.stdout)
        with open(prefix + ext, "w", errors="surrogateescape") as f:
            for k in sorted(blocks):
                f.write(k + "\n" + "".join(l + "\n" for l in blocks[k]) + "\n")

def parse_blocks_bytes(data):
    out = {}
    for block in data.decode(errors="surrogateescape").split("\n\n"):
        lines = [l for l in block.split("\n") if l]
        if not lines or not lines[0].startswith("# file: "):
            continue
        head = lines[0]
        if head == "# file: .":
            continue   # the root is the target itself
        out[head] = sorted(lines[1:])
    return out

def load_blocks(path):
    return parse_blocks_bytes(open(path, "rb").read().replace(b"\n\n", b"\n\n"))

def parse_mtree(path):
    out = {}
    for l in open(path, encoding="ascii", errors="replace"):
        l = l.rstrip("\n")
        if not l:
            continue
        p, *kws = l.split(" ")
        out[p] = dict(kw.split("=", 1) for kw in kws if "=" in kw)
    return out

TYPES = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink",
         stat.S_IFIFO: "fifo", stat.S_IFCHR: "char device",
         stat.S_IFBLK: "block device", stat.S_IFSOCK: "socket"}
def tname(st): return TYPES.get(stat.S_IFMT(st["mode"]), "?") if st else "missing"
MT_FILELIKE = {"file", "fifo", "char", "block"}

def groups(snap):
    by = collections.defaultdict(set)
    for rel, st in snap.items():
        if st and stat.S_ISREG(st["mode"]) and st["nlink"] > 1:
            by[(st["dev"], st["ino"])].add(rel)
    return {frozenset(g) for g in by.values()}

class Rows:
    def __init__(self): self.rows, self.details = [], []
    def add(self, key, label, n, bad, note="", examples=()):
        if n == 0:
            status = "n/a"
        elif not bad:
            status = "✓"
        elif bad >= n:
            status = "✗"
        else:
            status = "partial"
        self.rows.append(dict(key=key, label=label, n=n, bad=bad, status=status, note=note))
        self.details.append(f"## {label}: {status} ({n - bad}/{n} ok){' — ' + note if note else ''}")
        self.details.extend("  " + e for e in examples)

def fmt_t(t):
    return t

def compare_a(a):
    """Source (initial dumps, stat before backup) against one restore."""
    src_root, dst_root = b(a["src_root"]).rstrip(b"/"), b(a["dst_root"]).rstrip(b"/")
    S, D = parse_mtree(a["src0"] + ".mtree"), parse_mtree(a["dst"] + ".mtree")
    ss = pickle.load(open(a["src_stat"], "rb"))
    ds = pickle.load(open(a["dst_stat"], "rb"))
    R = Rows()
    nosock = [p for p in S if S[p].get("type") != "socket"]

    # names
    missing = sorted(set(nosock) - set(D))
    extra = sorted(set(D) - set(S))
    R.add("names", "names (non-UTF-8, newline, backslash, leading dash, 255 bytes, …)",
          len(nosock), len(missing),
          (f"{len(missing)} missing: " + ", ".join(missing[:3]) if missing else "")
          + (f"; {len(extra)} unexpected: " + ", ".join(extra[:3]) if extra else ""),
          [f"missing {p}" for p in missing] + [f"extra {p}" for p in extra])

    # content
    files = [p for p in S if S[p].get("type") == "file"]
    bad = [p for p in files if p not in D or D[p].get("sha256digest") != S[p].get("sha256digest")
           or D[p].get("size") != S[p].get("size")]
    R.add("content", "file content (sha256, size)", len(files), len(bad),
          ", ".join(bad[:3]), [f"{p}: {S[p].get('size')} {S[p].get('sha256digest','')[:12]} -> "
                               f"{D.get(p, {}).get('size')} {D.get(p, {}).get('sha256digest','')[:12]}" for p in bad])

    # types (lstat), symlink targets, device numbers
    per = collections.Counter(); perbad = collections.defaultdict(list); ex = []
    for rel, st in ss.items():
        if st is None:
            continue
        t = tname(st); per[t] += 1
        d = ds.get(rel); why = None
        if d is None:
            why = "not restored"
        elif tname(d) != t:
            why = f"restored as {tname(d)}"
        elif t == "symlink" and os.readlink(src_root + rel[1:]) != os.readlink(dst_root + rel[1:]):
            why = "target differs"
        elif t in ("char device", "block device") and st["rdev"] != d["rdev"]:
            why = "device number differs"
        if why:
            perbad[t].append(rel); ex.append(f"{show(rel)} ({t}): {why}")
    notes = []
    for t in sorted(per):
        k = len(perbad[t])
        if k:
            notes.append(f"{t}: {k}/{per[t]} lost" if k else "")
    okt = [t for t in sorted(per) if not perbad[t]]
    n = sum(per.values()); k = sum(len(v) for v in perbad.values())
    R.add("types", "types (file, dir, symlink + target, fifo, char/block device, socket)", n, k,
          "; ".join(ex[:3]) + (f" (all {', '.join(okt)} ok)" if ex else ""), ex)

    # modes
    ent = [p for p in nosock if S[p].get("type") != "link"]
    bad = [p for p in ent if D.get(p, {}).get("mode") != S[p].get("mode")]
    special = [p for p in ent if int(S[p].get("mode", "0"), 8) & 0o7000]
    sbad = [p for p in special if p in bad]
    R.add("modes", "modes incl. setuid/setgid/sticky", len(ent), len(bad),
          (f"special bits {len(special) - len(sbad)}/{len(special)} ok" if sbad else "")
          + ("; " if sbad and bad else "") + ", ".join(f"{p} {S[p].get('mode')}->{D.get(p, {}).get('mode')}" for p in bad[:3]),
          [f"{p}: {S[p].get('mode')} -> {D.get(p, {}).get('mode')}" for p in bad])

    # owners
    def own(e): return (e.get("uid"), e.get("gid"), e.get("uname"), e.get("gname"))
    bad = [p for p in nosock if own(D.get(p, {})) != own(S[p])]
    foreign = [p for p in nosock if S[p].get("uid") != "0" or S[p].get("gid") != "0"]
    R.add("owner", "uid/gid (numeric 1234:5678, nobody, symlink owner)", len(nosock), len(bad),
          (f"foreign-owned {len([p for p in foreign if p not in bad])}/{len(foreign)} ok; " if bad else "")
          + ", ".join(f"{p} {S[p].get('uid')}:{S[p].get('gid')}->{D.get(p, {}).get('uid')}:{D.get(p, {}).get('gid')}" for p in bad[:3]),
          [f"{p}: {own(S[p])} -> {own(D.get(p, {}))}" for p in bad])

    # mtimes
    for key, label, kinds in (("mtime_file", "mtime ns: files, fifos, devices", MT_FILELIKE),
                              ("mtime_dir", "mtime ns: directories", {"dir"}),
                              ("mtime_link", "mtime ns: symlinks", {"link"})):
        ent = [p for p in nosock if S[p].get("type") in kinds]
        bad = [p for p in ent if D.get(p, {}).get("time") != S[p].get("time")]
        sec_ok = [p for p in bad if p in D and D[p].get("time", "").split(".")[0] == S[p].get("time", "").split(".")[0]]
        note = ""
        if bad:
            note = (f"{len(sec_ok)} of {len(bad)} wrong only below the second; " if sec_ok else "") + \
                   ", ".join(f"{p} {S[p].get('time')}->{D.get(p, {}).get('time')}" for p in bad[:2])
        R.add(key, label, len(ent), len(bad), note,
              [f"{p}: {S[p].get('time')} -> {D.get(p, {}).get('time')}" for p in bad])

    # hard links
    gs, gd = groups(ss), groups(ds)
    bad = [g for g in gs if g not in gd]
    ex = []
    for g in bad:
        inos = {ds[r]["ino"] for r in g if ds.get(r)}
        ex.append(f"group {{{', '.join(show(r) for r in sorted(g))}}} restored as {len(inos)} inode(s)")
    R.add("hardlinks", "hard link groups (across directories)", len(gs), len(bad),
          "; ".join(ex[:2]), ex)

    # xattrs by namespace, ACLs
    XS, XD = load_blocks(a["src0"] + ".xattr"), load_blocks(a["dst"] + ".xattr")
    def attrs(blocks, ns):
        out = {}
        for h, lines in blocks.items():
            if "socket" in h and h.endswith("/socket"):
                continue
            for l in lines:
                name, _, val = l.partition("=")
                if name.startswith(ns):
                    out[(h[8:], name)] = val
        return out
    for ns in ("user.", "trusted.", "security."):
        sa, da = attrs(XS, ns), attrs(XD, ns)
        keys = sorted(set(sa) | set(da))
        bad = [k for k in keys if sa.get(k) != da.get(k)]
        ex = [f"{p} {n}: {'missing' if k not in da else ('unexpected' if k not in sa else 'value differs')}"
              for k in bad for (p, n) in [k]]
        R.add("xattr_" + ns[:-1], f"xattrs {ns}*", len(keys), len(bad), "; ".join(ex[:2]), ex)
    AS, AD = load_blocks(a["src0"] + ".acl"), load_blocks(a["dst"] + ".acl")
    def acl(blocks, default):
        out = {}
        for h, lines in blocks.items():
            ent = [l for l in lines if not l.startswith("#") and l.startswith("default:") == default]
            base = ("user::", "group::", "other::")
            extended = bool(ent) if default else any(not l.startswith(base) for l in ent)
            if extended:
                out[h[8:]] = ent
        return out
    for default, key, label in ((False, "acl_access", "POSIX ACLs: access"), (True, "acl_default", "POSIX ACLs: default (directories)")):
        sa, da = acl(AS, default), acl(AD, default)
        keys = sorted(set(sa) | set(da))
        bad = [k for k in keys if sa.get(k) != da.get(k)]
        ex = [f"{k}: {sa.get(k)} -> {da.get(k)}" for k in bad]
        R.add(key, label, len(keys), len(bad), "; ".join(f"{k}: lost" if k not in da else f"{k}: differs" for k in bad[:2]), ex)

    # sparse
    ex = []; bad = 0; n = 0
    for rel in (b"./content/sparse", b"./content/over-4GiB", b"./content/hole-start"):
        s, d = ss.get(rel), ds.get(rel)
        if not s:
            continue
        n += 1
        sa = s["blocks"] * 512
        da = d["blocks"] * 512 if d else None
        okk = d is not None and d["size"] == s["size"] and da <= sa + SLACK
        bad += not okk
        ex.append(f"{show(rel)[10:]} {sa / 2**20:.1f}→" + (f"{da / 2**20:.1f}" if d else "missing"))
    z = ss.get(b"./content/zeros"), ds.get(b"./content/zeros")
    info = ""
    if z[0] and z[1]:
        info = f"; written all-zeros file {z[0]['blocks'] / 2048:.1f}→{z[1]['blocks'] / 2048:.1f}"
    R.add("sparse", "sparse files (allocated blocks)", n, bad,
          "MiB allocated, source→restore: " + ", ".join(ex) + info, ex + [info])

    # deep
    ent = [p for p in nosock if p.startswith("./deep/")]
    bad = [p for p in ent if p not in D or D[p].get("type") != S[p].get("type")
           or D[p].get("sha256digest") != S[p].get("sha256digest")]
    depth = max((p.count("/level-") for p in ent), default=0)
    R.add("deep", f"deep paths ({depth} levels, {max((len(p) for p in ent), default=0)} bytes)",
          len(ent), len(bad), ", ".join(bad[:2]), bad)

    # atime
    per = collections.Counter(); perbad = collections.Counter(); ex = []
    for rel, st in ss.items():
        if st is None or stat.S_ISSOCK(st["mode"]):
            continue
        t = tname(st); per[t] += 1
        d = ds.get(rel)
        if not d or d["atime_ns"] != st["atime_ns"]:
            perbad[t] += 1
            ex.append(f"{show(rel)}: {st['atime_ns']} -> {d['atime_ns'] if d else 'missing'}")
    R.add("atime", "atime restored", sum(per.values()), sum(perbad.values()),
          ", ".join(f"{t} {per[t] - perbad[t]}/{per[t]}" for t in sorted(per)) if perbad else "", ex)

    # the source during the backup
    A = parse_mtree(a["src_after"] + ".mtree")
    diffs = [p for p in set(S) | set(A) if S.get(p) != A.get(p)]
    for ext in (".xattr", ".acl"):
        x0, x1 = load_blocks(a["src0"] + ext), load_blocks(a["src_after"] + ext)
        diffs += [f"{ext[1:]} {h[8:]}" for h in set(x0) | set(x1) if x0.get(h) != x1.get(h)]
    sa = pickle.load(open(a["src_stat_after"], "rb"))
    for rel, st in ss.items():
        s2 = sa.get(rel)
        for k in ("mode", "uid", "gid", "size", "mtime_ns", "ctime_ns", "ino", "nlink"):
            if (st or {}).get(k) != (s2 or {}).get(k):
                diffs.append(f"stat {show(rel)}: {k} {(st or {}).get(k)} -> {(s2 or {}).get(k)}")
    R.add("src_unchanged", "source unchanged by the backup (mtree, xattrs, ACLs, ctime)",
          len(S), len(diffs), ", ".join(sorted(diffs)[:2]), sorted(diffs))
    per = collections.Counter(); perbad = collections.Counter(); ex = []
    for rel, st in ss.items():
        if st is None:
            continue
        t = tname(st); per[t] += 1
        s2 = sa.get(rel)
        if not s2 or s2["atime_ns"] != st["atime_ns"]:
            perbad[t] += 1; ex.append(f"{show(rel)}: {st['atime_ns']} -> {s2['atime_ns'] if s2 else '?'}")
    R.add("src_atime", "source atimes untouched by the backup (relatime, atimes in the past)",
          sum(per.values()), sum(perbad.values()),
          "moved: " + ", ".join(f"{t} {perbad[t]}/{per[t]}" for t in sorted(per) if perbad[t]) if perbad else "", ex)
    return R

def diff(a, b, out):
    r = subprocess.run(["diff", "-u", a, b], capture_output=True)
    open(out, "wb").write(r.stdout)

def cmd_compare(args):
    a = json.loads(args[0])
    R = compare_a(a)
    tool, outdir = a["tool"], a["outdir"]
    json.dump(R.rows, open(os.path.join(outdir, f"results-{tool}.json"), "w"), indent=1, ensure_ascii=False)
    open(os.path.join(outdir, f"details-{tool}.txt"), "w", errors="surrogateescape").write(
        f"# {tool}: every mismatch, source -> restore\n" + "\n".join(R.details) + "\n")
    for ext in ("mtree", "xattr", "acl"):
        diff(a["src0"] + "." + ext, a["dst"] + "." + ext, os.path.join(outdir, f"{ext}-{tool}.diff"))
    diff(a["src0"] + ".mtree", a["src_after"] + ".mtree", os.path.join(outdir, f"source-during-{tool}-backup.diff"))

REMARKS = {
    "atime": "neither records atimes by default (both have `--with-atime`)",
    "src_atime": "under relatime a readlink moves a symlink's atime, reading a directory without O_NOATIME moves the directory's",
    "sparse": "pass: restore allocates at most source + 2 MiB",
}

def cmd_table(args):
    meta = json.load(open(args[0]))
    tools = meta["tools"]
    res = {t: json.load(open(os.path.join(meta["outdir"], f"results-{t}.json"))) for t in tools}
    order = [r["key"] for r in res[tools[0]]]
    L = [f"### What is preserved: {' vs '.join(tools)} (default options)", ""]
    L += ["| what | " + " | ".join(tools) + " | note |", "|---|" + "---|" * len(tools) + "---|"]
    for key in order:
        rows = {t: next(r for r in res[t] if r["key"] == key) for t in tools}
        label = rows[tools[0]]["label"]
        cells = []
        for t in tools:
            r = rows[t]
            cells.append(r["status"] + ("" if r["status"] in ("✓", "n/a") else f" ({r['n'] - r['bad']}/{r['n']})"))
        notes = [f"{t}: {rows[t]['note']}" for t in tools if rows[t]["note"] and rows[t]["status"] != "✓"]
        if key == "sparse":
            notes = [f"{t}: {rows[t]['note']}" for t in tools if rows[t]["note"]]
        if key == "types":
            for t in tools:
                log = open(os.path.join(meta["outdir"], f"{t}.log"), errors="replace").read()
                said = "socket" in log.split(" restore ", 1)[-1]
                tag = " (the restore says so)" if said else " (silently)"
                notes = [n.replace("(socket): not restored", "(socket): not restored" + tag) if n.startswith(t + ":") else n for n in notes]
        notes += [REMARKS[key]] if key in REMARKS else []
        note = "; ".join(notes).replace("|", "\\|").replace("\n", " ")
        if not note:
            n = rows[tools[0]]["n"]
            note = f"{n} checked"
        L.append(f"| {label} | " + " | ".join(cells) + f" | {note} |")
    L += ["", "✓ all equal, ✗ none equal, partial: some (equal/checked). Mismatches in full: "
          "`details-<tool>.txt`; raw diffs: `mtree-<tool>.diff`, `xattr-<tool>.diff`, `acl-<tool>.diff`, "
          "`source-during-<tool>-backup.diff`; tool output: `<tool>.log`.", ""]
    L += ["| run | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]
    for k in ("backup", "restore"):
        L.append(f"| {k}: exit code, wall s, max RSS MiB | " + " | ".join(meta["runs"][t][k] for t in tools) + " |")
    L += ["", f"Versions: {'; '.join(meta['versions'])}.  ",
          f"Date: {meta['date']}. Machine: {meta['machine']}. Source tree: {meta['tree']}."]
    print("\n".join(L))

def cmd_real(args):
    src, dst, work, out = args[0], args[1], args[2], args[3]
    dumps(src, work + "/real-src"); dumps(dst, work + "/real-dst")
    S, D = {}, {}
    for path, m in ((work + "/real-src.mtree", S), (work + "/real-dst.mtree", D)):
        for l in open(path, encoding="ascii", errors="replace"):
            l = l.rstrip("\n")
            if l:
                p, _, rest = l.partition(" ")
                m[p] = " ".join(sorted(rest.split(" ")))
    files = [p for p in S if "type=file" in S[p].split(" ")]
    nbytes = sum(int(dict(kv.split("=", 1) for kv in S[p].split(" ")).get("size", 0)) for p in files)
    probs = []
    for p in sorted(set(S) | set(D)):
        if S.get(p) != D.get(p):
            probs.append(f"mtree {p}:\n    source:  {S.get(p)}\n    restore: {D.get(p)}")
    nx = {}
    for ext, what in ((".xattr", "xattr"), (".acl", "acl")):
        x0, x1 = load_blocks(work + "/real-src" + ext), load_blocks(work + "/real-dst" + ext)
        nx[what] = len(x0)
        for h in sorted(set(x0) | set(x1)):
            if x0.get(h) != x1.get(h):
                probs.append(f"{what} {h[8:]}: {x0.get(h)} -> {x1.get(h)}")
    def lg(root):
        return groups({r: s for r, s in stat_snap(root, walk_list(root)).items()})
    g0, g1 = lg(src), lg(dst)
    if g0 != g1:
        probs.append(f"hard link groups: source {len(g0)}, restore {len(g1)}; "
                     f"lost: {[sorted(show(r) for r in g) for g in list(g0 - g1)[:5]]}")
    extra = json.loads(args[4])
    L = [f"larder fidelity on a real tree: {src}",
         f"date: {extra['date']}; {extra['version']}",
         f"compared: {len(S)} entries (bsdtar mtree incl. sha256, mode, owner, ns mtime, nlink, link target), "
         f"{len(files)} regular files, {nbytes} bytes ({nbytes / 2**30:.2f} GiB); "
         f"getfattr blocks {nx['xattr']}, getfacl blocks {nx['acl']}, hard link groups {len(g0)}",
         f"backup: {extra['backup']}; restore: {extra['restore']}"]
    L.append("result: identical" if not probs else f"result: {len(probs)} differences")
    L += probs[:200]
    if len(probs) > 200:
        L.append(f"... {len(probs) - 200} more")
    text = "\n".join(L) + "\n"
    open(out, "w", errors="surrogateescape").write(text)
    sys.stdout.write(text)

if __name__ == "__main__":
    c, *args = sys.argv[1:]
    if c == "list":
        pickle.dump(walk_list(args[0]), open(args[1], "wb"))
    elif c == "reset-atimes":
        reset_atimes(args[0], pickle.load(open(args[1], "rb")))
    elif c == "stat":
        pickle.dump(stat_snap(args[0], pickle.load(open(args[1], "rb"))), open(args[2], "wb"))
    elif c == "dumps":
        dumps(args[0], args[1])
    elif c == "compare":
        cmd_compare(args)
    elif c == "table":
        cmd_table(args)
    elif c == "real":
        cmd_real(args)
PYEOF
py() { python3 "$PY" "$@"; }

# run LOG TIMEFILE CMD...: appends the command and its output to LOG, its exit
# code, wall time and max RSS to TIMEFILE; never fails.
run() {
    local log=$1 tf=$2; shift 2
    printf '$ %s\n' "$*" >> "$log"
    set +e
    /usr/bin/time -f '%e %M' -o "$tf.t" "$@" >> "$log" 2>&1
    local rc=$?
    set -e
    read -r secs rss < <(tail -n1 "$tf.t")
    echo "$rc, ${secs}, $((rss / 1024))" > "$tf"
    printf '[exit %s, %s s]\n' "$rc" "$secs" >> "$log"
    return 0
}

if [ "$MODE" = B ]; then
    # ------------------------------------------------------------ mode B
    SRC=$(cd "$REAL" && pwd -P)
    NAME=$(basename "$SRC")
    say "mode B: larder on $SRC"
    export LARDER_REPOSITORY=$W/repo LARDER_PASSWORD=$PASS LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
    LOG=$OUT/real-$NAME.log; : > "$LOG"
    run "$LOG" "$W/init" "$LARDER" init
    run "$LOG" "$W/backup" nice -n 10 "$LARDER" backup "$SRC"
    run "$LOG" "$W/restore" nice -n 10 "$LARDER" restore "latest:$SRC" --target "$W/out"
    say "comparing (bsdtar mtree with sha256, getfattr, getfacl, hard links)"
    extra=$(python3 -c 'import json,sys; print(json.dumps(dict(date=sys.argv[1], version=sys.argv[2], backup="exit code, wall s, max RSS MiB = "+sys.argv[3], restore="exit code, wall s, max RSS MiB = "+sys.argv[4])))' \
        "$(date -u '+%Y-%m-%d %H:%M UTC')" "$("$LARDER" --version), repository $(du -sh "$W/repo" | cut -f1)" \
        "$(cat "$W/backup")" "$(cat "$W/restore")")
    nice -n 10 python3 "$PY" real "$SRC" "$W/out" "$W" "$OUT/real-$NAME.txt" "$extra"
    exit 0
fi

# ---------------------------------------------------------------- mode A
SRC=$W/src
say "building the exotic tree in $SRC (root: $IS_ROOT)"
build_tree() {
    local r=$1
    mkdir -p "$r"; cd "$r"
    # Names: any bytes Linux allows.
    local long255 utf255
    long255=$(printf 'n%.0s' $(seq 255))
    utf255=$(printf 'ü%.0s' $(seq 127))x
    for n in $'bad\xffname\xfe' $'new\nline' 'back\slash' '-leading-dash' $' spaces and \ttab ' \
             "$long255" "$utf255" 'x=y%20#hash' $'\x01ctrl\x7f'; do
        printf '%s' "$n" > "./$n"
    done
    mkdir -p $'names/dir\nwith\xffodd bytes' -- -dash-dir
    echo inside > $'names/dir\nwith\xffodd bytes/file'
    echo inside > ./-dash-dir/-f
    # Deep nesting: 200 levels.
    local d=deep i
    for i in $(seq -w 1 200); do d="$d/level-$i"; done
    mkdir -p "$d"; echo "at the bottom" > "$d/bottom.txt"
    # Symlinks of every kind.
    mkdir -p sub; echo "pointed at" > sub/target.txt
    ln -s sub/target.txt rel-link
    ln -s /etc/hostname abs-link
    ln -s does/not/exist dangling
    ln -s loop loop
    ln -s sub dir-link
    ln -s $'odd\xfftarget\nname' odd-target-link
    # Hard link groups spanning directories (one of them empty files).
    echo "hard linked content" > sub/h1
    mkdir -p other links
    ln sub/h1 other/h2; ln sub/h1 h3
    : > links/empty-a; ln links/empty-a other/empty-b
    # FIFO, socket, devices.
    mkfifo -m 640 fifo
    python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' socket
    if [ "$IS_ROOT" = 1 ]; then
        mknod -m 660 chardev c 1 3
        mknod -m 660 blockdev b 7 200
    fi
    # Modes.
    mkdir -p modes/setgid-dir modes/sticky-dir modes/locked-dir
    printf '#!/bin/sh\n' > modes/setuid; chmod 4755 modes/setuid
    printf '#!/bin/sh\n' > modes/setgid; chmod 2755 modes/setgid
    echo all > modes/all-bits; chmod 7777 modes/all-bits
    echo none > modes/none; chmod 000 modes/none
    echo locked > modes/locked-dir/inside
    chmod 2775 modes/setgid-dir; chmod 1777 modes/sticky-dir
    # Owners (root): numeric-only ids, a named user, a symlink's own owner.
    if [ "$IS_ROOT" = 1 ]; then
        mkdir -p owners/dir
        echo 1234:5678 > owners/numeric; chown 1234:5678 owners/numeric owners/dir
        echo nobody > owners/nobody; chown nobody:"$(id -gn nobody)" owners/nobody
        chown -h 4321:8765 rel-link
    fi
    # Extended attributes.
    mkdir -p xattrs; echo "with attributes" > xattrs/file
    setfattr -n user.comment -v 0x68656c6c6f0062696e617279ff xattrs/file
    setfattr -n user.empty xattrs/file
    setfattr -n user.big -v "0x$(head -c 3000 /dev/zero | tr '\0' 'a' | od -v -An -tx1 | tr -d ' \n')" xattrs/file
    setfattr -n user.dir -v "on a directory" xattrs
    if [ "$IS_ROOT" = 1 ]; then
        setfattr -n trusted.larder -v "trusted value" xattrs/file
        setfattr -h -n trusted.on-symlink -v "a symlink's own" rel-link
        setfattr -n security.larder -v "security value" xattrs/file || echo "(security.* not settable here)" >&2
    fi
    # POSIX ACLs: access on a file and a directory, default on a directory.
    mkdir -p acl/sub; echo acl > acl/file
    setfacl -m u:nobody:r--,g:1234:rw- acl/file
    setfacl -d -m u:nobody:r-x acl
    setfacl -m u:nobody:rwx acl
    # Content.
    mkdir -p content
    : > content/empty
    head -c $((3 << 20)) /dev/zero > content/zeros
    head -c $((5 << 20)) /dev/urandom > content/random
    truncate -s 100M content/sparse
    truncate -s $(((4 << 30) + (3 << 20))) content/over-4GiB
    truncate -s 10M content/hole-start
    python3 - <<'EOF'
import os
def at(p, off, data):
    fd = os.open(p, os.O_WRONLY); os.pwrite(fd, data, off); os.close(fd)
at("content/sparse", 0, b"data at the start")
at("content/sparse", 50 << 20, b"data in the middle")
at("content/over-4GiB", 0, b"head")
at("content/over-4GiB", (4 << 30) + (1 << 20), b"\x07" * 100_000)
at("content/hole-start", (10 << 20) - 5, b"tail!")
EOF
    # Times, last and children first: ns, before 1970, after 2038, symlink.
    mkdir -p times
    echo old > times/pre-epoch; touch -m -d @-86400.25 times/pre-epoch
    echo new > times/y2100; touch -m -d @4102444800.5 times/y2100
    touch -m -d @1600000000.123456789 sub/target.txt
    touch -a -d @1000000000 sub/target.txt
    touch -h -m -d @1500000000.999999999 rel-link
    touch -m -d @1.000000001 content/empty
    touch -m -d @1700000000.000000042 modes/sticky-dir
    touch -m -d @1650000000.5 deep/level-001
    cd "$ROOT"
}
build_tree "$SRC"
say "source: $(find "$SRC" | wc -l) entries; listing and hashing it (bsdtar mtree, getfattr, getfacl)"
py dumps "$SRC" "$W/src0"
py list "$SRC" "$W/list.pkl"

declare -A RUNS_B RUNS_R
TOOLS=(larder restic)
for tool in "${TOOLS[@]}"; do
    say "$tool: backup and restore with default options"
    LOG=$OUT/$tool.log; : > "$LOG"
    py reset-atimes "$SRC" "$W/list.pkl"
    py stat "$SRC" "$W/list.pkl" "$W/$tool-src-before.pkl"
    case $tool in
    larder)
        export LARDER_REPOSITORY=$W/repo-larder LARDER_PASSWORD=$PASS LARDER_CACHE_DIR=$W/cache-larder LARDER_STATE_DIR=$W/state-larder
        run "$LOG" "$W/x" "$LARDER" init
        run "$LOG" "$W/larder-backup" "$LARDER" backup "$SRC"
        py stat "$SRC" "$W/list.pkl" "$W/$tool-src-after.pkl"
        run "$LOG" "$W/larder-restore" "$LARDER" restore "latest:$SRC" --target "$W/out-larder"
        DST=$W/out-larder ;;
    restic)
        export RESTIC_REPOSITORY=$W/repo-restic RESTIC_PASSWORD=$PASS RESTIC_CACHE_DIR=$W/cache-restic
        run "$LOG" "$W/x" restic init
        run "$LOG" "$W/restic-backup" restic backup "$SRC"
        py stat "$SRC" "$W/list.pkl" "$W/$tool-src-after.pkl"
        run "$LOG" "$W/restic-restore" restic restore latest --target "$W/out-restic"
        DST=$W/out-restic$SRC ;;
    esac
    RUNS_B[$tool]=$(cat "$W/$tool-backup"); RUNS_R[$tool]=$(cat "$W/$tool-restore")
    say "$tool: comparing (backup: ${RUNS_B[$tool]}; restore: ${RUNS_R[$tool]})"
    py dumps "$SRC" "$W/$tool-src-after"
    [ -d "$DST" ] || mkdir -p "$DST"
    py stat "$DST" "$W/list.pkl" "$W/$tool-dst.pkl"
    py dumps "$DST" "$W/$tool-dst"
    py compare "$(python3 -c 'import json,sys; a=sys.argv[1:]; print(json.dumps(dict(tool=a[0], outdir=a[1], src_root=a[2], dst_root=a[3], src0=a[4], dst=a[5], src_after=a[6], src_stat=a[7], src_stat_after=a[8], dst_stat=a[9])))' \
        "$tool" "$OUT" "$SRC" "$DST" "$W/src0" "$W/$tool-dst" "$W/$tool-src-after" \
        "$W/$tool-src-before.pkl" "$W/$tool-src-after.pkl" "$W/$tool-dst.pkl")"
    rm -rf "$W/out-$tool" "$W/repo-$tool" "$W/cache-$tool"
done

fs=$(findmnt -no FSTYPE,OPTIONS -T "$W" | awk '{print $1 " (" $2 ")"}')
rev=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
git diff --quiet HEAD -- src 2>/dev/null || rev="$rev + uncommitted changes in src/"
python3 -c 'import json,sys; a=sys.argv[1:]; print(json.dumps(dict(tools=["larder","restic"], outdir=a[0], date=a[1], machine=a[2], tree=a[3], versions=a[4:7], runs=dict(larder=dict(backup=a[7], restore=a[8]), restic=dict(backup=a[9], restore=a[10])))))' \
    "$OUT" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(uname -sr), $fs, $( [ "$IS_ROOT" = 1 ] && echo 'as root' || echo 'not root')" \
    "$(find "$SRC" | wc -l) entries built by scripts/fidelity.sh" \
    "$("$LARDER" --version) (git $rev)" "$(restic version)" "$(bsdtar --version)" \
    "${RUNS_B[larder]}" "${RUNS_R[larder]}" "${RUNS_B[restic]}" "${RUNS_R[restic]}" > "$W/meta.json"
py table "$W/meta.json" | tee "$OUT/table.md"
