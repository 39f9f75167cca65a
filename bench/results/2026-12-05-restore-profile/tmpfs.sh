#!/bin/bash
# tmpfs.sh ROUNDS: the kernel's cost of 1000 MiB written into tmpfs
# (/dev/shm) by dd, into fresh pages (a new file), into pages fallocate
# made first, and over the same file's pages again (in place). System s.
F=/dev/shm/tmpfs-cost
for r in $(seq "$1"); do
  rm -f $F
  /usr/bin/time -f "fresh %S" dd if=/dev/zero of=$F bs=1M count=1000 status=none
  /usr/bin/time -f "in-place %S" dd if=/dev/zero of=$F bs=1M count=1000 conv=notrunc status=none
  rm -f $F
  /usr/bin/time -f "fallocate %S" fallocate -l 1000M $F
  /usr/bin/time -f "after-fallocate %S" dd if=/dev/zero of=$F bs=1M count=1000 conv=notrunc status=none
done 2>&1
rm -f $F
