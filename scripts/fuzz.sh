#!/usr/bin/env bash
# Runs the libFuzzer targets of build-asan/ (scripts/sanitize.sh build-asan builds them).
#   scripts/fuzz.sh run SECONDS [TARGET...]  each target for SECONDS, two at a time;
#                                            fails on any crash, leak, timeout or OOM
#   scripts/fuzz.sh seeds                     rewrites fuzz/corpus/<target>/ from the
#                                             targets' Seeds() (fuzz/fuzz_util.h)
# Each run starts from the committed seeds (fuzz/corpus/<target>/) plus what earlier
# runs here found (build-asan/fuzz/corpus/<target>/, not committed). Crashing inputs go to
# build-asan/fuzz/artifacts/; reproduce one with build-asan/fuzz/<target> <file>.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build-asan/fuzz
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0}"
export DFLOW_TEST_DATA_DIR="$PWD/tests/data"

all_targets() { for f in fuzz/*_fuzz.cc; do basename "$f" .cc; done; }

run_one() {  # run_one TARGET SECONDS: its log in build-asan/fuzz/logs/TARGET.log
  local t=$1 secs=$2 work=$bin/corpus/$1
  mkdir -p "$work" "$bin/artifacts" "$bin/logs"
  # -max_len: the targets ignore inputs over 64 KiB; -timeout: one input; -rss_limit_mb:
  # the targets cap tensors at 16 MiB, so more is a leak or a missing bound.
  if "$bin/$t" "$work" "fuzz/corpus/$t" -max_total_time="$secs" -max_len=65536 \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$bin/artifacts/$t-" >"$bin/logs/$t.log" 2>&1; then
    echo "fuzz: $t ok: $(grep -E '^stat::number_of_executed_units' "$bin/logs/$t.log" |
      awk '{print $2}') runs, $(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$bin/logs/$t.log" | tail -1)"
  else
    echo "fuzz: $t FAILED (log $bin/logs/$t.log):"
    grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$bin/logs/$t.log" | head -20
    return 1
  fi
}

case "${1:-}" in
  run)
    secs=${2:?seconds}
    shift 2
    targets=("$@")
    ((${#targets[@]})) || mapfile -t targets < <(all_targets)
    pids=() names=() failed=0
    for t in "${targets[@]}"; do
      run_one "$t" "$secs" & pids+=($!) names+=("$t")
      if ((${#pids[@]} == ${DFLOW_JOBS:-2})); then
        wait "${pids[0]}" || failed=1
        pids=("${pids[@]:1}")
      fi
    done
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    exit $failed
    ;;
  seeds)
    for t in $(all_targets); do
      rm -rf "fuzz/corpus/$t" && mkdir -p "fuzz/corpus/$t"
      DFLOW_FUZZ_WRITE_SEEDS="$PWD/fuzz/corpus/$t" "$bin/$t"
    done
    ;;
  *) echo "usage: $0 run SECONDS [TARGET...] | seeds" >&2; exit 2 ;;
esac
