#!/bin/sh
# campaign.sh TARGET... - a fuzzing campaign: `make fuzz-campaign`, run by
# hand (neither CI nor `make test` runs it). For each target in turn:
#   1. fuzzing for CAMPAIGN_SECONDS (default 3600; or CAMPAIGN_HOURS hours)
#      with CAMPAIGN_JOBS libFuzzer jobs side by side (-jobs, -workers;
#      default one per core) or, with CAMPAIGN_RUNS set, until the jobs
#      together have run that many inputs (each job CAMPAIGN_RUNS / jobs;
#      CAMPAIGN_SECONDS then only caps it), from the kept corpus fuzz/corpus/<t>/ and the
#      inputs the differential tests' generators write
#      (fuzz/gen_campaign_seeds.py, CAMPAIGN_SEEDS per generator, default
#      300); new inputs go to $FUZZ_BUILD/campaign/<t>/corpus/, crash, leak,
#      timeout and out-of-memory inputs to $FUZZ_BUILD/campaign/<t>/artifacts/;
#   2. minimising: libFuzzer's -merge=1 adds to fuzz/corpus/<t>/ those of the
#      new and generated inputs that reach edges it does not (it removes
#      nothing), so the kept corpus grows in the tree. Edges alone
#      (-use_counters=0): counted as features, each loop's hit counts kept
#      a slow input apiece (a raw body repeated to 1 MiB), five times the
#      files, and `make fuzz` spent its short runs on them (raw made 1.7
#      times fewer executions a second from such a corpus than from the
#      edges' one, side by side); the fuzzing itself counts hits;
#   3. coverage: the target built again with clang's source-based coverage
#      (into $FUZZ_BUILD/cov/) runs over fuzz/corpus/<t>/; llvm-profdata and
#      llvm-cov report it per file in $FUZZ_BUILD/campaign/<t>/coverage.txt.
# Each target's row is printed as it ends (and kept in
# $FUZZ_BUILD/campaign/<t>/row.txt). Then a table, one row per target:
# executions and executions per second
# (all jobs), edges (libFuzzer's final cov:, the most a job reached), the
# kept corpus's files before and after, findings (artifacts), and the line
# and region coverage of the sources the target is written against (focus()
# in fuzz/targets.sh) and of all it links but the harness.
# Exits 1 when a target had findings or a step failed.
set -u
. fuzz/targets.sh
[ $# -gt 0 ] || { echo "usage: campaign.sh TARGET..." >&2; exit 2; }
root=$(pwd)
build=${FUZZ_BUILD:-build-fuzz}
case "$build" in /*) ;; *) build=$root/$build ;; esac
secs=${CAMPAIGN_SECONDS:-$((${CAMPAIGN_HOURS:-1} * 3600))}
jobs=${CAMPAIGN_JOBS:-$(nproc)}
runs=${CAMPAIGN_RUNS:-}
case "$runs" in *[!0-9]*) echo "campaign.sh: CAMPAIGN_RUNS is a number" >&2; exit 2 ;; esac
runopt=""
[ -n "$runs" ] && runopt="-runs=$(((runs + jobs - 1) / jobs))"
camp=$build/campaign
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# The coverage tools of the compiler's own LLVM version.
cc=${FUZZ_CC:-clang}
ver=$($cc --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n 1)
profdata=$(command -v "llvm-profdata-$ver" || command -v llvm-profdata) || {
  echo "campaign.sh: llvm-profdata is missing (sh scripts/deps.sh fuzz)" >&2; exit 2; }
llvmcov=$(command -v "llvm-cov-$ver" || command -v llvm-cov) || {
  echo "campaign.sh: llvm-cov is missing (sh scripts/deps.sh fuzz)" >&2; exit 2; }

# The generated seeds, once for every target.
seeds=$camp/seeds
rm -rf "$seeds"
mkdir -p "$seeds"
py=python3
if [ -x build/venv/bin/python ]; then
  py=build/venv/bin/python
  [ -f build/grpc/grpc_service_pb2.py ] || make --no-print-directory grpc-stubs >"$camp/grpc-stubs.log" 2>&1
fi
"$py" fuzz/gen_campaign_seeds.py "$seeds" "${CAMPAIGN_SEEDS:-300}"

# Line and region coverage (percent, one decimal) over the rows of an
# llvm-cov report whose file is among $2 (all rows when $2 is empty).
percent() {
  awk -v files=" $2 " '
    $1 == "Filename" || $1 == "TOTAL" || NF < 10 || $2 !~ /^[0-9]+$/ { next }
    files != "  " && index(files, " " $1 " ") == 0 { next }
    { r += $2; rm += $3; l += $8; lm += $9 }
    END {
      if (l == 0 || r == 0) { print "- -"; exit }
      printf "%.1f %.1f\n", 100 * (l - lm) / l, 100 * (r - rm) / r
    }' "$1"
}

# Target $1's coverage build runs over the corpus $3 (options $4); its
# report goes to $2/coverage.txt, the files of the harness and the
# generated code left out.
coverage() {
  covbin=$build/cov/fuzz_$1
  make --no-print-directory FUZZ_BUILD="$build/cov" FUZZ_CC="$cc -fprofile-instr-generate -fcoverage-mapping" \
    "$covbin" >"$2/logs/cov-build.log" 2>&1 || return 1
  # shellcheck disable=SC2086
  LLVM_PROFILE_FILE="$2/cov/%p.profraw" "$covbin" $4 -runs=0 "$3" >"$2/logs/cov-run.log" 2>&1 || return 1
  "$profdata" merge -sparse "$2"/cov/*.profraw -o "$2/cov/$1.profdata" || return 1
  "$llvmcov" report "$covbin" -instr-profile="$2/cov/$1.profdata" \
    -ignore-filename-regex='(^|/)(fuzz|build[^/]*)/|^/usr/' >"$2/coverage.txt" 2>"$2/logs/cov-report.log"
}

failed=0
table=""
for t in "$@"; do
  bin=$build/fuzz_$t
  [ -x "$bin" ] || { echo "campaign.sh: $bin is not built" >&2; exit 2; }
  dir=$camp/$t
  kept=$root/fuzz/corpus/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/logs" "$dir/cov" "$kept"
  extra=""
  [ -d "$seeds/$t" ] && extra=$seeds/$t
  opts=$(fuzz_opts "$t")
  before=$(find "$kept" -type f | wc -l)

  echo "== campaign $t: ${runs:+$runs executions within }$secs s, $jobs jobs (logs: $dir/logs/)"
  # libFuzzer writes each job's log, fuzz-<job>.log, where it runs.
  start=$(date +%s)
  # shellcheck disable=SC2086
  (cd "$dir/logs" && "$bin" $opts -jobs="$jobs" -workers="$jobs" -max_total_time="$secs" $runopt \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" "$kept" $extra >main.log 2>&1)
  took=$(($(date +%s) - start))
  execs=0
  edges=0
  for log in "$dir"/logs/fuzz-*.log; do
    [ -f "$log" ] || continue
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$n" ] || n=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    c=$(sed -n 's/.* cov: \([0-9][0-9]*\) .*/\1/p' "$log" | tail -n 1)
    execs=$((execs + ${n:-0}))
    [ "${c:-0}" -gt "$edges" ] && edges=$c
  done
  rate=$((execs / (took > 0 ? took : 1)))

  # shellcheck disable=SC2086
  if ! "$bin" -merge=1 -use_counters=0 $opts -artifact_prefix="$dir/artifacts/" "$kept" "$dir/corpus" $extra \
    >"$dir/logs/merge.log" 2>&1; then
    echo "campaign.sh: $t: the merge failed (see $dir/logs/merge.log)" >&2
    failed=1
  fi
  after=$(find "$kept" -type f | wc -l)
  findings=$(find "$dir/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | wc -l)
  [ "$findings" -eq 0 ] || failed=1

  cov="- -"
  allcov="- -"
  if coverage "$t" "$dir" "$kept" "$opts"; then
    cov=$(percent "$dir/coverage.txt" "$(focus "$t")")
    allcov=$(percent "$dir/coverage.txt" "")
  else
    echo "campaign.sh: $t: no coverage report (see $dir/logs/cov-*.log)" >&2
    failed=1
  fi
  # shellcheck disable=SC2086  # $cov and $allcov are two figures each
  row=$(printf '%-15s %11s %6s %8s %6s %6s -> %-6s %8s %7s %7s %7s %7s' "$t" "$execs" "$took" "$rate" "$edges" \
    "$before" "$after" "$findings" $cov $allcov)
  table="$table$row
"
  # Each row as its target ends, kept beside its logs: a long campaign's
  # finished targets are on record even if a later one is stopped.
  printf '%s\n' "$row" > "$dir/row.txt"
  echo "campaign row: $row"
  if [ "$findings" -ne 0 ]; then
    find "$dir/artifacts" -type f | sed 's/^/  finding: /'
  fi
done

echo
echo "campaign: ${runs:+$runs executions or }$secs s per target, $jobs jobs; coverage per file in" \
  "$camp/<target>/coverage.txt"
printf '%-15s %11s %6s %8s %6s %16s %8s %15s %15s\n' "" "" "" "" "" "corpus files" "" "focus cov %" "all cov %"
printf '%-15s %11s %6s %8s %6s %6s    %-6s %8s %7s %7s %7s %7s\n' target executions secs exec/s edges before \
  after findings lines regions lines regions
printf '%s' "$table"
exit $failed
