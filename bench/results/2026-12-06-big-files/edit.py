#!/usr/bin/env python3
"""edit.py FILE SEED: overwrites 100 blocks of 1 KiB at random offsets of
FILE with random bytes, both drawn from a generator seeded by SEED (the
edits of incr.sh and chunkmin.sh, the same for every tool and variant)."""
import os
import random
import sys

path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
size = os.path.getsize(path)
with open(path, "r+b") as f:
    for _ in range(100):
        f.seek(rng.randrange(0, size - 1024))
        f.write(rng.randbytes(1024))
