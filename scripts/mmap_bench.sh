#!/usr/bin/env bash
# memmap2 against read(2), for issue 15's "use it where a measurement shows
# it helps": reads and hashes the same files both ways, warm page cache,
# two separate runs of examples/mmap_read.rs, and writes
#     OUT/samples.jsonl   every sample (one JSON line per run, set and mode)
#     OUT/raw.sha256      SHA-256 of samples.jsonl
#     OUT/table.md        made from samples.jsonl alone
#
#     scripts/mmap_bench.sh TREE RANDOM_FILE PACKS_DIR
#
# TREE: a directory of many files (what a backup reads); RANDOM_FILE: one
# large file; PACKS_DIR: a local repository's packs/ (what a restore or
# `check --read-data` reads). OUT defaults to bench/results/<date>-mmap.
set -euo pipefail
cd "$(dirname "$0")/.."
TREE=${1:?usage: scripts/mmap_bench.sh TREE RANDOM_FILE PACKS_DIR}
RAND=${2:?usage: scripts/mmap_bench.sh TREE RANDOM_FILE PACKS_DIR}
PACKS=${3:?usage: scripts/mmap_bench.sh TREE RANDOM_FILE PACKS_DIR}
OUT=${MMAP_OUT:-bench/results/$(date -u +%Y-%m-%d)-mmap}
ROUNDS=${MMAP_ROUNDS:-5}
cargo build --release --quiet --example mmap_read
BIN=${CARGO_TARGET_DIR:-target}/release/examples/mmap_read
mkdir -p "$OUT"
for run in 1 2; do
    "$BIN" --rounds "$ROUNDS" corpus="$TREE" random="$RAND" packs="$PACKS" |
        sed "s/^{/{\"run\":$run,/"
    sleep 5
done > "$OUT/samples.jsonl"
(cd "$OUT" && sha256sum samples.jsonl > raw.sha256)
python3 - "$OUT" "$(nproc)" "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" <<'EOF'
import json, sys
out, nproc, cpu = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(f"{out}/samples.jsonl")]
sets = []
for r in rows:
    if r["set"] not in sets:
        sets.append(r["set"])
def med(s, mode, run):
    return next(r for r in rows if r["set"] == s and r["mode"] == mode and r["run"] == run)
lines = [
    "# memmap2 against read(2) (examples/mmap_read.rs)",
    "",
    f"Machine: {nproc} cores, {cpu}. Warm page cache; every byte hashed with BLAKE3 "
    "(the first work a backup or `check --read-data` does on what it reads); "
    "`read`: one reused 4 MiB buffer; `mmap`: the whole file mapped. Median MiB/s "
    "of the rounds in each of two separate runs. Verdict: mmap helps only if it is "
    "at least 10 % faster in both runs.",
    "",
    "| files | count, bytes | read (run 1 / run 2) | mmap (run 1 / run 2) | mmap / read | verdict |",
    "|---|---|---|---|---|---|",
]
for s in sets:
    r1, r2 = med(s, "read", 1), med(s, "read", 2)
    m1, m2 = med(s, "mmap", 1), med(s, "mmap", 2)
    q1, q2 = m1["median_mib_s"] / r1["median_mib_s"], m2["median_mib_s"] / r2["median_mib_s"]
    verdict = "**helps**" if min(q1, q2) >= 1.1 else "no gain: not used"
    lines.append(
        f"| {s} | {r1['files']} files, {r1['bytes'] / 2**20:.1f} MiB "
        f"| {r1['median_mib_s']:.0f} / {r2['median_mib_s']:.0f} MiB/s "
        f"| {m1['median_mib_s']:.0f} / {m2['median_mib_s']:.0f} MiB/s "
        f"| {q1:.2f} / {q2:.2f} | {verdict} |"
    )
lines += ["", "Raw samples: `samples.jsonl` (SHA-256 in `raw.sha256`)."]
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
