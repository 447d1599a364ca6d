#!/bin/sh
# run.sh SECONDS TARGET... - runs the libFuzzer targets built by fuzz.mk.
#
# SECONDS > 0: each target fuzzes for that long, starting from its seeds
# (fuzz/corpus/<name>/, read only) and the inputs earlier runs found
# ($FUZZ_BUILD/corpus/<name>/, where new ones are added); a crash, leak or
# UBSan report leaves its input in $FUZZ_BUILD/artifacts/<name>/. One line
# per target at the end, with libFuzzer's average rate (seeds included):
#   fuzz v1_json: 123456 runs in 60 s, 2057 exec/s, 0 crashes
# SECONDS = 0: each target runs over its seeds once (a quick check).
# Exits 1 when any target failed.
set -u
secs=${1:?usage: run.sh SECONDS TARGET...}
shift
build=${FUZZ_BUILD:-build-fuzz}
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
. fuzz/targets.sh

failed=0
summary=""
for t in "$@"; do
  bin=$build/fuzz_$t
  seeds=fuzz/corpus/$t
  [ -x "$bin" ] || { echo "run.sh: $bin is not built" >&2; exit 2; }
  opts=$(fuzz_opts "$t")
  mkdir -p "$build/logs"
  log=$build/logs/$t.log
  if [ "$secs" = 0 ]; then
    n=$(find "$seeds" -type f | wc -l)
    if "$bin" $opts -runs=0 "$seeds" >"$log" 2>&1; then
      line="fuzz-smoke $t: $n seeds, ok"
    else
      line="fuzz-smoke $t: $n seeds, FAILED (see $log)"
      failed=1
      tail -n 40 "$log"
    fi
  else
    out=$build/corpus/$t
    art=$build/artifacts/$t
    mkdir -p "$out" "$art"
    stamp=$build/logs/$t.start
    touch "$stamp"
    start=$(date +%s)
    echo "== fuzz $t for $secs s (log: $log)"
    "$bin" $opts -max_total_time="$secs" -artifact_prefix="$art/" "$out" "$seeds" >"$log" 2>&1
    rc=$?
    elapsed=$(($(date +%s) - start))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    [ -n "$rate" ] || rate=$((${runs:-0} / (elapsed > 0 ? elapsed : 1)))
    crashes=$(find "$art" -type f -newer "$stamp" | wc -l)
    [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
    line="fuzz $t: ${runs:-0} runs in $elapsed s, $rate exec/s, $crashes crashes"
    if [ "$crashes" -ne 0 ]; then
      failed=1
      tail -n 60 "$log"
      find "$art" -type f -newer "$stamp" | sed 's/^/  input: /'
    fi
  fi
  summary="$summary$line
"
done
printf '%s' "$summary"
exit $failed
