#!/bin/sh
# test_runner.sh - the test runner (scripts/run-tests.sh, `make test`) on
# made-up suite lists: a failing suite does not stop the later ones, a suite
# that cannot start (command not found, a suite it needs failed, PyPI out of
# reach) fails by name, the verdict is the exit status and not what a suite
# prints, every suite is counted (names with digits too), and `make test`
# exits as the runner does. Also `make test-unit` runs every binary, and every
# test script and module is run by some suite or make target.
#
#   sh tests/runner/test_runner.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiled-runner.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
export MARK="$tmp" TEST_LOGS="$tmp/logs"
unset ONLY TEST_SUITES

# run NAME LIST [ENV...]: the runner on LIST; output in $tmp/NAME.out, exit status in $rc.
run() {
  name=$1 list=$2
  shift 2
  env "$@" sh scripts/run-tests.sh "$list" > "$tmp/$name.out" 2>&1
  rc=$?
}
# The runner's own output is kept out of ours: the summary lines it prints
# would be counted by the runner that runs this test.
show() { sed 's/^/  | /' "$tmp/$1.out" >&2; }
last() { tail -n 1 "$tmp/$1.out"; }
has() { grep -qxF -- "$2" "$tmp/$1.out"; }
expect() { # expect WHAT NAME COMMAND...: WHAT holds when COMMAND succeeds; else NAME's output is shown
  what=$1 name=$2
  shift 2
  if "$@"; then ok "$what"; else bad "$what"; show "$name"; fi
}

cat > "$tmp/mixed" <<'EOF'
suite first     -      sh -c 'echo "[  PASSED  ] 3 test(s)."'
suite broken    -      sh -c 'echo "[  PASSED  ] 2 test(s)."; echo "[  FAILED  ] 1 test(s), listed below:"; exit 3'
suite k8s       -      sh -c 'echo "k8s: 4 passed, 1 failed"; exit 1'
suite liar      -      sh -c 'echo "5 passed, 0 failed"; exit 1'
suite no-tool   -      tiled-no-such-command --version
suite dependent broken touch "$MARK/dependent-ran"
suite after     -      sh -c 'touch "$MARK/after-ran"; printf "Ran 4 tests in 0.1s\n\nOK (skipped=1)\n"'
EOF
run mixed "$tmp/mixed"
expect "a failed suite makes the runner exit non-zero" mixed [ "$rc" -ne 0 ]
expect "the closing line counts every suite" mixed [ "$(last mixed)" = "suites: 2 passed, 5 failed" ]
expect "the failed suites are named, in order" mixed has mixed "failed suites: broken k8s liar no-tool dependent"
expect "a suite after a failed one still runs" mixed [ -e "$tmp/after-ran" ]
expect "a suite whose need failed does not start" mixed [ ! -e "$tmp/dependent-ran" ]
expect "... and is reported as not started" mixed grep -q "^FAIL dependent .*not started: needs broken" "$tmp/mixed.out"
expect "a command that is not there fails the suite by name (exit 127)" mixed \
  grep -q "^FAIL no-tool .*exit 127: a command was not found" "$tmp/mixed.out"
expect "a suite that prints '0 failed' but exits 1 fails" mixed grep -q "^FAIL liar .*exit 1" "$tmp/mixed.out"
expect "a name with a digit is counted like the others" mixed grep -q "^FAIL k8s .*cases: 4 passed, 1 failed" "$tmp/mixed.out"
# count NAME LINE: how many times LINE is a whole line of NAME's output
count() { grep -cxF -- "$2" "$tmp/$1.out"; }
expect "a failed suite's failure lines are repeated before the summary" mixed \
  [ "$(count mixed "[  FAILED  ] 1 test(s), listed below:")" = 2 ]
expect "... under a line naming the suite and its log" mixed has mixed "== broken failed: from $tmp/logs/broken.log"
expect "... or, without failure lines, the end of its log" mixed [ "$(count mixed "5 passed, 0 failed")" = 2 ]
expect "... and only failed suites are repeated" mixed [ "$(count mixed "[  PASSED  ] 3 test(s).")" = 1 ]
expect "... all of it before the summary" mixed \
  [ "$(grep -n "^== liar failed" "$tmp/mixed.out" | cut -d: -f1)" -lt "$(grep -n "^== summary" "$tmp/mixed.out" | cut -d: -f1)" ]
expect "the cases the suites report are added up" mixed \
  has mixed "cases as the suites report them: 17 passed, 2 failed, 1 skipped"
expect "each suite keeps its log" mixed grep -qx "k8s: 4 passed, 1 failed" "$TEST_LOGS/k8s.log"

cat > "$tmp/green" <<'EOF'
suite one  -   true
suite two  one sh -c 'echo "two: 1 passed, 0 failed"'
EOF
run green "$tmp/green"
expect "all suites passing: exit 0" green [ "$rc" -eq 0 ]
expect "all suites passing: closing line" green [ "$(last green)" = "suites: 2 passed, 0 failed" ]
expect "all suites passing: no failed line" green sh -c "! grep -q '^failed suites' '$tmp/green.out'"

# Side by side: each of these two waits for the other's mark, so the run
# passes only when both are running at once (each gives up after 60 s).
cat > "$tmp/together" <<'EOF'
suite ping  -   sh -c 'touch "$MARK/ping"; i=0; while [ ! -e "$MARK/pong" ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i + 1)); done; [ -e "$MARK/pong" ]'
suite pong  -   sh -c 'touch "$MARK/pong"; i=0; while [ ! -e "$MARK/ping" ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i + 1)); done; [ -e "$MARK/ping" ]'
suite third ping,pong sh -c '[ -e "$MARK/ping" ] && [ -e "$MARK/pong" ] && touch "$MARK/third-ran"'
EOF
run together "$tmp/together" TEST_JOBS=2
expect "suites run side by side (TEST_JOBS=2)" together [ "$rc" -eq 0 ]
expect "a suite starts once the suites it needs have passed" together [ -e "$tmp/third-ran" ]
expect "each suite's log is shown whole, under its name" together has together "== ping: log"

# A barrier: what follows starts once what precedes has ended, passed or not.
cat > "$tmp/barrier" <<'EOF'
suite slow-fail -  sh -c 'i=0; while [ $i -lt 20 ]; do sleep 0.01; i=$((i + 1)); done; touch "$MARK/slow-ended"; exit 1'
barrier
suite after-it  -  sh -c '[ -e "$MARK/slow-ended" ] && touch "$MARK/after-barrier"'
EOF
run barrier "$tmp/barrier" TEST_JOBS=4
expect "a suite after a barrier starts once those before it ended, failed ones too" barrier [ -e "$tmp/after-barrier" ]
expect "... and the barrier's failed suite is still counted" barrier [ "$(last barrier)" = "suites: 1 passed, 1 failed" ]
run badjobs "$tmp/green" TEST_JOBS=none
expect "TEST_JOBS must be a number" badjobs [ "$rc" -ne 0 ]

# The ten slowest tests of the run, from the suites' "slow-test:" lines.
cat > "$tmp/slow" <<'EOF'
suite fast-one - sh -c 'echo "slow-test: 0.50s m.A.test_quick"; echo "slow-test: 12.25s m.A.test_long"'
suite fast-two - sh -c 'echo "slow-test: 3.00s n.B.test_mid"'
EOF
run slow "$tmp/slow"
expect "the slowest tests are listed, slowest first, with their suite" slow \
  sh -c "grep -A3 '^== slowest tests' '$tmp/slow.out' | sed -n 2p | grep -q '12.2s  fast-one .*m.A.test_long'"
expect "... the next one second" slow \
  sh -c "grep -A3 '^== slowest tests' '$tmp/slow.out' | sed -n 3p | grep -q 'fast-two .*n.B.test_mid'"

# timed_unittest: unittest's output and exit status, and a slow-test line per test.
mkdir -p "$tmp/py"
cat > "$tmp/py/test_timed_sample.py" <<'EOF'
import unittest


class Sample(unittest.TestCase):
    def test_passes(self):
        self.assertTrue(True)

    def test_fails(self):
        self.assertEqual(1, 2)
EOF
(cd "$tmp/py" && PYTHONPATH="$OLDPWD/tests/runner" python3 -m timed_unittest -v test_timed_sample > "$tmp/timed.out" 2>&1)
rc=$?
expect "timed_unittest exits as unittest does (a failure: 1)" timed [ "$rc" -eq 1 ]
expect "timed_unittest keeps unittest's closing line" timed has timed "FAILED (failures=1)"
expect "timed_unittest names each test with its time" timed \
  grep -qE "^slow-test: [0-9]+\.[0-9]{2}s test_timed_sample\.Sample\.test_passes$" "$tmp/timed.out"

run only "$tmp/green" ONLY=two
expect "ONLY runs the named suites, without their needs" only [ "$rc" -eq 0 ]
expect "ONLY: the closing line counts the suites run" only [ "$(last only)" = "suites: 1 passed, 0 failed" ]
run none "$tmp/green" ONLY=nothing-by-this-name
expect "a run of no suite fails" none [ "$rc" -ne 0 ]
run missing "$tmp/no-such-list"
expect "an unreadable list fails" missing [ "$rc" -ne 0 ]
expect "an unreadable list is counted as a failed suite" missing [ "$(last missing)" = "suites: 0 passed, 1 failed" ]

# Through make: `make test` exits as the runner does (no pipe drops it).
make_test() { # make_test NAME LIST
  ${MAKE:-make} -s --no-print-directory test ONLY= TEST_SUITES="$2" > "$tmp/$1.out" 2>&1
  rc=$?
}
make_test make-mixed "$tmp/mixed"
expect "make test fails when a suite failed" make-mixed [ "$rc" -ne 0 ]
expect "make test prints the runner's closing line" make-mixed grep -qx "suites: 2 passed, 5 failed" "$tmp/make-mixed.out"
make_test make-green "$tmp/green"
expect "make test passes when every suite passed" make-green [ "$rc" -eq 0 ]

# The real venv step with PyPI out of reach: it fails by name, and the suite
# that needs it is reported as not started instead of being skipped.
cat > "$tmp/offline" <<EOF
suite venv    -     sh scripts/venv.sh "$tmp/venv"
suite clients venv  true
EOF
run offline "$tmp/offline" -u PIP_FIND_LINKS -u PIP_NO_INDEX PIP_INDEX_URL=http://127.0.0.1:9/simple \
  PIP_RETRIES=0 PIP_TIMEOUT=1 PIP_CONFIG_FILE=/dev/null
expect "PyPI out of reach: the venv suite fails" offline [ "$rc" -ne 0 ]
expect "PyPI out of reach: venv and its dependant are named" offline has offline "failed suites: venv clients"
expect "PyPI out of reach: the venv step says why" offline grep -q "is PyPI reachable" "$TEST_LOGS/venv.log"

# make help names every target of the Makefile and the files it includes
# (`make` alone stands for all), and fits 100 columns.
${MAKE:-make} -s --no-print-directory help > "$tmp/help.out" 2>&1
for t in $(cat Makefile fuzz/fuzz.mk bench/*.mk bench/peers/peers.mk deploy/deploy.mk |
           sed -n 's/^\([a-z][a-z0-9-]*\):.*/\1/p' | sort -u); do
  case "$t" in all | help) continue ;; esac
  if grep -qE "make $t( |$)" "$tmp/help.out"; then ok "make help lists $t"; else bad "make help does not list $t"; fi
done
if awk 'length > 100 { exit 1 }' "$tmp/help.out"; then ok "make help fits 100 columns"; else bad "make help: a line past 100 columns"; fi

# make test-unit runs every unit binary and names the failed ones.
printf '#!/bin/sh\nexit 1\n' > "$tmp/unit-fails"
printf '#!/bin/sh\ntouch "$MARK/unit-ran"\n' > "$tmp/unit-passes"
chmod +x "$tmp/unit-fails" "$tmp/unit-passes"
${MAKE:-make} -s --no-print-directory test-unit TEST_BIN="$tmp/unit-fails $tmp/unit-passes" > "$tmp/unit.out" 2>&1
rc=$?
expect "test-unit fails when a binary failed" unit [ "$rc" -ne 0 ]
expect "test-unit runs the binaries after a failed one" unit [ -e "$tmp/unit-ran" ]
expect "test-unit names the failed binary" unit grep -qx "failed unit tests: $tmp/unit-fails" "$tmp/unit.out"

# Every test script and module is run by a suite or a make target: none is
# left out of the runs without anyone seeing it.
# The modules of tests/server and tests/deploy are named as unittest modules,
# the rest by path.
for f in tests/*/test_*.py tests/*/test_*.sh tests/test_*.sh; do
  case "$f" in
    tests/server/*.py | tests/deploy/*.py) name=$(basename "$f" .py) ;;
    *) name=$f ;;
  esac
  if grep -qw -- "$name" tests/suites Makefile ./*/*.mk ./*/*/*.mk 2>/dev/null; then
    ok "$f is run"
  else
    bad "$f is named by no suite of tests/suites and no make target"
  fi
done

echo "runner: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
