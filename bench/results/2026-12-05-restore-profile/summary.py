#!/usr/bin/env python3
"""Per profile in profiles.txt and profiles-2.txt: the share of samples in the
restore's stages (decompress, hash, decrypt and the kernel's two copies),
and how busy the two cores were after the key derivation (the 0.1 s buckets
after the first three, which one core spends deriving the key, and before
the last, which is partial; 400 samples is both cores busy at 1999 Hz)."""
import re
import statistics

STAGES = ("decompress (zstd)", "hash (BLAKE3)", "decrypt (ChaCha20-Poly1305)",
          "the kernel copy into tmpfs pages", "the kernel copy of pack reads")
for name in ("profiles.txt", "profiles-2.txt"):
    cur, shares = None, {}
    for line in open(name):
        if line.startswith("profile "):
            cur, shares = line.split(":")[0], {}
        m = re.match(r"\s+([\d.]+) %\s+(.*)", line)
        if m and cur:
            shares[m.group(2)] = float(m.group(1))
        if line.strip().startswith("per 0.1 s:") and cur:
            b = [int(x) for x in line.split(":")[1].split()]
            busy = [x / 400 for x in b[3:-1]]
            stages = sum(shares[s] for s in STAGES)
            print(f"{name} {cur}: stages {stages:.1f} % of the samples, "
                  f"key derivation {shares['key derivation (scrypt)']:.1f} %; "
                  f"after it both cores busy {100 * statistics.mean(busy):.1f} % "
                  f"(median of buckets {100 * statistics.median(busy):.1f} %, lowest {100 * min(busy):.1f} %)")
