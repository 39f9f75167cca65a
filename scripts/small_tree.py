#!/usr/bin/env python3
"""Makes a tree of N files of SIZE random bytes, 1,000 to a directory
(d00000/f0000000, ...), for the many-small-files measurements
(scripts/small_files.sh, scripts/small_peers.sh).

    scripts/small_tree.py DIR N SIZE
"""
import os
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for i in range(n):
        sub = os.path.join(d, "d%05d" % (i // 1000))
        if i % 1000 == 0:
            os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "f%07d" % i), "wb") as f:
            f.write(os.urandom(size))


if __name__ == "__main__":
    main()
