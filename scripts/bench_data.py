#!/usr/bin/env python3
"""Data helpers for scripts/bench.sh (standard library only, deterministic).

  corpus DEST BUDGET SRC...   copy SRC trees (sorted walk; files, dirs and
                              symlinks, with modes and mtimes) into DEST/<n>-<name>
                              until BUDGET bytes (0 = everything); prints JSON
                              {"files", "bytes", "dirs", "symlinks"}
  stat DIR                    prints JSON {"files", "bytes"} of regular files
  edit apply DIR SAVE SEED    edit 500, add 100, delete 100 files (chosen by
                              SEED); originals saved under SAVE
  edit revert DIR SAVE        undo `edit apply`
  randfile PATH BYTES SEED    write BYTES of seeded pseudo-random data
  randedit PATH SEED          overwrite 100 scattered 1 KiB regions in place
"""

import hashlib
import json
import os
import random
import shutil
import stat
import sys

N_EDIT, N_ADD, N_DELETE = 500, 100, 100


def walk_sorted(root):
    """Yields (path, lstat) in a deterministic pre-order walk."""
    st = os.lstat(root)
    yield root, st
    if stat.S_ISDIR(st.st_mode):
        try:
            names = sorted(os.listdir(root))
        except OSError:
            return
        for n in names:
            yield from walk_sorted(os.path.join(root, n))


def cmd_corpus(dest, budget, srcs):
    budget = int(budget)
    srcs = [os.path.realpath(s) for s in srcs]
    # With a budget, take a deterministic sample of the files (by a hash of
    # their path) of about that many bytes, so a small corpus has the same
    # mix of sizes as the whole; files over budget/8 are left out.
    keep_share = 1.0
    if budget:
        total = sum(st.st_size for src in srcs for _, st in walk_sorted(src)
                    if stat.S_ISREG(st.st_mode) and st.st_size <= budget // 8)
        keep_share = min(1.0, budget / max(1, total))
    os.makedirs(dest, exist_ok=True)
    files = nbytes = dirs = links = 0
    dir_times = []
    for i, src in enumerate(srcs):
        top = os.path.join(dest, f"{i}-{os.path.basename(src.rstrip('/')) or 'root'}")
        for path, st in walk_sorted(src):
            rel = os.path.relpath(path, src)
            out = top if rel == "." else os.path.join(top, rel)
            m = st.st_mode
            if budget and not stat.S_ISDIR(m):
                h = int(hashlib.sha256(f"{i}/{rel}".encode()).hexdigest()[:8], 16) / 2**32
                if (h >= keep_share or st.st_size > budget // 8
                        or nbytes + st.st_size > budget):
                    continue
            if stat.S_ISDIR(m):
                os.makedirs(out, exist_ok=True)
                dir_times.append((out, st))
                dirs += 1
            elif stat.S_ISLNK(m):
                try:
                    os.symlink(os.readlink(path), out)
                    links += 1
                except OSError:
                    pass
            elif stat.S_ISREG(m):
                try:
                    shutil.copyfile(path, out, follow_symlinks=False)
                except OSError:
                    continue
                os.chmod(out, stat.S_IMODE(m) | 0o200)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
                files += 1
                nbytes += st.st_size
    for out, st in reversed(dir_times):
        os.chmod(out, stat.S_IMODE(st.st_mode) | 0o700)
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    print(json.dumps({"files": files, "bytes": nbytes, "dirs": dirs, "symlinks": links}))


def regular_files(root):
    return [p for p, st in walk_sorted(root) if stat.S_ISREG(st.st_mode)]


def cmd_stat(root):
    files = nbytes = 0
    for p, st in walk_sorted(root):
        if stat.S_ISREG(st.st_mode):
            files += 1
            nbytes += st.st_size
    print(json.dumps({"files": files, "bytes": nbytes}))


def seeded_bytes(seed, label, n):
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}/{label}/{i}".encode()).digest()
        i += 1
    return bytes(out[:n])


def cmd_edit_apply(root, save, seed):
    files = regular_files(root)
    rng = random.Random(f"larder-bench-edit-{seed}")
    picked = rng.sample(files, N_EDIT + N_DELETE)
    edit, delete = picked[:N_EDIT], picked[N_EDIT:]
    dirs = sorted({os.path.dirname(p) for p in files})
    os.makedirs(save, exist_ok=True)
    manifest = {"edited": [], "deleted": [], "added": []}
    for k, p in enumerate(edit + delete):
        keep = os.path.join(save, f"{k:04d}")
        shutil.copy2(p, keep)
        manifest["edited" if k < N_EDIT else "deleted"].append([p, keep])
    for k, p in enumerate(edit):
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            # Overwrite 64 bytes at a seeded offset and append 100 bytes, so
            # the content, size and mtime all change.
            if size > 64:
                f.seek(rng.randrange(0, size - 64))
                f.write(seeded_bytes(seed, f"edit{k}", 64))
            f.seek(0, os.SEEK_END)
            f.write(seeded_bytes(seed, f"append{k}", 100))
    for p in delete:
        os.remove(p)
    for k in range(N_ADD):
        d = dirs[rng.randrange(len(dirs))]
        p = os.path.join(d, f"larder-bench-added-{k:03d}.bin")
        size = rng.randrange(1 << 10, 64 << 10)
        with open(p, "wb") as f:
            f.write(seeded_bytes(seed, f"add{k}", size))
        manifest["added"].append(p)
    with open(os.path.join(save, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    print(json.dumps({"edited": len(edit), "added": N_ADD, "deleted": len(delete)}))


def cmd_edit_revert(root, save):
    del root
    mf = os.path.join(save, "manifest.json")
    with open(mf) as f:
        manifest = json.load(f)
    for p in manifest["added"]:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
    for p, keep in manifest["edited"] + manifest["deleted"]:
        shutil.copy2(keep, p)
    shutil.rmtree(save)


def cmd_randfile(path, nbytes, seed):
    nbytes = int(nbytes)
    # A counter-mode stream of SHA-256 blocks would be slow for 1 GiB in pure
    # Python; instead expand a seeded random.Random stream in 1 MiB blocks.
    rng = random.Random(f"larder-bench-random-{seed}")
    with open(path, "wb") as f:
        left = nbytes
        while left:
            n = min(left, 1 << 20)
            f.write(rng.randbytes(n))
            left -= n


def cmd_randedit(path, seed):
    size = os.path.getsize(path)
    rng = random.Random(f"larder-bench-randedit-{seed}")
    with open(path, "r+b") as f:
        for k in range(100):
            off = rng.randrange(0, max(1, size - 1024))
            f.seek(off)
            f.write(rng.randbytes(1024))
    print(json.dumps({"edits": 100, "bytes": 1024}))


def main(a):
    if len(a) >= 4 and a[1] == "corpus":
        cmd_corpus(a[2], a[3], a[4:])
    elif len(a) == 3 and a[1] == "stat":
        cmd_stat(a[2])
    elif len(a) == 6 and a[1:3] == ["edit", "apply"]:
        cmd_edit_apply(a[3], a[4], a[5])
    elif len(a) == 5 and a[1:3] == ["edit", "revert"]:
        cmd_edit_revert(a[3], a[4])
    elif len(a) == 5 and a[1] == "randfile":
        cmd_randfile(a[2], a[3], a[4])
    elif len(a) == 4 and a[1] == "randedit":
        cmd_randedit(a[2], a[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
