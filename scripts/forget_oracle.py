#!/usr/bin/env python3
"""Oracle for larder's retention policy: what does the real restic keep?

Builds a restic repository (format version 1) whose snapshot files are
written directly, in restic's documented format (doc/design.rst: JSON,
encrypted as IV || AES-256-CTR ciphertext || Poly1305-AES MAC, stored under
the SHA-256 of the file), for generated sets of snapshot times, then runs
`restic forget --dry-run --json` with many policies and records what restic
keeps. Running `restic backup` for thousands of snapshots would take hours;
writing the files takes seconds.

Output: OUT/oracle.json with, per scenario (a time zone and a snapshot set),
the snapshots (id, time, host, paths, tags) and for every run the larder
flags, the flags given to restic, restic's exit status and its JSON. The
Rust test tests/it/forget_policy.rs compares larder's decisions with it.

Both sides use the scenario's time zone: restic runs with TZ set, and the
snapshot times carry that zone's offset, so restic reads them as local time.

Usage: forget_oracle.py --out DIR [--seed N]
Exit status 77 when restic, Python's `cryptography` or tzdata is missing.
"""

import argparse
import base64
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

SKIP = 77
PASSWORD = "oracle"
NS = 1_000_000_000
# restic before 0.17 has no "unlimited"; a count no group can use up keeps
# the same snapshots (restic only tests count > 0 and decrements it).
UNLIMITED_FOR_RESTIC = "1000000000"


def need_crypto():
    try:
        from cryptography.hazmat.primitives import ciphers  # noqa: F401
    except ImportError:
        print("forget_oracle: installing Python's cryptography package", file=sys.stderr)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "cryptography"])
        if r.returncode != 0:
            print("forget_oracle: needs Python's cryptography package "
                  "(apt-get install python3-cryptography)", file=sys.stderr)
            sys.exit(SKIP)


def need_zones(names):
    """restic (Go) and Python read the system's time zone database."""
    for name in names:
        if not os.path.exists(os.path.join("/usr/share/zoneinfo", name)):
            print(f"forget_oracle: time zone {name} missing: install tzdata", file=sys.stderr)
            sys.exit(SKIP)


def restic_version():
    if shutil.which("restic") is None:
        print("forget_oracle: restic is not on PATH", file=sys.stderr)
        sys.exit(SKIP)
    out = subprocess.run(["restic", "version"], capture_output=True, text=True).stdout
    m = re.search(r"restic (\d+)\.(\d+)\.(\d+)", out)
    if not m:
        sys.exit(f"forget_oracle: cannot read the restic version from {out!r}")
    return tuple(int(x) for x in m.groups())


class Repo:
    """A restic repository whose snapshot files this script writes."""

    def __init__(self, path, rng):
        self.path = path
        self.rng = rng
        self.env = dict(os.environ, RESTIC_PASSWORD=PASSWORD, RESTIC_REPOSITORY=path)
        self.env.pop("RESTIC_PASSWORD_FILE", None)
        self.env.pop("RESTIC_PASSWORD_COMMAND", None)
        run(["restic", "init", "--repository-version", "1"], self.env)
        mk = json.loads(run(["restic", "--no-cache", "cat", "masterkey"], self.env))
        self.enc = base64.b64decode(mk["encrypt"])
        self.mac_k = base64.b64decode(mk["mac"]["k"])
        self.mac_r = base64.b64decode(mk["mac"]["r"])
        self.fast_key(mk)

    def seal(self, plain, key=None):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.poly1305 import Poly1305
        enc, mac_k, mac_r = key or (self.enc, self.mac_k, self.mac_r)
        iv = bytes(self.rng.randrange(256) for _ in range(15)) + b"\x01"
        c = Cipher(algorithms.AES(enc), modes.CTR(iv)).encryptor()
        ct = c.update(plain) + c.finalize()
        e = Cipher(algorithms.AES(mac_k), modes.ECB()).encryptor()
        s = e.update(iv) + e.finalize()
        return iv + ct + Poly1305.generate_tag(mac_r + s, ct)

    def fast_key(self, masterkey):
        """Replaces the key file by one with a cheap scrypt (N=2^10), so that
        each restic run opens the repository in milliseconds."""
        salt = bytes(self.rng.randrange(256) for _ in range(64))
        n, r, p = 1024, 8, 1
        user = hashlib.scrypt(PASSWORD.encode(), salt=salt, n=n, r=r, p=p, dklen=64)
        data = self.seal(json.dumps(masterkey).encode(), (user[:32], user[32:48], user[48:64]))
        key = {"created": "2024-01-01T00:00:00Z", "username": "oracle", "hostname": "oracle",
               "kdf": "scrypt", "N": n, "r": r, "p": p,
               "salt": base64.b64encode(salt).decode(), "data": base64.b64encode(data).decode()}
        raw = json.dumps(key).encode()
        keys = os.path.join(self.path, "keys")
        for old in os.listdir(keys):
            os.remove(os.path.join(keys, old))
        with open(os.path.join(keys, hashlib.sha256(raw).hexdigest()), "wb") as f:
            f.write(raw)

    def write_snapshots(self, snaps, tz):
        d = os.path.join(self.path, "snapshots")
        for old in os.listdir(d):
            os.remove(os.path.join(d, old))
        for s in snaps:
            doc = {"time": rfc3339(s["time_ns"], tz), "tree": "ab" * 32, "paths": s["paths"],
                   "hostname": s["hostname"], "username": "oracle"}
            if s["tags"]:
                doc["tags"] = s["tags"]
            data = self.seal(json.dumps(doc).encode())
            s["id"] = hashlib.sha256(data).hexdigest()
            s["time"] = doc["time"]
            with open(os.path.join(d, s["id"]), "wb") as f:
                f.write(data)

    def forget(self, args, tz):
        env = dict(self.env, TZ=tz)
        cmd = ["restic", "--no-cache", "--no-lock", "--json", "forget", "--dry-run"] + args
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        groups = None
        if r.returncode == 0 and r.stdout.strip():
            groups = [brief(g) for g in json.loads(r.stdout)]
        return {"exit": r.returncode, "groups": groups, "stderr": r.stderr[-2000:]}


def brief(group):
    """restic's JSON for a group without the snapshot bodies: the key, the
    ids kept (newest first), the ids removed, and the reasons (in keep
    order)."""
    return {"tags": group["tags"], "host": group["host"], "paths": group["paths"],
            "keep": [s["id"] for s in group["keep"] or []],
            "remove": [s["id"] for s in group["remove"] or []],
            # restic 0.17 and later print no counters: null then.
            "reasons": [{"matches": r["matches"], "counters": r.get("counters")}
                        for r in group["reasons"] or []]}


def compact(run, index):
    """Replaces snapshot ids by their positions in the scenario's list and
    the removed list by its size, after checking that keep and remove
    split the group."""
    for g in run["groups"] or []:
        keep = [index[i] for i in g["keep"]]
        remove = [index[i] for i in g.pop("remove")]
        assert not set(keep) & set(remove), run["args"]
        assert len(g["reasons"]) == len(keep), run["args"]
        g["keep"], g["size"] = keep, len(keep) + len(remove)


def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"forget_oracle: {' '.join(cmd)} failed: {r.stderr}")
    return r.stdout


def rfc3339(time_ns, tz):
    """The time as RFC 3339 with the zone's offset at that instant."""
    sec, frac = divmod(time_ns, NS)
    off = datetime.fromtimestamp(sec, ZoneInfo(tz)).utcoffset()
    local = datetime(1970, 1, 1) + timedelta(seconds=sec) + off
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    total = int(off.total_seconds())
    sign = "+" if total >= 0 else "-"
    hh, mm = divmod(abs(total) // 60, 60)
    return f"{text}{sign}{hh:02d}:{mm:02d}"


def ns_at(tz, y, mo, d, h=0, mi=0, s=0, fold=0):
    """A local wall clock time in tz as nanoseconds since the epoch."""
    dt = datetime(y, mo, d, h, mi, s, tzinfo=ZoneInfo(tz), fold=fold)
    return int(dt.timestamp()) * NS


def utc_ns(y, mo, d, h=0, mi=0, s=0):
    return int(datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp()) * NS


def snap(t, host, paths, tags=()):
    return {"time_ns": t, "hostname": host, "paths": list(paths), "tags": list(tags)}


def hourly_year(rng):
    """A year (2024, leap) of hourly snapshots with outages, skipped hours,
    jitter within the hour and occasional second runs in the same hour."""
    # It ends at 23:00 on 31 December in Berlin, so that durations in months
    # roll over from the 31st (1m: "31 November", that is 1 December).
    out, start, end = [], utc_ns(2024, 1, 1), utc_ns(2024, 12, 31, 22)
    outages = []
    for _ in range(8):
        a = rng.randrange(start, end)
        outages.append((a, a + rng.randrange(1, 10 * 24) * 3600 * NS))
    t = start
    while t < end:
        if not any(a <= t < b for a, b in outages) and rng.random() > 0.12:
            jitter = rng.randrange(0, 3600 * NS - 1)
            if rng.random() < 0.3:
                jitter -= jitter % NS  # whole seconds, like most backups
            out.append(snap(t + jitter, "alpha", ["/home/user"]))
            if rng.random() < 0.02:
                out.append(snap(t + rng.randrange(jitter, 3600 * NS), "alpha", ["/home/user"]))
        t += 3600 * NS
    return out


def berlin_year(rng):
    """The hourly year, with a few tagged snapshots in the same group."""
    snaps = hourly_year(rng)
    for _ in range(30):
        t = utc_ns(2024, 1, 1) + rng.randrange(0, 365 * 86400) * NS
        snaps.append(snap(t, "alpha", ["/home/user"], ["t"]))
    return snaps


def berlin_mixed(rng):
    """Smaller groups: tags, path order, ties, the future, dense DST grids."""
    tz = "Europe/Berlin"
    snaps = []
    # Daily backups over three years, paths given in either order, tags.
    tagsets = [[], [], [], ["manual"], ["manual", "important"], ["important"], ["weekly"]]
    day = datetime(2022, 1, 1)
    while day < datetime(2025, 1, 1):
        if rng.random() > 0.15:
            t = ns_at(tz, day.year, day.month, day.day, 3, rng.randrange(60), rng.randrange(60))
            paths = ["/srv", "/etc"] if rng.random() < 0.5 else ["/etc", "/srv"]
            snaps.append(snap(t, "beta", paths, rng.choice(tagsets)))
        day += timedelta(days=1)
    # Daily until 31 March 2024: 1m from there is "31 February", 2 March,
    # and 1y1m "31 February 2023", 3 March.
    day = datetime(2022, 12, 1)
    while day <= datetime(2024, 3, 31):
        t = ns_at(tz, day.year, day.month, day.day, 10, rng.randrange(60))
        snaps.append(snap(t, "beta", ["/monthend"]))
        day += timedelta(days=1)
    # Every few days over ten years; tags in varying order for --group-by tags.
    tagsets = [[], ["x"], ["y"], ["x", "y"], ["y", "x"]]
    t = utc_ns(2015, 1, 3, 20)
    while t < utc_ns(2025, 1, 1):
        snaps.append(snap(t + rng.randrange(0, 7200) * NS, "alpha", ["/var"], rng.choice(tagsets)))
        t += rng.randrange(2, 9) * 86400 * NS
    # Ties (identical times) after a distinct oldest one, and snapshots in
    # the future.
    snaps.append(snap(utc_ns(2022, 6, 1, 12), "gamma", ["/data"]))
    for i in range(20):
        t = utc_ns(2023, 1, 1) + rng.randrange(0, 500) * 86400 * NS + rng.randrange(86400) * NS
        for _ in range(rng.choice([1, 1, 2, 3])):
            snaps.append(snap(t, "gamma", ["/data"]))
    snaps.append(snap(utc_ns(2099, 5, 1), "gamma", ["/data"]))
    snaps.append(snap(utc_ns(2099, 5, 1) + 1, "gamma", ["/data"]))
    # A dense grid across both DST switches; the newest is 02:30 CET on
    # 28 October, so 1d reaches into the repeated hour and 6m28d into the
    # missing one.
    for (y, mo, d, hours) in [(2024, 3, 30, 60), (2024, 10, 26, 51)]:
        t = ns_at(tz, y, mo, d)
        for _ in range(hours * 4 + 3):
            snaps.append(snap(t, "delta", ["/dst"]))
            t += 900 * NS
    assert rfc3339(snaps[-1]["time_ns"], tz) == "2024-10-28T02:30:00+01:00", snaps[-1]
    # A group of one and a group of two; tagged snapshots in group "alpha".
    snaps.append(snap(utc_ns(2024, 2, 29, 12), "eps", ["/one"]))
    snaps.append(snap(utc_ns(2024, 6, 1, 9), "eps", ["/two"], ["manual"]))
    snaps.append(snap(utc_ns(2024, 6, 1, 17), "eps", ["/two"]))
    return snaps


def grid(tz, host, path, start, end, step):
    out, t = [], start
    while t <= end:
        out.append(snap(t, host, [path]))
        t += step * NS
    return out


def new_york_snapshots(rng):
    tz = "America/New_York"
    # Ends at 01:30 EST on 4 November: 1d reaches the repeated 01:xx hour.
    snaps = grid(tz, "ny", "/fold", ns_at(tz, 2024, 11, 2), ns_at(tz, 2024, 11, 4, 1, 30, fold=1), 900)
    # Around the missing 02:xx hour of 10 March, newest at 02:30 EDT on
    # 10 April: 1m reaches into the gap.
    snaps += grid(tz, "ny", "/gap", ns_at(tz, 2024, 3, 9), ns_at(tz, 2024, 3, 11, 12), 900)
    snaps.append(snap(ns_at(tz, 2024, 4, 10, 2, 30), "ny", ["/gap"]))
    return snaps


def lord_howe_snapshots(rng):
    tz = "Australia/Lord_Howe"  # half-hour DST shifts
    snaps = grid(tz, "lh", "/end", ns_at(tz, 2024, 4, 6), ns_at(tz, 2024, 4, 8, 1, 45, fold=0), 600)
    snaps += grid(tz, "lh", "/start", ns_at(tz, 2024, 10, 5), ns_at(tz, 2024, 10, 7, 2, 15), 600)
    return snaps


def berlin_policies(rng):
    single = [["--keep-last", n] for n in ["1", "5", "100", "100000"]]
    single += [["--keep-hourly", n] for n in ["1", "24", "200", "5000", "unlimited"]]
    single += [["--keep-daily", n] for n in ["1", "7", "30", "400", "unlimited"]]
    single += [["--keep-weekly", n] for n in ["1", "4", "53", "unlimited"]]
    single += [["--keep-monthly", n] for n in ["1", "6", "12", "13", "unlimited"]]
    single += [["--keep-yearly", n] for n in ["1", "3", "unlimited"]]
    single += [["--keep-within", d] for d in
               ["1h", "1d", "2d5h", "7d", "1m", "10m", "1y", "1y1m", "1y2m3d4h", "6m28d", "1m1d", "100h",
                "50y"]]
    single += [["--keep-within-hourly", d] for d in ["1d", "2d", "1m1d"]]
    single += [["--keep-within-daily", d] for d in ["7d", "1m", "6m28d"]]
    single += [["--keep-within-weekly", d] for d in ["1m", "1y"]]
    single += [["--keep-within-monthly", d] for d in ["6m", "1y"]]
    single += [["--keep-within-yearly", d] for d in ["5y", "75y"]]
    single += [["--keep-tag", t] for t in ["manual", "manual,important", "important,manual", "x,y", "t"]]
    single += [["--keep-tag", "x", "--keep-tag", "y"], ["--keep-tag", ""]]
    combos = [
        ["--keep-daily", "7", "--keep-weekly", "5", "--keep-monthly", "12", "--keep-yearly", "75"],
        ["--keep-within-daily", "7d", "--keep-within-weekly", "1m", "--keep-within-monthly", "1y",
         "--keep-within-yearly", "75y"],
        ["--keep-last", "3", "--keep-hourly", "24", "--keep-daily", "7", "--keep-weekly", "4",
         "--keep-monthly", "6", "--keep-yearly", "2"],
        ["--keep-last", "2", "--keep-tag", "manual", "--keep-within", "1m"],
        ["--keep-hourly", "48", "--keep-within-daily", "1m", "--keep-weekly", "unlimited"],
    ]
    pool = [
        ("--keep-last", ["1", "2", "10"]), ("--keep-hourly", ["3", "48", "unlimited"]),
        ("--keep-daily", ["2", "14", "unlimited"]), ("--keep-weekly", ["2", "8"]),
        ("--keep-monthly", ["3", "24", "unlimited"]), ("--keep-yearly", ["2", "10"]),
        ("--keep-within", ["3d", "2m", "1y6m"]), ("--keep-within-hourly", ["12h", "3d"]),
        ("--keep-within-daily", ["10d", "2m"]), ("--keep-within-weekly", ["2m", "6m"]),
        ("--keep-within-monthly", ["1y", "3y"]), ("--keep-within-yearly", ["10y"]),
        ("--keep-tag", ["manual", "x", "important,manual", "y"]),
    ]
    for _ in range(25):
        args = []
        for flag, values in rng.sample(pool, rng.randrange(2, 5)):
            args += [flag, rng.choice(values)]
        combos.append(args)
    return single, combos


def regrouped(combos):
    regroup = [["--keep-last", "5"], ["--keep-daily", "7"], ["--keep-weekly", "unlimited"],
               ["--keep-monthly", "6"], ["--keep-within", "1m"], ["--keep-within-daily", "1m"],
               ["--keep-tag", "x"]] + combos[:4]
    runs = []
    for by in ["host", "paths", "tags", "host,tags", "", "host,paths,tags"]:
        runs += [(p, by) for p in regroup]
    return runs


def small_policies(durations):
    runs = [(["--keep-hourly", n], None) for n in ["10", "40", "unlimited"]]
    runs += [(["--keep-daily", "2"], None), (["--keep-last", "7"], None)]
    for d in durations:
        runs += [(["--keep-within", d], None), (["--keep-within-hourly", d], None)]
    runs.append((["--keep-within-daily", "1m", "--keep-hourly", "5"], None))
    return runs


def restic_args(args, group_by):
    out = [UNLIMITED_FOR_RESTIC if a == "unlimited" else a for a in args]
    if group_by is not None:
        out.append(f"--group-by={group_by}")
    return out


WITHIN_BUCKET_FLAGS = {"--keep-within-hourly", "--keep-within-daily", "--keep-within-weekly",
                       "--keep-within-monthly", "--keep-within-yearly"}


def scenario(repo, name, tz, snaps, policies, version):
    repo.write_snapshots(snaps, tz)
    # restic before 0.16 lacks the rule that keeps the oldest snapshot
    # inside a --keep-within-<bucket> duration; record which groups' oldest
    # snapshots lie inside each such duration (by asking restic what
    # --keep-within keeps) so that the test can account for it.
    probes = {}
    if version < (0, 16, 0):
        for args, group_by in policies:
            for flag, value in zip(args, args[1:]):
                if flag in WITHIN_BUCKET_FLAGS:
                    probes[f"{group_by}|{value}"] = (["--keep-within", value], group_by)
    jobs = [(args, by) for args, by in policies] + list(probes.values())
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda j: repo.forget(restic_args(*j), tz), jobs))
    runs = []
    for (args, group_by), r in zip(jobs, results):
        r.update(args=args, group_by=group_by)
        runs.append(r)
    index = {s["id"]: i for i, s in enumerate(snaps)}
    for r in runs:
        compact(r, index)
    probes = runs[len(policies):]
    runs = runs[:len(policies)]
    print(f"forget_oracle: {name}: {len(snaps)} snapshots, {len(runs)} runs, "
          f"{len(probes)} probes", file=sys.stderr)
    for s in snaps:
        del s["time_ns"]
    return {"name": name, "tz": tz, "snapshots": snaps, "runs": runs, "probes": probes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20240331)
    opts = ap.parse_args()
    version = restic_version()
    need_crypto()
    need_zones(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"])
    rng = random.Random(opts.seed)
    os.makedirs(opts.out, exist_ok=True)
    repo_dir = os.path.join(opts.out, "repo")
    shutil.rmtree(repo_dir, ignore_errors=True)
    repo = Repo(repo_dir, rng)
    single, combos = berlin_policies(rng)
    plain = [(p, None) for p in single + combos]
    scenarios = [
        scenario(repo, "berlin-year", "Europe/Berlin", berlin_year(rng), plain, version),
        scenario(repo, "berlin-mixed", "Europe/Berlin", berlin_mixed(rng),
                 plain + regrouped(combos), version),
        scenario(repo, "new-york", "America/New_York", new_york_snapshots(rng),
                 small_policies(["1d", "1m", "1d1h", "2d", "1m1d"]), version),
        scenario(repo, "lord-howe", "Australia/Lord_Howe", lord_howe_snapshots(rng),
                 small_policies(["1d", "1d1h", "6m", "2d"]), version),
    ]
    out = {"restic_version": ".".join(map(str, version)), "seed": opts.seed, "scenarios": scenarios}
    with open(os.path.join(opts.out, "oracle.json"), "w") as f:
        json.dump(out, f)
    shutil.rmtree(repo_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
