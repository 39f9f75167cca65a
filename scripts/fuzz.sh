#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ for a number of executions (default 10
# million each) and prints one line per target: executions, seconds, result.
# Installs cargo-fuzz if it is missing (stable toolchain, no sanitizer).
#
#   scripts/fuzz.sh                      # every target, 10,000,000 runs each
#   RUNS=100000 scripts/fuzz.sh mark     # one target, fewer runs
#
# Environment: RUNS (executions per target), JOBS (targets run at once,
# default 1), FUZZ_TARGET_DIR (build dir, default /tmp/larder-fuzz-target),
# FUZZ_LOG_DIR (libFuzzer logs, default /tmp/larder-fuzz-logs).
# Exit status: 0 when every target completed its runs without a finding.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
RUNS=${RUNS:-10000000}
JOBS=${JOBS:-1}
TD=${FUZZ_TARGET_DIR:-/tmp/larder-fuzz-target}
LOGS=${FUZZ_LOG_DIR:-/tmp/larder-fuzz-logs}
mkdir -p "$LOGS"
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
# Optimised, with debug assertions and overflow checks kept (an overflow is
# a bug): -O alone would drop them.
cargo fuzz build -s none -O -a --target-dir "$TD"
run_one() {
  local t=$1 log="$LOGS/$1.log" start end rc=0
  mkdir -p "corpus/$t"
  start=$(date +%s)
  cargo fuzz run -s none -O -a --target-dir "$TD" "$t" "corpus/$t" -- \
    -runs="$RUNS" -rss_limit_mb=2048 -malloc_limit_mb=300 -timeout=10 \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  end=$(date +%s)
  local done_runs
  done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if [ "$rc" = 0 ]; then
    printf '%-14s %12s runs %6ss  ok\n' "$t" "${done_runs:-?}" "$((end - start))"
  else
    printf '%-14s %12s runs %6ss  FINDING (exit %s, see %s and fuzz/artifacts/%s)\n' \
      "$t" "${done_runs:-?}" "$((end - start))" "$rc" "$log" "$t"
    return 1
  fi
}
export -f run_one
export RUNS TD LOGS
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one {}' || status=1
exit $status
