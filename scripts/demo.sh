#!/usr/bin/env bash
# Builds larder, backs up a real directory into a fresh local repository,
# restores it, and compares the restore with the source.
# Usage: scripts/demo.sh [DIRECTORY]   (default: /usr/share/doc)
set -euo pipefail
src=${1:-/usr/share/doc}
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=$PWD/target/release/larder
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LARDER_REPOSITORY=$work/repo LARDER_CACHE_DIR=$work/cache LARDER_STATE_DIR=$work/state
export LARDER_PASSWORD=${LARDER_PASSWORD:-demo passphrase, change me}
"$bin" init
"$bin" backup "$src"
echo "--- second run: nothing changed, nothing is read again"
"$bin" backup "$src"
"$bin" snapshots
"$bin" restore latest --target "$work/restore"
abs=$(cd "$src" && pwd -P)
diff -r --no-dereference "$abs" "$work/restore$abs"
"$bin" check --read-data
echo "demo: restored $(du -sh "$work/restore$abs" | cut -f1) from $src byte for byte"
