"""Paired differences of two binaries' restores, round by round.

Usage: python3 paired.py OLD NEW FILE...   (FILE: lines of the restore
profile's ab.sh, `binary wall user system peak`; OLD and NEW are binary
names as printed). A round holds one restore by each binary; prints per
file the median of NEW's wall time less OLD's, and in how many rounds
NEW was faster."""
import statistics
import sys

old, new = sys.argv[1], sys.argv[2]
for f in sys.argv[3:]:
    rows = [line.split() for line in open(f) if line.strip()]
    a = [float(r[1]) for r in rows if r[0] == old]
    b = [float(r[1]) for r in rows if r[0] == new]
    d = [y - x for x, y in zip(a, b)]
    faster = sum(1 for x in d if x < 0)
    print(f"{f}: paired median {statistics.median(d):+.3f} s; {new} faster in {faster} of {len(d)}")
