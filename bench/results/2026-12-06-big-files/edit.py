#!/usr/bin/env python3
"""edit.py FILE SEED [MODE]: 100 edits of 1 KiB at random offsets of FILE,
offsets and bytes drawn from a generator seeded by SEED (the edits of
incr.sh and chunkmin.sh, the same for every tool and variant).

MODE `overwrite` (the default) writes 1 KiB of random bytes in place at each
offset; the file keeps its size. MODE `insert` inserts 1 KiB of random bytes
at each offset instead, so every later byte moves: the file grows by
100 KiB, the shape of a tar archive or a dump with a few records added."""
import os
import random
import sys

path, seed = sys.argv[1], int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "overwrite"
rng = random.Random(seed)
size = os.path.getsize(path)
if mode == "overwrite":
    with open(path, "r+b") as f:
        for _ in range(100):
            f.seek(rng.randrange(0, size - 1024))
            f.write(rng.randbytes(1024))
elif mode == "insert":
    edits = sorted((rng.randrange(0, size), rng.randbytes(1024)) for _ in range(100))
    tmp = path + ".edit"
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        at = 0
        for off, data in edits:
            while at < off:
                block = src.read(min(8 << 20, off - at))
                dst.write(block)
                at += len(block)
            dst.write(data)
        while block := src.read(8 << 20):
            dst.write(block)
    st = os.stat(path)
    os.chmod(tmp, st.st_mode)
    os.replace(tmp, path)
else:
    sys.exit(f"edit.py: unknown mode {mode!r} (overwrite or insert)")
