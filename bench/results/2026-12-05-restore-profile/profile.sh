#!/bin/bash
# profile.sh N BIN [TREE]: N profiles of a full restore onto tmpfs of
# TREE (default the second tree's copy, /var/tmp/src2), backed up once
# into a fresh repository with the real key. Before each profile, one
# restore is timed without perf. Prints, per profile:
# - the plain restore's time;
# - the share of samples by category (symbol patterns below);
# - the share of samples under each system call;
# - the samples in each 0.1 s of the run (about 200 per busy core at 1999 Hz).
# Then the system calls of one more restore (strace -c -f), and the
# tree's files and directories.
set -e
N=$1; BIN=$2; TREE=${3:-/var/tmp/src2}; W=/var/tmp/restore-prof; T=/dev/shm/restore-prof
export LARDER_PASSWORD="larder-bench passphrase 5"
export LARDER_REPOSITORY=$W/repo LARDER_CACHE_DIR=$W/cache LARDER_STATE_DIR=$W/state
rm -rf $W $T; mkdir -p $W; "$BIN" -q init >/dev/null
"$BIN" -q backup "$TREE" >/dev/null
for i in $(seq "$N"); do
  cat $W/repo/packs/*/* >/dev/null
  rm -rf $T
  /usr/bin/time -f "plain $i: %e s wall, %U s user, %S s sys, %M KiB" \
    "$BIN" -q restore latest --target $T >/dev/null
  rm -rf $T
  /usr/bin/time -f "profile $i: %e s wall, %U s user, %S s sys, %M KiB" \
    perf record -q -F 1999 -g -o $W/perf.data "$BIN" -q restore latest --target $T >/dev/null
  perf report -i $W/perf.data --no-children --sort sym --stdio -g none 2>/dev/null | python3 -c '
import re, sys
cats = [("decompress (zstd)", r"ZSTD_|HUF_|FSE_"),
        ("hash (BLAKE3)", r"blake3"),
        ("decrypt (ChaCha20-Poly1305)", r"chacha20|poly1305|_mm256_permutevar"),
        ("the kernel copy into tmpfs pages", r"copy_folio_from_iter"),
        ("the kernel copy of pack reads", r"_copy_to_iter"),
        ("key derivation (scrypt)", r"passphrase_key|scrypt|salsa"),
        ("memcpy, memmove, memset", r"memmove|memcpy|memset"),
        ("SQLite", r"sqlite3|pcache1"),
        ("malloc, free", r"malloc|_int_free|cfree|unlink_chunk"),
        ("path lookup", r"d_lookup|link_path_walk|path_lookupat|path_init|step_into"),
        ("page faults", r"page_fault|clear_page"),
        ("scheduler, futex, locks", r"finish_task_switch|futex|raw_spin_unlock|rwsem|sched_yield")]
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
  perf report -i $W/perf.data --no-children --sort dso --stdio -g none 2>/dev/null \
    | awk '/%/ && $1 ~ /%$/ {printf "  %7s in %s\n", $1, $2}'
  echo "  under system calls (samples with the call in their stack):"
  perf report -i $W/perf.data --children --sort sym --stdio -g none 2>/dev/null \
    | awk '$4 ~ /^__x64_sys_/ && $1+0 >= 0.5 {printf "    %7s %s\n", $1, substr($4, 11)}'
  perf script -i $W/perf.data -F time 2>/dev/null | awk '{gsub(":","",$1); if(!s) s=$1; c[int(($1-s)/0.1)]++} END {for (k in c) print k, c[k]}' \
    | sort -n | awk '{printf "%s ", $2} END {print ""}' | sed 's/^/  per 0.1 s: /'
  rm -rf $T
done
echo "system calls of one restore (strace -c -f; calls, errors):"
cat $W/repo/packs/*/* >/dev/null
strace -f -c -o $W/strace.txt "$BIN" -q restore latest --target $T >/dev/null
awk 'NR > 2 && $NF != "total" && $4+0 >= 1000 {e = (NF == 6) ? $5 : 0; printf "  %-12s %7d calls %6d errors\n", $NF, $4, e}' $W/strace.txt
echo "tree: $(find "$TREE" -type f | wc -l) files, $(find "$TREE" -type d | wc -l) directories, $(find "$TREE" -type f -links +1 | wc -l) with more than one link"
rm -rf $W $T
