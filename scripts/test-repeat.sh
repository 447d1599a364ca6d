#!/bin/sh
# test-repeat.sh N LOAD - `make test-repeat N=10 LOAD=2`: `make test` N times
# in a row while LOAD busy loops (one per core on this machine's two) keep
# the processor taken, to find the tests that pass only on a quiet machine.
# Every run goes to the end; each one's closing line and wall time are
# printed with its logs kept in build/test-repeat/RUN/, and the exit status
# is 0 only when every run passed. The busy loops end with the script.
set -u
n=${1:-10}
load=${2:-2}
MAKE=${MAKE:-make}
case "$n$load" in *[!0-9]*) echo "test-repeat: N and LOAD are numbers" >&2; exit 2 ;; esac
busy=""
stop() {
  for p in $busy; do kill "$p" 2>/dev/null; done
}
trap stop EXIT
trap 'exit 1' INT TERM HUP
i=0
while [ "$i" -lt "$load" ]; do
  sh -c 'while :; do :; done' &
  busy="$busy $!"
  i=$((i + 1))
done
green=0 i=1
while [ "$i" -le "$n" ]; do
  dir=build/test-repeat/$i
  rm -rf "$dir" && mkdir -p "$dir"
  start=$(date +%s)
  TEST_LOGS=$dir $MAKE --no-print-directory test ONLY= > "$dir/make-test.out" 2>&1
  rc=$?
  [ "$rc" = 0 ] && green=$((green + 1))
  echo "test-repeat: run $i of $n with $load busy loops: $(tail -n 1 "$dir/make-test.out") ($(($(date +%s) - start))s, exit $rc)"
  [ "$rc" = 0 ] || grep -E "^failed suites:" "$dir/make-test.out"
  i=$((i + 1))
done
echo "test-repeat: $green of $n runs green"
[ "$green" -eq "$n" ]
