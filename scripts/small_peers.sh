#!/bin/bash
# Many small files, larder against its peers: for each tree of N files of
# SIZE random bytes (scripts/small_tree.py, 1,000 to a directory), or each
# tree given by its path, and each tool, in an order that rotates by round,
# a fresh local repository gets
# - a cold backup of the tree (read into the page cache just before),
# - an unchanged second backup,
# - a restore of the latest snapshot onto tmpfs, whose files are then
#   compared with the tree's (a SHA-256 of every file, in name order).
# Each tool opens with its own real key derivation and its own cache
# directory beside the repository. One line per step:
#
#   TOOL N STEP WALL_S USER_S SYS_S PEAK_KIB repo BYTES
#
# (`repo BYTES`: the repository's size after the step, `du -sb`; N is the
# tree's name for a tree given by its path).
#
#   scripts/small_peers.sh ROUNDS "300000 1000000" TOOL...
#   scripts/small_peers.sh ROUNDS /var/tmp/bigtree TOOL...   # an existing tree
#
# TOOL is a larder binary's path, `restic` (from PATH) or `rustic` (from
# SMALL_RUSTIC, default ~/.cache/larder-bench/rustic/bin/rustic, where
# scripts/bench.sh installs it). Environment: SMALL_SIZE (bytes per file,
# default 1024), SMALL_DIR (trees and repositories, default
# /var/tmp/larder-small), SMALL_SHM (restore target's parent, default
# /dev/shm).
set -euo pipefail
ROUNDS=${1:?usage: scripts/small_peers.sh ROUNDS "N..." TOOL...}
COUNTS=${2:?}
shift 2
TOOLS=("$@")
[ ${#TOOLS[@]} -gt 0 ] || { echo "no tool given" >&2; exit 2; }
SIZE=${SMALL_SIZE:-1024}
W=${SMALL_DIR:-/var/tmp/larder-small}
SHM=${SMALL_SHM:-/dev/shm}
RUSTIC=${SMALL_RUSTIC:-$HOME/.cache/larder-bench/rustic/bin/rustic}
PASS=small-peers
P=$W/peers
OUT=$SHM/larder-small-restore
mkdir -p "$W" "$P"

# The files of directory $1, each one's SHA-256, in name order.
digest() {
    (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)
}

# The tree of item $1 of COUNTS: a path as it is, a count as a tree of
# that many small files (made here if it is not there yet).
tree_of() {
    case $1 in
        */*) echo "$1" ;;
        *) echo "$W/tree-$1-$SIZE" ;;
    esac
}

declare -A WANT
for n in $COUNTS; do
    t=$(tree_of "$n")
    case $n in
        */*) [ -d "$t" ] || { echo "$t: no such tree" >&2; exit 2; } ;;
        *) [ -d "$t" ] || python3 "$(dirname "$0")/small_tree.py" "$t" "$n" "$SIZE" ;;
    esac
    WANT[$n]=$(digest "$t")
done

# Sets the tool's repository, cache and password, and its command line
# prefix X.
use() {
    local tool=$1 name
    name=$(basename "$tool")
    unset LARDER_REPOSITORY RESTIC_REPOSITORY RUSTIC_REPOSITORY
    case $name in
        restic)
            export RESTIC_REPOSITORY=$P/repo RESTIC_CACHE_DIR=$P/cache RESTIC_PASSWORD=$PASS
            X=(restic -q) ;;
        rustic)
            export RUSTIC_REPOSITORY=$P/repo RUSTIC_PASSWORD=$PASS
            X=("$RUSTIC" --no-progress --cache-dir "$P/cache") ;;
        *)
            export LARDER_REPOSITORY=$P/repo LARDER_CACHE_DIR=$P/cache LARDER_STATE_DIR=$P/state
            export LARDER_PASSWORD=$PASS
            X=("$tool" -q) ;;
    esac
}
# Runs and times one step: prints its line.
step() { # TOOL N STEP CMD...
    local tool=$1 n=$2 what=$3
    shift 3
    /usr/bin/time -o "$P/time" -f "%e %U %S %M" "$@" > "$P/step.log" 2>&1 || {
        echo "$(basename "$tool") $n $what failed:" >&2
        tail -5 "$P/step.log" >&2
        exit 1
    }
    echo "$(basename "$tool") $(basename "$n") $what $(tail -1 "$P/time") repo $(du -sb "$P/repo" | cut -f1)"
}

for r in $(seq "$ROUNDS"); do
    for n in $COUNTS; do
        t=$(tree_of "$n")
        k=${#TOOLS[@]}
        for i in $(seq 0 $((k - 1))); do
            tool=${TOOLS[$(((i + r - 1) % k))]}
            name=$(basename "$tool")
            rm -rf "$P/repo" "$P/cache" "$P/state" "$OUT"
            use "$tool"
            case $name in
                restic) restic -q init --repository-version 2 > "$P/init.log" 2>&1 ;;
                *) "${X[@]}" init > "$P/init.log" 2>&1 ;;
            esac || { cat "$P/init.log" >&2; exit 1; }
            find "$t" -type f -print0 | xargs -0 cat > /dev/null
            for what in cold rebackup; do
                case $name in
                    restic) step "$tool" "$n" "$what" "${X[@]}" --compression auto backup "$t" ;;
                    *) step "$tool" "$n" "$what" "${X[@]}" backup "$t" ;;
                esac
            done
            case $name in
                rustic) step "$tool" "$n" restore "${X[@]}" restore latest "$OUT" ;;
                *) step "$tool" "$n" restore "${X[@]}" restore latest --target "$OUT" ;;
            esac
            got=$(find "$OUT" -type d -name "$(basename "$t")" -print -quit)
            if [ -z "$got" ] || [ "$(digest "$got")" != "${WANT[$n]}" ]; then
                echo "$name $n: the restored files differ from the tree's" >&2
                exit 1
            fi
            rm -rf "$OUT"
        done
    done
done
rm -rf "$P"
