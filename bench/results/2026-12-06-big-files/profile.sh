#!/bin/bash
# profile.sh N BIN TREE: N rounds of a cold backup of TREE into a fresh
# repository (real key) and a restore of it onto tmpfs, each run once
# under `perf record -g` (999 Hz). Prints per run its time (GNU time,
# taken with perf attached) and the share of samples by category (symbol
# patterns below; the first that matches counts).
set -euo pipefail
N=${1:?usage: profile.sh N BIN TREE}; BIN=$2; TREE=$3
W=/var/tmp/big-prof; T=/dev/shm/big-prof
export LARDER_PASSWORD="big-files profile"
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
categorize() {
  perf report -i "$1" --no-children --sort sym --stdio -g none 2>/dev/null | python3 -c '
import re, sys
cats = [("zstd (compress or decompress)", r"ZSTD_|HUF_|FSE_|HIST_"),
        ("chunk (FastCDC)", r"fastcdc|cut_gear"),
        ("hash (BLAKE3)", r"blake3"),
        ("encrypt or decrypt (ChaCha20-Poly1305)", r"chacha20|poly1305"),
        ("the kernel copy into written pages", r"copy_folio_from_iter"),
        ("the kernel copy of reads", r"_copy_to_iter"),
        ("key derivation (scrypt)", r"passphrase_key|scrypt|salsa"),
        ("memcpy, memmove, memset", r"memmove|memcpy|memset"),
        ("page faults, page clearing", r"page_fault|clear_page"),
        ("scheduler, futex, locks", r"finish_task_switch|futex|raw_spin_unlock|rwsem|sched_yield|osq_lock")]
tot = {c: 0.0 for c, _ in cats}
other, top = 0.0, (0.0, "")
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+\[.\]\s+(.*)", line)
    if not m:
        continue
    p, s = float(m.group(1)), m.group(2).strip()
    for c, r in cats:
        if re.search(r, s):
            tot[c] += p
            break
    else:
        other += p
        top = max(top, (p, s))
for c, _ in cats:
    print(f"  {tot[c]:6.2f} %  {c}")
print(f"  {other:6.2f} %  the rest (its largest symbol: {top[1]}, {top[0]:.2f} %)")
'
}
for i in $(seq "$N"); do
  rm -rf "$W" "$T"; mkdir -p "$W"; "$BIN" -q init > /dev/null
  find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
  /usr/bin/time -f "cold backup $i (under perf): %e s wall, %U s user, %S s sys, %M KiB" \
    perf record -q -F 999 -g -o "$W/backup.data" "$BIN" -q backup "$TREE" > /dev/null
  categorize "$W/backup.data"
  /usr/bin/time -f "restore $i (under perf): %e s wall, %U s user, %S s sys, %M KiB" \
    perf record -q -F 999 -g -o "$W/restore.data" "$BIN" -q restore latest --target "$T" > /dev/null
  categorize "$W/restore.data"
  rm -rf "$T"
done
rm -rf "$W"
