#!/bin/bash
# profile.sh N BIN [TREE]: N profiles of a cold backup of TREE (default the
# usual tree's copy, /var/tmp/dt/corpus) into a fresh repository with the
# real key, each after reading the tree into the page cache and one
# backup timed without perf (into its own fresh repository). Prints, per
# profile, the plain backup's time, the share of samples by category
# (symbol patterns below) and the samples in each 0.1 s of the run (about
# 200 per busy core at 1999 Hz).
set -e
N=$1; BIN=$2; TREE=${3:-/var/tmp/dt/corpus}; W=/var/tmp/cold-prof
export LARDER_PASSWORD="larder-bench passphrase 5"
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
for i in $(seq "$N"); do
  rm -rf $W; mkdir -p $W; "$BIN" -q init >/dev/null
  tar -cf - "$TREE" 2>/dev/null | cat >/dev/null
  /usr/bin/time -f "plain $i: %e s wall, %U s user, %S s sys, %M KiB" \
    "$BIN" -q backup "$TREE" >/dev/null
  rm -rf $W; mkdir -p $W; "$BIN" -q init >/dev/null
  /usr/bin/time -f "profile $i: %e s wall, %U s user, %S s sys, %M KiB" \
    perf record -q -F 1999 -g -o $W/perf.data "$BIN" -q backup "$TREE" >/dev/null
  perf report -i $W/perf.data --no-children --sort sym --stdio -g none 2>/dev/null | python3 -c '
import re, sys
cats = [("compress (zstd)", r"ZSTD_|HUF_|FSE_|HIST_|ZDICT|COVER"),
        ("read (the kernel copy from the page cache)", r"_copy_to_iter|filemap_|ext4_file_read_iter"),
        ("hash (BLAKE3)", r"blake3"),
        ("chunk (FastCDC)", r"cut_gear"),
        ("encrypt (ChaCha20-Poly1305)", r"chacha20|poly1305|_mm256_permutevar"),
        ("key derivation (scrypt)", r"passphrase_key|scrypt|salsa"),
        ("memcpy, memmove", r"memmove|memcpy"),
        ("SQLite", r"sqlite3"),
        ("malloc, free", r"malloc|_int_free|cfree"),
        ("path lookup, stat", r"d_lookup|link_path_walk|getattr"),
        ("page faults", r"page_fault|clear_page"),
        ("scheduler, futex", r"finish_task_switch|futex|raw_spin_unlock_irq")]
tot = {c: 0.0 for c, _ in cats}
other, top = 0.0, (0.0, "")
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+\[.\]\s+(.*)", line)
    if not m:
        continue
    p, s = float(m.group(1)), m.group(2)
    for c, r in cats:
        if re.search(r, s):
            tot[c] += p
            break
    else:
        other += p
        top = max(top, (p, s))
for c, _ in cats:
    print(f"  {tot[c]:6.2f} %  {c}")
print(f"  {other:6.2f} %  the rest (its largest symbol: {top[1]}, {top[0]:.2f} %)")'
  perf script -i $W/perf.data -F time 2>/dev/null | awk '{gsub(":","",$1); if(!s) s=$1; c[int(($1-s)/0.1)]++} END {for (k in c) print k, c[k]}' \
    | sort -n | awk '{printf "%s ", $2} END {print ""}' | sed 's/^/  per 0.1 s: /'
done
rm -rf $W
