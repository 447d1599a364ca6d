#!/bin/sh
# run-tests.sh [LIST] - `make test`: runs every suite of LIST (tests/suites),
# each to its end whatever the others did. A suite passes when its command
# exits 0; one that cannot start (command not found, a suite it needs did not
# pass) fails by name. The closing line counts the suites, "suites: N passed,
# M failed", after a line naming the failed ones, and the exit status is 0 only
# when none failed. The cases the suites report themselves (cmocka, unittest,
# "name: N passed, M failed") are added up on a line before, as information.
# Before the summary, each failed suite's failure lines are repeated from its
# log, so the end of the output says what failed.
#
#   sh scripts/run-tests.sh                      every suite of tests/suites
#   ONLY="http k8s" sh scripts/run-tests.sh      only these (their needs are
#                                                not run, nor checked)
# Logs: $TEST_LOGS (build/test-logs)/NAME.log. MAKE names the make to use.
set -u
list=${1:-tests/suites}
logs=${TEST_LOGS:-build/test-logs}
ONLY=${ONLY:-}
MAKE=${MAKE:-make}
export MAKE
mkdir -p "$logs" || exit 1
[ -r "$list" ] || { echo "run-tests: cannot read the suite list $list" >&2; echo "suites: 0 passed, 1 failed"; exit 1; }

passed="" failed="" report=""

note() { # note NAME WORD DETAIL: one line of the closing report
  report="$report$(printf '%-4s %-16s %s' "$2" "$1" "$3")
"
}

# The suites of NEEDS (comma separated) that ran in this run and did not pass;
# without ONLY, one that did not run at all counts too (a misspelt name).
unmet() {
  out=""
  for n in $(echo "$1" | tr ',' ' '); do
    [ "$n" = - ] && continue
    case " $passed " in *" $n "*) continue ;; esac
    case " $failed " in *" $n "*) out="$out $n"; continue ;; esac
    [ -z "$ONLY" ] && out="$out $n"
  done
  echo "${out# }"
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

# suite NAME NEEDS COMMAND...: runs COMMAND from the repository root with no
# standard input, its output shown and kept in $logs/NAME.log.
suite() {
  name=$1 needs=$2
  shift 2
  if [ -n "$ONLY" ]; then
    case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
  fi
  log=$logs/$name.log
  rm -f "$log" "$log.status"
  blocked=$(unmet "$needs")
  if [ -n "$blocked" ]; then
    echo "== $name: not started, it needs $blocked"
    failed="$failed $name"
    note "$name" FAIL "not started: needs $blocked, which did not pass"
    return 0
  fi
  echo "== $name: $*"
  start=$(date +%s)
  { "$@" < /dev/null 2>&1; echo $? > "$log.status"; } | tee "$log"
  secs=$(( $(date +%s) - start ))
  status=$(cat "$log.status" 2>/dev/null || echo "unknown")
  # shellcheck disable=SC2046 # three numbers
  set -- $(cases "$log")
  total_p=$((total_p + $1)) total_f=$((total_f + $2)) total_s=$((total_s + $3))
  counted="$1 passed, $2 failed, $3 skipped"
  if [ "$status" = 0 ]; then
    passed="$passed $name"
    note "$name" ok "${secs}s; cases: $counted"
  else
    failed="$failed $name"
    case "$status" in
      127) why="exit 127: a command was not found, see $log" ;;
      *) why="exit $status, see $log" ;;
    esac
    note "$name" FAIL "${secs}s; $why; cases: $counted"
  fi
}

case "$list" in /*) ;; *) list=./$list ;; esac
# shellcheck disable=SC1090
. "$list"

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

npass=$(echo "$passed" | wc -w)
nfail=$(echo "$failed" | wc -w)
digest
echo "== summary"
printf '%s' "$report"
echo "cases as the suites report them: $total_p passed, $total_f failed, $total_s skipped"
[ "$nfail" -eq 0 ] || echo "failed suites:$failed"
echo "suites: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ] && [ "$npass" -gt 0 ]
