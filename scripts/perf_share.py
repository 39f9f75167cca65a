#!/usr/bin/env python3
"""The share of a profile's samples by stage of larder's data path.

Reads `perf report --no-children --sort sym --stdio -g none` on stdin and
prints, per category, the share of the samples whose symbol matches it
(the first category that matches counts), then the rest and its largest
symbol. The categories cover a backup and a restore:

    perf report -i perf.data --no-children --sort sym --stdio -g none 2>/dev/null \\
        | python3 scripts/perf_share.py
"""
import re
import sys

CATEGORIES = [
    ("zstd (compress or decompress)", r"ZSTD_|HUF_|FSE_|HIST_|ZDICT|COVER"),
    ("chunk (FastCDC)", r"fastcdc|cut_gear"),
    ("hash (BLAKE3)", r"blake3"),
    ("encrypt or decrypt (ChaCha20-Poly1305)", r"chacha20|poly1305"),
    ("the kernel copy into written pages", r"copy_folio_from_iter"),
    ("the kernel copy of reads", r"_copy_to_iter"),
    ("key derivation (scrypt)", r"passphrase_key|scrypt|salsa"),
    ("memcpy, memmove, memset", r"memmove|memcpy|memset"),
    ("page faults, page clearing", r"page_fault|clear_page"),
    ("scheduler, futex, locks",
     r"finish_task_switch|futex|raw_spin_unlock|rwsem|sched_yield|osq_lock"),
]


def main():
    total = {name: 0.0 for name, _ in CATEGORIES}
    other, top = 0.0, (0.0, "")
    for line in sys.stdin:
        m = re.match(r"\s*([\d.]+)%\s+\[.\]\s+(.*)", line)
        if not m:
            continue
        share, symbol = float(m.group(1)), m.group(2).strip()
        for name, pattern in CATEGORIES:
            if re.search(pattern, symbol):
                total[name] += share
                break
        else:
            other += share
            top = max(top, (share, symbol))
    for name, _ in CATEGORIES:
        print(f"  {total[name]:6.2f} %  {name}")
    print(f"  {other:6.2f} %  the rest (its largest symbol: {top[1]}, {top[0]:.2f} %)")


if __name__ == "__main__":
    main()
