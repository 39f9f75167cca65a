#!/usr/bin/env python3
"""blocks.py DIR BLOCK LEVEL: cuts every regular file under DIR into blocks
of BLOCK bytes (the last one shorter) and compresses each block on its
own with the zstd command line at LEVEL, as a repository compresses each
blob on its own. Prints: BLOCK LEVEL bytes-in bytes-out ratio. A block
that zstd does not make smaller counts at its own size (stored)."""
import os
import subprocess
import sys

root, block, level = sys.argv[1], int(sys.argv[2]), sys.argv[3]
total_in = total_out = 0
for d, _, names in os.walk(root):
    for name in sorted(names):
        p = os.path.join(d, name)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        with open(p, "rb") as f:
            data = f.read()
        for i in range(0, len(data), block):
            b = data[i:i + block]
            out = subprocess.run(["zstd", "-q", "-c", f"-{level}"], input=b,
                                 capture_output=True, check=True).stdout
            total_in += len(b)
            total_out += min(len(out), len(b))
print(block, level, total_in, total_out, round(total_out / total_in, 4))
