#!/bin/sh
# run-tests.sh [LIST] - `make test`: runs every suite of LIST (tests/suites),
# each to its end whatever the others did, up to $TEST_JOBS (default 4) at
# once. A suite passes when its command exits 0; one that cannot start
# (command not found, a suite it needs did not pass) fails by name. The
# closing line counts the suites, "suites: N passed, M failed", after a line
# naming the failed ones, and the exit status is 0 only when none failed. The
# cases the suites report themselves (cmocka, unittest, "name: N passed, M
# failed") are added up on a line before, as information, and the ten slowest
# tests (the "slow-test:" lines of tests/runner/timed_unittest.py) are listed.
# Before the summary, each failed suite's failure lines are repeated from its
# log, so the end of the output says what failed.
#
# The list is a shell script of lines
#   suite NAME NEEDS COMMAND...   NEEDS: "-" or suites (comma separated) that
#                                 must have passed before this one starts
#   barrier                       the suites after it start once every suite
#                                 before it has ended (passed or not)
# Suites start in the order listed as soon as their needs have passed and a
# slot is free; a suite's output goes to its log, shown whole when it ends.
#
#   sh scripts/run-tests.sh                      every suite of tests/suites
#   ONLY="http k8s" sh scripts/run-tests.sh      only these (their needs are
#                                                not run, nor checked)
#   TEST_JOBS=1 sh scripts/run-tests.sh          one suite at a time
# Logs: $TEST_LOGS (build/test-logs)/NAME.log. MAKE names the make to use.
set -u
list=${1:-tests/suites}
logs=${TEST_LOGS:-build/test-logs}
ONLY=${ONLY:-}
MAKE=${MAKE:-make}
JOBS=${TEST_JOBS:-4}
export MAKE
mkdir -p "$logs" || exit 1
[ -r "$list" ] || { echo "run-tests: cannot read the suite list $list" >&2; echo "suites: 0 passed, 1 failed"; exit 1; }
case "$JOBS" in '' | *[!0-9]* | 0) echo "run-tests: TEST_JOBS must be a positive number" >&2; exit 1 ;; esac
state=$logs/.run
rm -rf "$state" && mkdir -p "$state" || exit 1
t0=$(date +%s)

# ---- reading the list -----------------------------------------------------------

order=""  # every suite of this run, in list order
before="" # the suites listed before the last barrier

# quote ARGS: one shell command line that eval runs as ARGS.
quote() {
  for a in "$@"; do
    printf "'%s' " "$(printf '%s' "$a" | sed "s/'/'\\\\''/g")"
  done
}

suite() {
  name=$1 needs=$2
  shift 2
  if [ -n "$ONLY" ]; then
    case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
  fi
  order="$order $name"
  echo "$needs" > "$state/$name.needs"
  echo "$before" > "$state/$name.after"
  quote "$@" > "$state/$name.cmd"
}

barrier() {
  before=$order
}

case "$list" in /*) ;; *) list=./$list ;; esac
# shellcheck disable=SC1090
. "$list"

# ---- running --------------------------------------------------------------------

passed="" failed="" running="" pending=$order

has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }
ended() { has "$passed" "$1" || has "$failed" "$1"; }

# The suites of NEEDS (comma separated) that ended in this run without
# passing; without ONLY, one that is not in the list counts too (a misspelt
# name). Prints nothing when none did.
unmet() {
  out=""
  for u in $(echo "$1" | tr ',' ' '); do
    [ "$u" = - ] && continue
    has "$passed" "$u" && continue
    if has "$failed" "$u"; then out="$out $u"; continue; fi
    [ -z "$ONLY" ] && ! has "$order" "$u" && out="$out $u"
  done
  echo "${out# }"
}

# Whether NAME may start now: its needs have passed and the suites before
# its barrier have ended.
ready() {
  for r in $(tr ',' ' ' < "$state/$1.needs") $(cat "$state/$1.after"); do
    [ "$r" = - ] && continue
    has "$order" "$r" && ! ended "$r" && return 1
  done
  return 0
}

start() {
  log=$logs/$1.log
  rm -f "$log" "$log.status"
  echo "== $1: started: $(cat "$state/$1.cmd")"
  date +%s > "$state/$1.start"
  # The status file appears whole, once the command has ended.
  (
    eval "$(cat "$state/$1.cmd")" < /dev/null > "$log" 2>&1
    echo $? > "$log.status.part"
    mv "$log.status.part" "$log.status"
  ) &
  running="$running $1"
}

# Cases the suite's own output reports: "PASSED FAILED SKIPPED".
cases() {
  awk '
    /^\[  PASSED  \] [0-9]+ test/ { p += $4 }
    /^\[  FAILED  \] [0-9]+ test/ { f += $4 }
    /^Ran [0-9]+ tests? in/ { ran = $2 }
    /^(OK|FAILED)( \(|$)/ && ran != "" {
      bad = 0; skip = 0; line = $0
      gsub(/unexpected successes/, "unexpected_successes", line)
      gsub(/expected failures/, "expected_failures", line)
      n = split(line, kv, /[ (),]+/)
      for (i = 1; i <= n; i++) {
        split(kv[i], x, "=")
        if (x[1] == "failures" || x[1] == "errors" || x[1] == "unexpected_successes") bad += x[2]
        if (x[1] == "skipped" || x[1] == "expected_failures") skip += x[2]
      }
      p += ran - bad - skip; f += bad; s += skip; ran = ""
    }
    /^([A-Za-z0-9_.-]+: )?[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$/ {
      sub(/^[A-Za-z0-9_.-]+: /, ""); p += $1; f += $3; if (NF >= 6) s += $5
    }
    END { printf "%d %d %d\n", p, f, s }' "$1"
}

total_p=0 total_f=0 total_s=0

# note NAME WORD DETAIL: NAME's line of the closing report.
note() {
  printf '%-4s %-24s %s\n' "$2" "$1" "$3" > "$state/$1.note"
}

# A suite has ended: its log shown, its result noted.
finish() {
  log=$logs/$1.log
  secs=$(($(date +%s) - $(cat "$state/$1.start")))
  status=$(cat "$log.status" 2>/dev/null || echo "unknown")
  # shellcheck disable=SC2046 # three numbers
  set -- "$1" $(cases "$log")
  total_p=$((total_p + $2)) total_f=$((total_f + $3)) total_s=$((total_s + $4))
  counted="$2 passed, $3 failed, $4 skipped"
  if [ "$status" = 0 ]; then
    passed="$passed $1"
    note "$1" ok "${secs}s; cases: $counted"
  else
    failed="$failed $1"
    case "$status" in
      127) why="exit 127: a command was not found, see $log" ;;
      *) why="exit $status, see $log" ;;
    esac
    note "$1" FAIL "${secs}s; $why; cases: $counted"
  fi
  echo "== $1: log"
  cat "$log"
  echo "== $1: $(cut -c1-4 "$state/$1.note" | tr -d ' ') after ${secs}s"
}

while [ -n "$pending$running" ]; do
  changed=""
  still=""
  for n in $running; do
    if [ -e "$logs/$n.log.status" ]; then
      finish "$n"
      changed=1
    else
      still="$still $n"
    fi
  done
  running=$still
  waiting=""
  for n in $pending; do
    if ! ready "$n"; then
      waiting="$waiting $n"
      continue
    fi
    blocked=$(unmet "$(cat "$state/$n.needs")")
    if [ -n "$blocked" ]; then
      echo "== $n: not started, it needs $blocked"
      failed="$failed $n"
      note "$n" FAIL "not started: needs $blocked, which did not pass"
      changed=1
    elif [ "$(echo "$running" | wc -w)" -lt "$JOBS" ]; then
      start "$n"
      changed=1
    else
      waiting="$waiting $n"
    fi
  done
  pending=$waiting
  # Polling a few files a second: the runner has no other way, in sh, to
  # learn which of its children ended first.
  [ -n "$changed" ] || sleep 0.2
done
wait

# In list order from here on.
in_order() { # in_order NAMES: the suites of NAMES as the list orders them
  out=""
  for o in $order; do has "$1" "$o" && out="$out $o"; done
  echo "$out"
}
failed=$(in_order "$failed")

# What failed, near the end of the output where a reader (or a CI page that
# shows only the last part) sees it: each failed suite's failure lines
# (unittest's FAIL:/ERROR: blocks, cmocka's [  FAILED  ], a script's FAIL:),
# or the end of its log when it has none.
digest() {
  for n in $failed; do
    log=$logs/$n.log
    [ -r "$log" ] || continue
    echo "== $n failed: from $log"
    if grep -qE '^(FAIL|ERROR)[: ]|^\[  FAILED  \] ' "$log"; then
      grep -E -A12 '^(FAIL|ERROR)[: ]|^\[  FAILED  \] ' "$log" | head -n 60
    else
      tail -n 15 "$log"
    fi
  done
}

# The ten slowest tests of the run, so that a slow test is seen the day it comes.
slowest() {
  for n in $order; do
    [ -r "$logs/$n.log" ] && sed -n "s/^slow-test: *\\([0-9.]*\\)s \\(.*\\)/\\1 $n \\2/p" "$logs/$n.log"
  done | sort -rn | head -n 10 | awk '{ printf "%8.1fs  %-24s %s\n", $1, $2, $3 }'
}

npass=$(echo "$passed" | wc -w)
nfail=$(echo "$failed" | wc -w)
digest
echo "== slowest tests"
slowest
echo "== summary"
for n in $order; do
  [ -r "$state/$n.note" ] && cat "$state/$n.note"
done
echo "wall time: $(($(date +%s) - t0))s with up to $JOBS suites at once"
echo "cases as the suites report them: $total_p passed, $total_f failed, $total_s skipped"
[ "$nfail" -eq 0 ] || echo "failed suites:$failed"
echo "suites: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ] && [ "$npass" -gt 0 ]
