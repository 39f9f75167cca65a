#!/usr/bin/env bash
# larder vs restic vs rustic vs borg, side by side on the same data (issues 5
# and 15).
#
# One command on a fresh Debian machine (as root, or with sudo for apt):
#     scripts/bench.sh
# installs restic, borgbackup, GNU time, zstd and python3 from Debian's
# packages, rustic with `cargo install rustic-rs --locked --no-default-features`
# (once, cached in ~/.cache/larder-bench/rustic), builds larder (release) and
# the examples it needs, builds the corpus from
# what is on the machine (the Rust toolchain's sysroot with its docs, plus
# /usr/share/doc) and a seeded random file, runs every tool on every row in
# rotating order after a warm-up, measures each pipeline stage alone (beside
# larder's cold backups, with a `tar | zstd` each: the cold backup's two
# limits) and the flatness of larder with a synthetic 10M-blob index, and
# writes
#     bench/results/<date>/raw.csv     every sample (and the machine, versions)
#     bench/results/<date>/raw.sha256  SHA-256 of raw.csv
#     bench/results/<date>/table.md    scripts/bench_table.py raw.csv
#
# Environment:
#   BENCH_RUNS=3          runs per tool
#   BENCH_REPEAT=3        times the read-only rows of the main part
#                         (`snapshots`, diff, restore onto tmpfs) are timed
#                         in each run; the run's figure is their median
#   BENCH_COLD_REPEAT=$BENCH_REPEAT   times the cold backup (each into a fresh
#                         repository), its reference `tar | zstd` and the
#                         stages alone are timed in each run; the run's
#                         figure is their median
#   BENCH_SMALL=1         development run: ~50 MiB corpus, 64 MiB random file,
#                         100k synthetic blobs (the table says so)
#   BENCH_DIR=/var/tmp/larder-bench   work area on disk (repositories, corpus,
#                         restores onto disk); needs ~3x the corpus free
#   BENCH_SHM=/dev/shm/larder-bench   tmpfs restore target
#   BENCH_OUT=bench/results/<UTC date>  (BENCH_SMALL: target/bench-small/<date>)
#   BENCH_SEED=5          seed of the edits and of the random file
#   BENCH_TOOLS="larder restic rustic borg"
#   BENCH_RUSTIC_ROOT=~/.cache/larder-bench/rustic   rustic's install root
#                         (bin/rustic; installed there when missing)
#   BENCH_SOURCES="<sysroot> /usr/share/doc"   trees copied into the corpus
#   BENCH_PAIR="restic rustic"   peers whose cold backup and restore onto
#                         tmpfs are also timed right beside each of larder's
#                         (empty: none)
#   BENCH_SYNTH_SEGMENTS=2442 BENCH_SYNTH_BLOBS=4096   synthetic index size: segments
#                         shaped as larder writes them (64 packs of 64 blobs)
#   BENCH_SKIP_INSTALL=1  do not run apt-get
#   BENCH_KEEP=1          keep BENCH_DIR afterwards
#   BENCH_PARTS="main prune flat snaps comp s3"   which sections run (main:
#                         the daily rows, check --read-data, one-file restore,
#                         the reference pipelines and stages; prune: 30
#                         snapshots then forget --keep-last 3 + prune; flat:
#                         the synthetic index; snaps: 10 vs 1,000 snapshots;
#                         comp: compression levels on a subset; s3: larder
#                         and restic against moto's S3 server,
#                         LARDER_MOTO_SERVER or a venv it makes, see .ci/run)
#   BENCH_PRUNE_SNAPS=30  snapshots made before the prune row
#   BENCH_MANY_SNAPS=1000 snapshots of the big repository in part snaps
#   BENCH_COMP_MIB=256    size of the compression rows' subset (BENCH_SMALL: 16)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${BENCH_RUNS:-3}
REPEAT=${BENCH_REPEAT:-3}
COLD_REPEAT=${BENCH_COLD_REPEAT:-$REPEAT}
SMALL=${BENCH_SMALL:-0}
SEED=${BENCH_SEED:-5}
read -r -a TOOLS <<< "${BENCH_TOOLS:-larder restic rustic borg}"
W=${BENCH_DIR:-/var/tmp/larder-bench}
SHM=${BENCH_SHM:-/dev/shm/larder-bench}
DATE=$(date -u +%Y-%m-%d)
if [ "$SMALL" = 1 ]; then
    OUT=${BENCH_OUT:-target/bench-small/$DATE}
    BUDGET=$((50 << 20))
    RAND_BYTES=$((64 << 20))
    SYN_SEG=${BENCH_SYNTH_SEGMENTS:-25}
    SYN_BLOBS=${BENCH_SYNTH_BLOBS:-4096}
    COMP_MIB=${BENCH_COMP_MIB:-16}
else
    OUT=${BENCH_OUT:-bench/results/$DATE}
    BUDGET=0
    RAND_BYTES=$((1 << 30))
    SYN_SEG=${BENCH_SYNTH_SEGMENTS:-2442}
    SYN_BLOBS=${BENCH_SYNTH_BLOBS:-4096}
    COMP_MIB=${BENCH_COMP_MIB:-256}
fi
PASS="larder-bench passphrase $SEED"
PARTS=" ${BENCH_PARTS:-main prune flat snaps comp s3} "
PRUNE_SNAPS=${BENCH_PRUNE_SNAPS:-30}
MANY_SNAPS=${BENCH_MANY_SNAPS:-1000}
part() { [[ $PARTS == *" $1 "* ]]; }
has_tool() { [[ " ${TOOLS[*]} " == *" $1 "* ]]; }
say() { printf '\n== %s\n' "$*"; }
# The peers timed beside larder's cold backups and restores (see
# peers_cold_beside), among the tools of this run.
PAIR=()
for p in ${BENCH_PAIR-restic rustic}; do if has_tool "$p"; then PAIR+=("$p"); fi; done

# ---------------------------------------------------------------- install
if [ "${BENCH_SKIP_INSTALL:-0}" != 1 ]; then
    say "installing restic, borgbackup, time, zstd, python3 from Debian's packages"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        restic borgbackup time python3 coreutils zstd tar >/dev/null
fi
for c in restic borg python3 /usr/bin/time cargo zstd tar; do
    command -v "$c" >/dev/null || { echo "bench.sh: $c is missing" >&2; exit 1; }
done
# rustic (restic's format in Rust): built once from crates.io, cached
# outside the work tree, skipped when already there.
RUSTIC_ROOT=${BENCH_RUSTIC_ROOT:-$HOME/.cache/larder-bench/rustic}
RUSTIC=$RUSTIC_ROOT/bin/rustic
if has_tool rustic && [ ! -x "$RUSTIC" ]; then
    say "installing rustic into $RUSTIC_ROOT (cargo install rustic-rs --locked --no-default-features)"
    nice -n 10 cargo install rustic-rs --locked --no-default-features --root "$RUSTIC_ROOT"
fi

say "building larder and the benchmark examples (release)"
nice -n 10 cargo build --release --quiet --bin larder --example stages --example synth_index --example age_keygen
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
LARDER=$TARGET_DIR/release/larder
STAGES=$TARGET_DIR/release/examples/stages
SYNTH=$TARGET_DIR/release/examples/synth_index
AGE_KEYGEN=$TARGET_DIR/release/examples/age_keygen

# ---------------------------------------------------------------- setup
rm -rf "$W" "$SHM"
mkdir -p "$W" "$SHM" "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$W" "$SHM"' EXIT
RAW=$OUT/raw.csv
T=$W/tmp
mkdir -p "$T"
echo "kind,name,tool,run,wall_s,rss_kib,bytes,value" > "$RAW"

# rec KIND NAME TOOL RUN WALL RSS BYTES VALUE: one CSV row (quoted properly).
rec() {
    python3 -c 'import csv,sys; csv.writer(open(sys.argv[1],"a",newline=""),lineterminator="\n").writerow(sys.argv[2:])' \
        "$RAW" "$@"
}
meta() { rec meta "$1" "" "" "" "" "" "$2"; }

SOURCES=${BENCH_SOURCES:-"$(rustc --print sysroot) /usr/share/doc"}
CORPUS=$W/corpus
say "building the corpus from: $SOURCES"
# shellcheck disable=SC2086
python3 scripts/bench_data.py corpus "$CORPUS" "$BUDGET" $SOURCES > "$T/corpus.json"
CORPUS_FILES=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["files"])' "$T/corpus.json")
CORPUS_BYTES=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bytes"])' "$T/corpus.json")
echo "corpus: $CORPUS_FILES files, $CORPUS_BYTES bytes ($((CORPUS_BYTES >> 20)) MiB) in $CORPUS"
# The small file of the one-file restores: the first regular file of 1-16
# KiB in the corpus's sorted walk.
ONE_FILE=$(python3 -c '
import os, sys
for d, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    for f in sorted(files):
        p = os.path.join(d, f)
        if not os.path.islink(p) and 1024 <= os.path.getsize(p) <= 16384:
            print(p); sys.exit(0)
sys.exit("no file of 1-16 KiB in the corpus")' "$CORPUS")
ONE_BYTES=$(stat -c %s "$ONE_FILE")
echo "one-file restores: $ONE_FILE ($ONE_BYTES bytes)"
mkdir -p "$W/rand"
RAND_PRISTINE=$W/random.pristine
python3 scripts/bench_data.py randfile "$RAND_PRISTINE" "$RAND_BYTES" "$SEED"
echo "random file: $RAND_BYTES bytes, sha256 $(sha256sum "$RAND_PRISTINE" | cut -c1-16)..."

# ---------------------------------------------------------------- metadata
meta date "$DATE"
meta small "$SMALL"
meta runs "$RUNS"
meta repeat "$REPEAT"
meta cold_repeat "$COLD_REPEAT"
meta seed "$SEED"
meta nproc "$(nproc)"
meta cpu_model "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
meta mem_total "$(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
meta kernel "$(uname -r)"
meta disk_primed 1
meta disk_fs "$(df -PT "$W" | awk 'NR==2 {print $2}') ($(df -P "$W" | awk 'NR==2 {print $1}'))"
meta version_larder "$("$LARDER" --version) (git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src 2>/dev/null || echo ', src modified'))"
meta version_restic "$(restic version | head -1)"
has_tool rustic && meta version_rustic "$("$RUSTIC" --version | head -1)"
meta version_borg "$(borg --version)"
meta version_rustc "$(rustc --version)"
meta corpus_sources "$SOURCES"
meta corpus_files "$CORPUS_FILES"
meta corpus_bytes "$CORPUS_BYTES"
meta random_bytes "$RAND_BYTES"
meta one_file "${ONE_FILE#"$CORPUS"/} ($ONE_BYTES bytes)"
meta random_generator "python3 random.Random seeded, scripts/bench_data.py randfile"
meta pair_tools "${PAIR[*]}"

# ---------------------------------------------------------------- tools
# Each tool: a repository under $W/<tool>-<tag>, its cache beside it.
use_repo() { # TOOL TAG
    local t=$1 tag=$2
    case $t in
        larder)
            export LARDER_REPOSITORY=$W/repo-larder-$tag LARDER_CACHE_DIR=$W/cache-larder-$tag LARDER_STATE_DIR=$W/state-larder-$tag
            export LARDER_PASSWORD=$PASS ;;
        restic)
            export RESTIC_REPOSITORY=$W/repo-restic-$tag RESTIC_CACHE_DIR=$W/cache-restic-$tag
            export RESTIC_PASSWORD=$PASS ;;
        rustic)
            # --cache-dir on every command line (RX), so the cache is
            # beside the repository whatever rustic's environment names.
            export RUSTIC_REPOSITORY=$W/repo-rustic-$tag RUSTIC_PASSWORD=$PASS
            RX=("$RUSTIC" --no-progress --cache-dir "$W/cache-rustic-$tag") ;;
        borg)
            export BORG_REPO=$W/repo-borg-$tag BORG_BASE_DIR=$W/cache-borg-$tag
            export BORG_PASSPHRASE=$PASS ;;
    esac
}
repo_dir() { echo "$W/repo-$1-$2"; }
drop_repo() { rm -rf "$W/repo-$1-$2" "$W/cache-$1-$2"; }

tool_init() {
    case $1 in
        larder) "$LARDER" -q init ;;
        restic) restic -q init --repository-version 2 ;;
        rustic) "${RX[@]}" init ;;
        borg) borg init -e repokey-blake2 ;;
    esac >"$T/init.log" 2>&1 || { cat "$T/init.log" >&2; return 1; }
}
# The command line of each operation, in the array CMD.
cmd_backup() { # TOOL NAME PATH
    case $1 in
        larder) CMD=("$LARDER" -q backup "$3") ;;
        restic) CMD=(restic -q --compression auto backup "$3") ;;
        rustic) CMD=("${RX[@]}" backup "$3") ;;
        borg) CMD=(borg create --compression lz4 "::$2" "$3") ;;
    esac
}
cmd_snapshots() {
    case $1 in
        larder) CMD=("$LARDER" snapshots) ;;
        restic) CMD=(restic snapshots) ;;
        rustic) CMD=("${RX[@]}" snapshots) ;;
        borg) CMD=(borg list) ;;
    esac
}
# An open that reads the index: `find` in a repository with no snapshot
# brings the index cache up to date under its reader's lock and does
# nothing else (`snapshots` never reads the index, so it cannot show its
# cost; `stats` turns the index into rows).
cmd_open_index() { CMD=("$LARDER" find no-such-name); }
cmd_diff() { # TOOL A B (ids or archive names)
    case $1 in
        larder) CMD=("$LARDER" diff "$2" "$3") ;;
        restic) CMD=(restic diff "$2" "$3") ;;
        rustic) CMD=("${RX[@]}" diff "$2" "$3") ;;
        borg) CMD=(borg diff "::$2" "$3") ;;
    esac
}
cmd_restore() { # TOOL SNAP TARGET
    case $1 in
        larder) CMD=("$LARDER" -q restore "$2" --target "$3") ;;
        restic) CMD=(restic -q restore "$2" --target "$3") ;;
        rustic) CMD=("${RX[@]}" restore "$2" "$3") ;;
        borg) CMD=(env -C "$3" borg extract "::$2") ;;
    esac
}
# One file (absolute path FILE in the snapshot) of snapshot SNAP into TARGET.
cmd_restore_one() { # TOOL SNAP TARGET FILE
    case $1 in
        larder) CMD=("$LARDER" -q restore "$2" --target "$3" --include "$4") ;;
        restic) CMD=(restic -q restore "$2" --target "$3" --include "$4") ;;
        rustic) CMD=("${RX[@]}" restore "$2:$4" "$3/$(basename "$4")") ;;
        borg) CMD=(env -C "$3" borg extract "::$2" "${4#/}") ;;
    esac
}
# Reads and verifies every byte of the repository.
cmd_check_read() {
    case $1 in
        larder) CMD=("$LARDER" -q check --read-data) ;;
        restic) CMD=(restic -q check --read-data) ;;
        rustic) CMD=("${RX[@]}" check --read-data) ;;
        borg) CMD=(borg check --verify-data) ;;
    esac
}
# Snapshot ids in time order (borg: archive names).
snap_ids() {
    case $1 in
        larder) "$LARDER" --json snapshots | python3 -c 'import json,sys; [print(s["id"]) for s in sorted(json.load(sys.stdin), key=lambda s: s["time"])]' ;;
        restic) restic snapshots --json | python3 -c 'import json,sys; [print(s["id"]) for s in sorted(json.load(sys.stdin), key=lambda s: s["time"])]' ;;
        # rustic groups its snapshots: every object with an id, a time and
        # a tree, wherever it is nested, is one.
        rustic) "${RX[@]}" snapshots --json 2>/dev/null | python3 -c '
import json, sys
def walk(x):
    if isinstance(x, dict):
        if "id" in x and "time" in x and "tree" in x:
            yield x
        else:
            for v in x.values():
                yield from walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk(v)
[print(s["id"]) for s in sorted(walk(json.load(sys.stdin)), key=lambda s: s["time"])]' ;;
        borg) borg list --short ;;
    esac
}

# measure NAME TOOL RUN BYTES VALUE [--sync]: runs "${CMD[@]}" under GNU time;
# wall time from the shell (microseconds), peak RSS from %M (KiB). With
# --sync the timed command ends with `sync` (restores onto disk, cp -a).
measure() {
    local name=$1 tool=$2 run=$3 bytes=$4 value=$5 dosync=${6:-}
    sync
    local t0 t1 rc=0
    t0=$EPOCHREALTIME
    if [ "$dosync" = --sync ]; then
        /usr/bin/time -f '%M' -o "$T/time" sh -c '"$@" && sync' sh "${CMD[@]}" >"$T/out" 2>"$T/err" || rc=$?
    else
        /usr/bin/time -f '%M' -o "$T/time" "${CMD[@]}" >"$T/out" 2>"$T/err" || rc=$?
    fi
    t1=$EPOCHREALTIME
    # borg exits 1 for warnings only; anything else is a failed measurement.
    if [ "$rc" != 0 ] && ! { [ "$tool" = borg ] && [ "$rc" = 1 ]; }; then
        echo "bench.sh: $name/$tool failed (exit $rc): ${CMD[*]}" >&2
        tail -20 "$T/err" >&2
        exit 1
    fi
    local rss wall
    # AFTER names a function that prints "BYTES VALUE" measured after the
    # command (the S3 rows: bytes moved and requests made).
    if [ -n "${AFTER:-}" ]; then read -r bytes value < <("$AFTER"); fi
    rss=$(grep -E '^[0-9]+$' "$T/time" | tail -1)
    wall=$(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.6f}")' "$t0" "$t1")
    rec sample "$name" "$tool" "$run" "$wall" "$rss" "$bytes" "$value"
    printf '  %-18s %-7s run %s: %8.3f s  %7d KiB\n' "$name" "$tool" "$run" "$wall" "$rss"
}
size_of() { du -sb "$1" | cut -f1; }

# cp_beside RUN: `cp -a` of the tree onto disk, then `sync`, as the row
# cp_disk_pair (the restore onto disk's floor, timed beside it).
cp_beside() {
    rm -rf "$W/cppair"; mkdir -p "$W/cppair"
    CMD=(cp -a "$CORPUS" "$W/cppair/"); measure cp_disk_pair cp "$1" "$CORPUS_BYTES" "" --sync
    rm -rf "$W/cppair"
}

# prime_disk: an untimed `cp -a` of the tree onto disk, then `sync`. This
# disk writes a burst fast after a rest and then slows down: each command
# of a back-to-back pair was faster when it wrote first (2026-12-04-b to
# -k, medians: larder 7.01 s first, 9.26 s second; `cp -a` 10.35 s first,
# 12.27 s second), so the verdict followed the order. Spending the burst
# before every restore onto disk times each command, and its `cp -a`, at
# the disk's sustained speed.
prime_disk() {
    rm -rf "$W/prime"; mkdir -p "$W/prime"
    cp -a "$CORPUS" "$W/prime/"
    rm -rf "$W/prime"; sync
}

# stages_once RUN: each stage of a cold backup alone, one core, the same
# data (rows stage_*: the machine's stage limit).
stages_once() {
    "$STAGES" --level "$ZSTD_LEVEL" "$CORPUS" > "$T/stages.json"
    python3 -c 'import json,sys; [print(s["stage"], s["seconds"], s["bytes"]) for s in map(json.loads, open(sys.argv[1]))]' \
        "$T/stages.json" > "$T/stages.txt"
    local stage secs bytes
    while read -r stage secs bytes; do
        rec sample "stage_$stage" stages "$1" "$secs" "" "$bytes" ""
        printf '  stage %-10s run %s: %8.3f s\n' "$stage" "$1" "$secs"
    done < "$T/stages.txt"
}

# cold_limits_beside RUN: the cold backup's two limits, timed beside one of
# larder's cold backups (before it or after it in turn): `tar | zstd` as the
# row ref_tar_zstd_pair, and the stages alone. Timed at the start and the
# end of each run instead, minutes away, they gave verdicts that moved with
# the minute: 1.11-1.52x the pipeline and 69-106 % of the stage limit over
# 2026-12-04-g..-j.
cold_limits_beside() {
    warm_corpus
    # shellcheck disable=SC2016
    CMD=(sh -c 'tar -C "$1" -cf - "$2" | zstd -3 -T2 -c > /dev/null' sh "$(dirname "$CORPUS")" "$(basename "$CORPUS")")
    measure ref_tar_zstd_pair ref "$1" "$CORPUS_BYTES" ""
    stages_once "$1"
}

# untar_beside RUN: `zstd -dc ARCHIVE | tar -x` onto tmpfs as the row
# ref_untar_shm_pair (the restore onto tmpfs's limit, timed beside it).
untar_beside() {
    ensure_archive
    cat "$ARCHIVE" > /dev/null
    rm -rf "$SHM/untar"; mkdir -p "$SHM/untar"
    # shellcheck disable=SC2016
    CMD=(sh -c 'zstd -dc "$1" | tar -x -C "$2"' sh "$ARCHIVE" "$SHM/untar")
    measure ref_untar_shm_pair ref "$1" "$CORPUS_BYTES" ""
    rm -rf "$SHM/untar"
}

# Peers timed beside larder's cold backups and restores onto tmpfs (rows
# cold_backup_pair and restore_shm_pair, under the peer's name, into and
# from a repository of their own, tag "pair"). Each tool's slot is minutes
# from the others', and this shared machine has slow stretches that last
# about a slot: in 2026-12-07-c larder's whole slot of run 2 was slow, its
# cold backups taking 2.44-2.68 s against 1.88-2.00 s in run 1 and the
# `tar | zstd` timed beside them slow by as much, while the peers' slots
# held. A peer's sample seconds from larder's meets the same machine, so
# the targets against restic and rustic are judged on these pairs; the
# slot figures stay in the table beside them. PAIR is set at the top.
declare -A PAIR_SNAP
peers_cold_beside() { # RUN
    local p
    for p in "${PAIR[@]}"; do
        use_repo "$p" pair
        drop_repo "$p" pair
        tool_init "$p"
        warm_corpus
        cmd_backup "$p" s1 "$CORPUS"; measure cold_backup_pair "$p" "$1" "$CORPUS_BYTES" ""
        PAIR_SNAP[$p]=$(snap_ids "$p" | tail -1)
    done
    use_repo larder main
}
peers_restore_beside() { # RUN
    local p
    for p in "${PAIR[@]}"; do
        use_repo "$p" pair
        rm -rf "$SHM/pair"; mkdir -p "$SHM/pair"
        cmd_restore "$p" "${PAIR_SNAP[$p]}" "$SHM/pair"; measure restore_shm_pair "$p" "$1" "$CORPUS_BYTES" ""
        rm -rf "$SHM/pair"
    done
    use_repo larder main
}
peers_drop() { local p; for p in "${PAIR[@]}"; do drop_repo "$p" pair; done; }

# Reads the corpus into the page cache. Done before every cold backup, not
# only once: this machine runs DAMON reclaim (kdamond), which drops page
# cache left idle for a few minutes, so whichever tool came last in a run
# would otherwise read the tree from disk.
warm_corpus() { find "$CORPUS" -type f -print0 | xargs -0 cat > /dev/null; }

# check_one TOOL DIR: DIR holds exactly one file, the small file's copy.
check_one() {
    local got
    mapfile -t got < <(find "$2" -type f)
    if [ "${#got[@]}" != 1 ] || ! cmp -s "${got[0]}" "$ONE_FILE"; then
        echo "bench.sh: $1's one-file restore gave ${#got[@]} files: ${got[*]:0:3}" >&2; exit 1
    fi
}

# One tool's slot in one run: the whole daily sequence on a fresh repository.
slot() { # TOOL RUN
    local t=$1 r=$2
    use_repo "$t" main
    # The cold backup is timed COLD_REPEAT times, each into a fresh
    # repository; the last one goes on to the rest of the sequence.
    local k
    for ((k = 1; k <= COLD_REPEAT; k++)); do
        drop_repo "$t" main
        tool_init "$t"
        # The pipeline and the peers on either side of it, in turn.
        if [ "$t" = larder ] && (((r + k) % 2 == 0)); then cold_limits_beside "$r"; fi
        if [ "$t" = larder ] && (((r + k) % 2 == 1)); then peers_cold_beside "$r"; fi
        warm_corpus
        cmd_backup "$t" s1 "$CORPUS"; measure cold_backup "$t" "$r" "$CORPUS_BYTES" ""
        if [ "$t" = larder ] && (((r + k) % 2 == 1)); then cold_limits_beside "$r"; fi
        if [ "$t" = larder ] && (((r + k) % 2 == 0)); then peers_cold_beside "$r"; fi
    done
    local rsize
    rsize=$(size_of "$(repo_dir "$t" main)")
    rec sample repo_size "$t" "$r" "" "" "$rsize" ""
    # One small file out of the first snapshot, then every byte verified.
    mapfile -t ids < <(snap_ids "$t")
    rm -rf "$SHM/restore"; mkdir -p "$SHM/restore"
    cmd_restore_one "$t" "${ids[0]}" "$SHM/restore" "$ONE_FILE"; measure restore_one "$t" "$r" "$ONE_BYTES" ""
    check_one "$t" "$SHM/restore"
    rm -rf "$SHM/restore"
    cmd_check_read "$t"; measure check_read "$t" "$r" "$rsize" ""
    cmd_backup "$t" s2 "$CORPUS"; measure second_backup "$t" "$r" "$CORPUS_BYTES" ""
    # The open cost is taken out of every "work" figure: at least twice.
    for _ in $(seq "$((REPEAT < 2 ? 2 : REPEAT))"); do
        cmd_snapshots "$t"; measure snapshots "$t" "$r" "" ""
    done
    python3 scripts/bench_data.py edit apply "$CORPUS" "$W/edit-save" "$SEED" >/dev/null
    cmd_backup "$t" s3 "$CORPUS"; measure incr_backup "$t" "$r" "" ""
    python3 scripts/bench_data.py edit revert "$CORPUS" "$W/edit-save"
    mapfile -t ids < <(snap_ids "$t")
    [ "${#ids[@]}" = 3 ] || { echo "bench.sh: $t has ${#ids[@]} snapshots, expected 3" >&2; exit 1; }
    for _ in $(seq "$REPEAT"); do
        cmd_diff "$t" "${ids[1]}" "${ids[2]}"; measure diff "$t" "$r" "" ""
    done
    # larder's restore onto tmpfs is judged against the pipeline timed
    # right beside each of its samples (before it and after it in turn):
    # the pipeline's single sample in the reference rows is minutes away,
    # and it varied 0.97-4.02 s from 2026-12-04-b to 2026-12-04-f.
    local k
    for ((k = 1; k <= REPEAT; k++)); do
        if [ "$t" = larder ] && (((r + k) % 2 == 0)); then untar_beside "$r"; fi
        if [ "$t" = larder ] && (((r + k) % 2 == 1)); then peers_restore_beside "$r"; fi
        rm -rf "$SHM/restore"; mkdir -p "$SHM/restore"
        cmd_restore "$t" "${ids[0]}" "$SHM/restore"; measure restore_shm "$t" "$r" "$CORPUS_BYTES" ""
        if [ "$t" = larder ] && (((r + k) % 2 == 1)); then untar_beside "$r"; fi
        if [ "$t" = larder ] && (((r + k) % 2 == 0)); then peers_restore_beside "$r"; fi
    done
    if [ "$t" = larder ]; then peers_drop; fi
    rm -rf "$SHM/restore"
    rm -rf "$W/restore"; mkdir -p "$W/restore"
    # larder's restore onto disk is judged against a `cp -a` timed right
    # beside it (first in even runs, after it in odd ones): this disk's
    # speed drifts over minutes, and the reference row's copy is minutes
    # away. Every tool's restore onto disk starts with the burst spent.
    prime_disk
    if [ "$t" = larder ] && ((r % 2 == 0)); then cp_beside "$r"; fi
    cmd_restore "$t" "${ids[0]}" "$W/restore"; measure restore_disk "$t" "$r" "$CORPUS_BYTES" "" --sync
    rm -rf "$W/restore"
    if [ "$t" = larder ] && ((r % 2 == 1)); then cp_beside "$r"; fi
    drop_repo "$t" main

    # The random file: bytes added by 100 scattered 1 KiB edits.
    use_repo "$t" rand
    drop_repo "$t" rand
    tool_init "$t"
    cp "$RAND_PRISTINE" "$W/rand/random.bin"
    cmd_backup "$t" r1 "$W/rand"; measure rand_backup "$t" "$r" "$RAND_BYTES" ""
    local s1 s2
    s1=$(size_of "$(repo_dir "$t" rand)")
    python3 scripts/bench_data.py randedit "$W/rand/random.bin" "$SEED$r" >/dev/null
    cmd_backup "$t" r2 "$W/rand"; measure rand_edit_backup "$t" "$r" "$RAND_BYTES" ""
    s2=$(size_of "$(repo_dir "$t" rand)")
    rec sample rand_added "$t" "$r" "" "" "$((s2 - s1))" ""
    echo "  rand_added         $t run $r: $((s2 - s1)) bytes"
    drop_repo "$t" rand
}

# The prune row: PRUNE_SNAPS snapshots of the corpus, each with a different
# edit set (500 edited, 100 added, 100 deleted files; the same for every
# tool), then forget all but the last 3 and free their space, timed as one
# step: larder `forget --keep-last 3 --prune --keep-delete 0s` (delete at
# once, as the others do; the default waits a day), restic `forget
# --keep-last 3 --prune`, borg `prune --keep-last 3` then `compact`.
cmd_forget_prune() {
    case $1 in
        larder) CMD=("$LARDER" -q forget --keep-last 3 --prune --keep-delete 0s) ;;
        restic) CMD=(restic -q forget --keep-last 3 --prune) ;;
        rustic) CMD=("${RX[@]}" forget --keep-last 3 --prune --instant-delete) ;;
        borg) CMD=(sh -c 'borg prune --keep-last 3 && borg compact') ;;
    esac
}
prune_slot() { # TOOL RUN
    local t=$1 r=$2 i
    use_repo "$t" prune
    drop_repo "$t" prune
    tool_init "$t"
    for ((i = 1; i <= PRUNE_SNAPS; i++)); do
        python3 scripts/bench_data.py edit apply "$CORPUS" "$W/edit-save" "$SEED$i" >/dev/null
        cmd_backup "$t" "p$i" "$CORPUS"
        local rc=0
        "${CMD[@]}" >"$T/out" 2>"$T/err" || rc=$?
        # borg exits 1 for warnings only.
        if [ "$rc" != 0 ] && ! { [ "$t" = borg ] && [ "$rc" = 1 ]; }; then
            echo "bench.sh: prune setup backup $i of $t failed (exit $rc)" >&2; tail "$T/err" >&2; exit 1
        fi
        python3 scripts/bench_data.py edit revert "$CORPUS" "$W/edit-save"
    done
    rec sample prune_size_before "$t" "$r" "" "" "$(size_of "$(repo_dir "$t" prune)")" ""
    cmd_forget_prune "$t"; measure prune "$t" "$r" "" ""
    local after
    after=$(size_of "$(repo_dir "$t" prune)")
    rec sample prune_size_after "$t" "$r" "" "" "$after" ""
    echo "  prune_size_after   $t run $r: $after bytes"
    mapfile -t ids < <(snap_ids "$t")
    [ "${#ids[@]}" = 3 ] || { echo "bench.sh: $t kept ${#ids[@]} snapshots, expected 3" >&2; exit 1; }
    drop_repo "$t" prune
}

# ---------------------------------------------------------------- settings
# jget EXPR: evaluates a Python expression over the JSON on stdin (as d).
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
use_repo larder kdf; drop_repo larder kdf; tool_init larder
"$LARDER" cat config > "$T/config.json"
ZSTD_LEVEL=$(jget "d['compression_level']" < "$T/config.json")
# `key list` reports the work factor (log2 N); r and p are fixed for new
# keys (keys::SCRYPT_R = 8, keys::SCRYPT_P = 4).
LARDER_WF=$("$LARDER" --json key list | jget "d[0]['work_factor']")
meta larder_settings "$(jget "'zstd level %d, chunks %d/%d/%d KiB, packs %d MiB' % (d['compression_level'], d['chunker']['min'] >> 10, d['chunker']['avg'] >> 10, d['chunker']['max'] >> 10, d['pack_size'] >> 20)" < "$T/config.json"), scrypt key N=2^$LARDER_WF r=8 p=4 (the default)"
drop_repo larder kdf
use_repo restic kdf; drop_repo restic kdf; tool_init restic
meta restic_settings "repository version 2, --compression auto, scrypt key $(cat "$(repo_dir restic kdf)"/keys/* | jget "'N=2^%d r=%d p=%d' % (d['N'].bit_length() - 1, d['r'], d['p'])") (calibrated by restic)"
drop_repo restic kdf
if has_tool rustic; then
    use_repo rustic kdf; drop_repo rustic kdf; tool_init rustic
    meta rustic_settings "$("${RX[@]}" cat config 2>/dev/null | jget "'repository version %s, compression %s (its default), its own cache beside the repository (--cache-dir)' % (d.get('version', '?'), d.get('compression', 'default'))" 2>/dev/null || echo 'its defaults, its own cache beside the repository (--cache-dir)')"
    drop_repo rustic kdf
fi
meta borg_settings "borg init -e repokey-blake2 (PBKDF2-HMAC-SHA256 key), --compression lz4"

# ---------------------------------------------------------------- warm-up
say "warm-up: page cache and one untimed cold backup per tool"
find "$CORPUS" -type f -print0 | xargs -0 cat > /dev/null
cat "$RAND_PRISTINE" > /dev/null
for t in "${TOOLS[@]}"; do
    use_repo "$t" warm; drop_repo "$t" warm; tool_init "$t"
    cmd_backup "$t" w1 "$CORPUS"; "${CMD[@]}" >/dev/null 2>&1 || true
    drop_repo "$t" warm
done

# ---------------------------------------------------------------- references
# The plainest pipelines that move the same bytes (issue 15): the limits of
# a cold backup (tar piped into zstd -3 on 2 threads, nothing written) and
# of a restore onto tmpfs (zstd -dc | tar -x of an archive made once,
# untimed), and cp -a of the tree onto disk (then sync) and onto tmpfs.
ARCHIVE=$W/corpus.tar.zst
ensure_archive() {
    [ -f "$ARCHIVE" ] || tar -C "$(dirname "$CORPUS")" -cf - "$(basename "$CORPUS")" | zstd -q -3 -T2 -o "$ARCHIVE"
}
reference_rows() { # RUN
    local r=$1
    ensure_archive
    local k
    for ((k = 1; k <= COLD_REPEAT; k++)); do
        warm_corpus
        # shellcheck disable=SC2016
        CMD=(sh -c 'tar -C "$1" -cf - "$2" | zstd -3 -T2 -c > /dev/null' sh "$(dirname "$CORPUS")" "$(basename "$CORPUS")")
        measure ref_tar_zstd ref "$r" "$CORPUS_BYTES" ""
    done
    cat "$ARCHIVE" > /dev/null
    rm -rf "$SHM/restore"; mkdir -p "$SHM/restore"
    # shellcheck disable=SC2016
    CMD=(sh -c 'zstd -dc "$1" | tar -x -C "$2"' sh "$ARCHIVE" "$SHM/restore")
    measure ref_untar_shm ref "$r" "$CORPUS_BYTES" ""
    rm -rf "$SHM/restore"; mkdir -p "$SHM/restore"
    warm_corpus
    CMD=(cp -a "$CORPUS" "$SHM/restore/"); measure cp_shm ref "$r" "$CORPUS_BYTES" ""
    rm -rf "$SHM/restore"
    prime_disk
    rm -rf "$W/cpcopy"; mkdir -p "$W/cpcopy"
    CMD=(cp -a "$CORPUS" "$W/cpcopy/"); measure cp_disk cp "$r" "$CORPUS_BYTES" "" --sync
    rm -rf "$W/cpcopy"
}

# ---------------------------------------------------------------- runs
part main && for ((r = 1; r <= RUNS; r++)); do
    n=${#TOOLS[@]}
    order=()
    for ((i = 0; i < n; i++)); do order+=("${TOOLS[$(((i + r - 1) % n))]}"); done
    say "run $r of $RUNS: ${order[*]}"
    reference_rows "$r"
    for t in "${order[@]}"; do slot "$t" "$r"; done
    # Each stage alone, one core, same data.
    find "$CORPUS" -type f -print0 | xargs -0 cat > /dev/null
    # shellcheck disable=SC2016
    CMD=(sh -c 'find "$1" -type f -print0 | xargs -0 cat > /dev/null' sh "$CORPUS")
    measure read_cat stages "$r" "$CORPUS_BYTES" ""
    # As often as the cold backup they are the limit of (the median
    # counts); beside larder's cold backups when larder is in the run.
    if ! has_tool larder; then
        for ((k = 1; k <= COLD_REPEAT; k++)); do stages_once "$r"; done
    fi
done

# ---------------------------------------------------------------- prune
part prune && for ((r = 1; r <= RUNS; r++)); do
    n=${#TOOLS[@]}
    order=()
    for ((i = 0; i < n; i++)); do order+=("${TOOLS[$(((i + r - 1) % n))]}"); done
    say "prune run $r of $RUNS: $PRUNE_SNAPS snapshots, then forget --keep-last 3 and prune: ${order[*]}"
    meta prune_snapshots "$PRUNE_SNAPS"
    for t in "${order[@]}"; do prune_slot "$t" "$r"; done
done

# ---------------------------------------------------------------- flatness
if part flat; then
SYN_TOTAL=$((SYN_SEG * SYN_BLOBS))
say "flatness: larder with a fresh repository vs one with $SYN_TOTAL synthetic blobs"
meta synth_blobs "$SYN_TOTAL"
meta synth_desc "$SYN_SEG index segments of $SYN_BLOBS blobs in fake packs of 64, by examples/synth_index.rs"
meta flat_open_cmd find
# The big repository is built once (the first open absorbs the segments into
# the SQLite cache) and copied for each run, so every cold backup is cold.
use_repo larder big
drop_repo larder big
tool_init larder
"$SYNTH" --repo "$W/repo-larder-big" --segments "$SYN_SEG" --blobs "$SYN_BLOBS"
cmd_open_index; measure flat_absorb larder 1 "" big
rm -rf "$W/template-big"; mkdir -p "$W/template-big"
cp -a "$W/repo-larder-big" "$W/cache-larder-big" "$W/template-big/"
for ((r = 1; r <= RUNS; r++)); do
    for kind in fresh big; do
        if [ "$kind" = fresh ]; then
            use_repo larder fresh; drop_repo larder fresh; tool_init larder
        else
            use_repo larder big; drop_repo larder big
            cp -a "$W/template-big/repo-larder-big" "$W/template-big/cache-larder-big" "$W/"
        fi
        # The first open by a new client (an empty cache: the whole index
        # is read from the repository), then the usual open, then
        # `snapshots` (which does not read the index).
        rm -rf "$LARDER_CACHE_DIR"
        cmd_open_index; measure flat_open_cold larder "$r" "" "$kind"
        cmd_open_index; measure flat_open larder "$r" "" "$kind"
        cmd_snapshots larder; measure flat_snapshots larder "$r" "" "$kind"
        warm_corpus
        cmd_backup larder x "$CORPUS"; measure flat_backup larder "$r" "$CORPUS_BYTES" "$kind"
        rm -rf "$SHM/restore"; mkdir -p "$SHM/restore"
        cmd_restore larder latest "$SHM/restore"; measure flat_restore larder "$r" "$CORPUS_BYTES" "$kind"
        rm -rf "$SHM/restore"
        # Prune's mark phase over every blob (a dry run: the synthetic packs
        # do not exist, so nothing may be deleted or repacked).
        CMD=("$LARDER" -q prune --dry-run); measure flat_prune larder "$r" "" "$kind"
        # Disaster recovery: one small file restored by a new client (an
        # empty cache), end to end.
        rm -rf "$LARDER_CACHE_DIR" "$SHM/restore"; mkdir -p "$SHM/restore"
        cmd_restore_one larder latest "$SHM/restore" "$ONE_FILE"
        measure flat_restore_one_cold larder "$r" "$ONE_BYTES" "$kind"
        check_one larder "$SHM/restore"
        rm -rf "$SHM/restore"
        drop_repo larder "$kind"
    done
done
rm -rf "$W/template-big"
fi

# ---------------------------------------------------------------- snapshots
# Flat in the number of snapshots (issue 15): a small real tree (4 MiB of
# /usr/share/doc, a few hundred files) in a larder repository with 10
# snapshots and in one with MANY_SNAPS, each snapshot with one file changed.
# The snapshots are made through an age identity added as a second key
# (examples/age_keygen.rs), which skips the passphrase's key derivation;
# every timed command opens with the passphrase, as elsewhere. Both
# repositories are made once and copied for each run.
if part snaps && has_tool larder; then
ST=$W/snaps-tree
rm -rf "$ST"
python3 scripts/bench_data.py corpus "$ST" $((4 << 20)) /usr/share/doc > "$T/snaps.json"
meta snaps_tree "$(jget "'%d files, %.1f MiB of /usr/share/doc' % (d['files'], d['bytes'] / 1048576)" < "$T/snaps.json")"
meta snaps_many "$MANY_SNAPS"
# awk reads to the end: `head -1` would leave sort writing into a closed
# pipe, and under pipefail its SIGPIPE ended the script (62 of 200 tries).
FIND_NAME=$(find "$ST" -type f -size +1k | sort | awk 'NR == 1' | xargs basename)
meta snaps_find "$FIND_NAME"
"$AGE_KEYGEN" "$W/identity.txt" > "$T/recipient"
chmod 600 "$W/identity.txt"
for n in 10 "$MANY_SNAPS"; do
    say "snapshots: making a larder repository with $n snapshots"
    use_repo larder "s$n"; drop_repo larder "s$n"; rm -rf "$LARDER_STATE_DIR"; tool_init larder
    "$LARDER" -q key add --recipient "$(cat "$T/recipient")" >"$T/out" 2>"$T/err" || { cat "$T/err" >&2; exit 1; }
    t0=$EPOCHREALTIME
    for ((i = 1; i <= n; i++)); do
        echo "change $i" > "$ST/changing.txt"
        env -u LARDER_PASSWORD "$LARDER" -q --identity "$W/identity.txt" backup "$ST" >"$T/out" 2>"$T/err" \
            || { echo "bench.sh: snapshot $i of $n failed" >&2; cat "$T/err" >&2; exit 1; }
    done
    echo "  made $n snapshots in $(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$t0" "$EPOCHREALTIME") s"
    rm -rf "$W/template-s$n"; mkdir -p "$W/template-s$n"
    cp -a "$W/repo-larder-s$n" "$W/cache-larder-s$n" "$W/template-s$n/"
    [ -d "$LARDER_STATE_DIR" ] && cp -a "$LARDER_STATE_DIR" "$W/template-s$n/"
    drop_repo larder "s$n"; rm -rf "$LARDER_STATE_DIR"
done
for ((r = 1; r <= RUNS; r++)); do
    say "snapshots run $r of $RUNS: 10 vs $MANY_SNAPS snapshots"
    for n in 10 "$MANY_SNAPS"; do
        use_repo larder "s$n"; drop_repo larder "s$n"; rm -rf "$LARDER_STATE_DIR"
        cp -a "$W/template-s$n/." "$W/"
        cmd_snapshots larder; "${CMD[@]}" >/dev/null
        cmd_snapshots larder; measure snaps_snapshots larder "$r" "" "$n"
        CMD=("$LARDER" -q forget --keep-last 3 --dry-run); measure snaps_forget larder "$r" "" "$n"
        CMD=("$LARDER" find "$FIND_NAME"); measure snaps_find larder "$r" "" "$n"
        cmd_backup larder x "$ST"; measure snaps_backup larder "$r" "" "$n"
        drop_repo larder "s$n"; rm -rf "$LARDER_STATE_DIR"
    done
done
rm -rf "$W/template-s10" "$W/template-s$MANY_SNAPS"
fi

# ---------------------------------------------------------------- compression
# Compression levels (issue 15) on a bounded subset (the first COMP_MIB MiB
# of the corpus; zstd 19 is slow): a cold backup into a fresh repository
# with each level, its time and the repository's size. larder `backup
# --compression off|fast|auto|better|max` (`better` where this larder has
# it), restic `--compression off|auto|max`.
if part comp; then
CT=$W/comp-tree
rm -rf "$CT"
python3 scripts/bench_data.py corpus "$CT" $((COMP_MIB << 20)) "$CORPUS" > "$T/comp.json"
COMP_BYTES=$(jget "d['bytes']" < "$T/comp.json")
meta comp_tree "$(jget "'the first %d MiB of the corpus: %d files, %.1f MiB' % ($COMP_MIB, d['files'], d['bytes'] / 1048576)" < "$T/comp.json")"
comp_tools=()
if has_tool larder; then
    if "$LARDER" backup --help | grep -q -- '--compression'; then
        comp_tools+=(larder)
    else
        echo "bench.sh: larder backup has no --compression yet: larder's compression rows skipped" >&2
        meta comp_larder "skipped: this larder's backup has no --compression"
    fi
fi
has_tool restic && comp_tools+=(restic)
for ((r = 1; r <= RUNS; r++)); do
    say "compression run $r of $RUNS: ${comp_tools[*]}"
    for t in "${comp_tools[@]}"; do
        levels=(off fast auto max)
        if [ "$t" = larder ] && "$LARDER" backup --help | grep -q 'better'; then
            levels=(off fast auto better max)
        fi
        [ "$t" = restic ] && levels=(off auto max)
        for lvl in "${levels[@]}"; do
            use_repo "$t" comp; drop_repo "$t" comp; tool_init "$t"
            find "$CT" -type f -print0 | xargs -0 cat > /dev/null
            case $t in
                larder) CMD=("$LARDER" -q backup --compression "$lvl" "$CT") ;;
                restic) CMD=(restic -q --compression "$lvl" backup "$CT") ;;
            esac
            measure comp_backup "$t" "$r" "$COMP_BYTES" "$lvl"
            rec sample comp_size "$t" "$r" "" "" "$(size_of "$(repo_dir "$t" comp)")" "$lvl"
            drop_repo "$t" comp
        done
    done
done
rm -rf "$CT"
fi

# ---------------------------------------------------------------- S3
# The S3 rows (issue 13): larder and restic against moto's S3 server on
# 127.0.0.1, each tool with a server of its own per run, through
# scripts/tcp_count.py (bytes each way); requests are counted from the
# server's log. Cold backup, unchanged re-backup, restore of the latest
# snapshot onto tmpfs; each tool with its own (local) cache, as a user has.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
    local i
    for ((i = 0; i < 150; i++)); do
        python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
s3_start() {
    S3_PORT=$(free_port); S3_RELAY=$(free_port)
    # Unbuffered, so the log holds every request the moment it is served.
    PYTHONUNBUFFERED=1 "$MOTO" -H 127.0.0.1 -p "$S3_PORT" >"$T/moto.log" 2>&1 &
    S3_PID=$!
    rm -f "$T/relay.count"
    python3 scripts/tcp_count.py "$S3_RELAY" "$S3_PORT" "$T/relay.count" &
    S3_RELAY_PID=$!
    if ! wait_port "$S3_PORT" || ! wait_port "$S3_RELAY"; then
        echo "bench.sh: moto's server did not start" >&2; cat "$T/moto.log" >&2; exit 1
    fi
}
s3_stop() { kill "$S3_PID" "$S3_RELAY_PID" 2>/dev/null || true; wait "$S3_PID" "$S3_RELAY_PID" 2>/dev/null || true; }
# (werkzeug colours the request of some statuses, 206 among them, with
# terminal escapes inside the quotes: match the method anywhere.)
s3_requests() { sleep 0.3; grep -cE '(GET|PUT|POST|HEAD|DELETE) /' "$T/moto.log" || true; }
s3_bytes() { sleep 0.5; cat "$T/relay.count" 2>/dev/null || echo "0 0"; }
s3_mark() { S3_R0=$(s3_requests); read -r S3_U0 S3_D0 < <(s3_bytes); }
s3_delta() {
    local r1 u1 d1
    r1=$(s3_requests); read -r u1 d1 < <(s3_bytes)
    echo "$((u1 - S3_U0 + d1 - S3_D0)) $((r1 - S3_R0))"
}
s3_use() { # TOOL
    export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
    case $1 in
        larder)
            export LARDER_REPOSITORY=s3:http://127.0.0.1:$S3_RELAY/bench-larder/repo
            export LARDER_CACHE_DIR=$W/cache-larder-s3 LARDER_STATE_DIR=$W/state-larder-s3 LARDER_PASSWORD=$PASS ;;
        restic)
            export RESTIC_REPOSITORY=s3:http://127.0.0.1:$S3_RELAY/bench-restic/repo
            export RESTIC_CACHE_DIR=$W/cache-restic-s3 RESTIC_PASSWORD=$PASS ;;
    esac
}
s3_slot() { # TOOL RUN
    local t=$1 r=$2
    rm -rf "$W/cache-$t-s3" "$W/state-$t-s3"
    s3_start
    s3_use "$t"
    tool_init "$t"
    warm_corpus
    AFTER=s3_delta
    s3_mark; cmd_backup "$t" s1 "$CORPUS"; measure s3_backup "$t" "$r" "" ""
    s3_mark; cmd_backup "$t" s2 "$CORPUS"; measure s3_rebackup "$t" "$r" "" ""
    rm -rf "$SHM/restore"; mkdir -p "$SHM/restore"
    s3_mark; cmd_restore "$t" latest "$SHM/restore"; measure s3_restore "$t" "$r" "" ""
    AFTER=
    local got
    got=$(find "$SHM/restore" -type f | wc -l)
    [ "$got" = "$CORPUS_FILES" ] || { echo "bench.sh: $t restored $got files from S3, expected $CORPUS_FILES" >&2; exit 1; }
    rm -rf "$SHM/restore"
    s3_stop
    rm -rf "$W/cache-$t-s3" "$W/state-$t-s3"
}
if part s3; then
    MOTO=${LARDER_MOTO_SERVER:-}
    if [ -z "$MOTO" ]; then
        venv="${XDG_CACHE_HOME:-$HOME/.cache}/larder-ci/moto-venv"
        if [ ! -x "$venv/bin/moto_server" ]; then
            rm -rf "$venv"; python3 -m venv "$venv" && "$venv/bin/pip" install -q 'moto[server]'
        fi
        MOTO=$venv/bin/moto_server
    fi
    meta version_moto "moto $("$(dirname "$MOTO")/python" -c 'import moto; print(moto.__version__)' 2>/dev/null || echo '?')"
    for ((r = 1; r <= RUNS; r++)); do
        order=(larder restic)
        [ $((r % 2)) = 0 ] && order=(restic larder)
        say "S3 run $r of $RUNS (moto on 127.0.0.1): ${order[*]}"
        for t in "${order[@]}"; do s3_slot "$t" "$r"; done
    done
fi

# ---------------------------------------------------------------- table
(cd "$OUT" && sha256sum raw.csv > raw.sha256)
python3 scripts/bench_table.py "$RAW" "$OUT/table.md"
say "wrote $OUT/raw.csv, raw.sha256, table.md"
cat "$OUT/table.md"
