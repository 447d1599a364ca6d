#!/bin/sh
# soak.sh - a long run of mixed requests against one daemon: leaks and drift.
#
# wrk drives bench/soak.lua (valid JSON, raw, .npy, v2 JSON/binary requests,
# some offloaded to the pool or streamed, and invalid ones) over loopback:
# first a warm-up, then the soak proper. Checks: every valid request got its
# 2xx and every invalid one its expected 4xx (status and body), no socket
# errors (connect, read, write, timeout), the daemon's RSS after the soak is
# within SOAK_RSS_DRIFT % of its RSS after the warm-up, and it exits 0 on
# SIGTERM. Ends with one summary line; exit status 1 when a check fails.
#
#   make soak                                  # 1,000,000 requests
#   SOAK_REQUESTS=100000 make soak             # a quick run
#   TILED_BIN=build/tiled sh bench/soak.sh     # without make
#
# SOAK_WARMUP (50000), SOAK_THREADS (2), SOAK_CONNECTIONS (32),
# SOAK_MAX_SECONDS (1800, per wrk run), SOAK_RSS_DRIFT (10) tune it.
set -eu
TILED=${TILED_BIN:-build/tiled}
N=${SOAK_REQUESTS:-1000000}
WARM=${SOAK_WARMUP:-50000}
THREADS=${SOAK_THREADS:-2}
CONNS=${SOAK_CONNECTIONS:-32}
MAXS=${SOAK_MAX_SECONDS:-1800}
DRIFT_MAX=${SOAK_RSS_DRIFT:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/tiled-soak.XXXXXX)
PID=
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -KILL "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v wrk >/dev/null || { echo "soak: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[ -x "$TILED" ] || { echo "soak: $TILED is not built (make)" >&2; exit 2; }

# A small streaming threshold and chunk, so that the mix's 128 KiB kind is
# streamed in 8 chunks and its 80 KiB kind is built in memory on a worker.
"$TILED" serve --port 0 --log-level warn --stream-threshold 96K --stream-chunk 16K \
  > "$WORK/out" 2> "$WORK/err" &
PID=$!
i=0
until grep -q '^listening on' "$WORK/out" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 "$PID" 2>/dev/null; then
    echo "soak: the daemon did not start" >&2
    cat "$WORK/err" >&2
    exit 1
  fi
  sleep 0.1
done
PORT=$(sed -n 's|^listening on http://[0-9.]*:\([0-9]*\)$|\1|p' "$WORK/out")
URL="http://127.0.0.1:$PORT"

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$PID/status"; }
field() { # name file -> value from the SOAK line
  sed -n "s/^SOAK.* $1=\([0-9.]*\).*/\1/p" "$2"
}

fail=0
run() { # label requests
  echo "== $1: $2 requests, wrk -t$THREADS -c$CONNS, $URL ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
  wrk -t"$THREADS" -c"$CONNS" -d"${MAXS}s" --timeout 10s -s "$HERE/soak.lua" "$URL" -- "$2" "$THREADS" \
    > "$WORK/$1.txt" 2>&1 || true
  sed -n '/^kind/,$p' "$WORK/$1.txt"
  if ! grep -q '^SOAK ' "$WORK/$1.txt"; then
    echo "soak: wrk did not finish the $1 run" >&2
    cat "$WORK/$1.txt" >&2
    exit 1
  fi
  resp=$(field responses "$WORK/$1.txt")
  bad=$(field mismatches "$WORK/$1.txt")
  sock=$(field socket_errors "$WORK/$1.txt")
  if [ "$resp" -lt "$2" ]; then echo "FAIL $1: only $resp of $2 requests answered"; fail=1; fi
  if [ "$bad" -ne 0 ]; then echo "FAIL $1: $bad answers were not the expected status and body"; fail=1; fi
  if [ "$sock" -ne 0 ]; then echo "FAIL $1: $sock socket errors"; fail=1; fi
  if ! kill -0 "$PID" 2>/dev/null; then echo "FAIL $1: the daemon died"; cat "$WORK/err"; exit 1; fi
}

run warmup "$WARM"
sleep 1
RSS_WARM=$(rss)
echo "RSS after warm-up: $RSS_WARM KiB"
run soak "$N"
sleep 1
RSS_END=$(rss)
PEAK=$(hwm)
echo "RSS after soak: $RSS_END KiB (peak $PEAK KiB)"

kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" -eq 0 ] || { echo "FAIL: the daemon exited with status $rc after SIGTERM"; fail=1; }
errors=$(grep -c '"level":"error"' "$WORK/err" || true)

DRIFT=$(awk -v a="$RSS_WARM" -v b="$RSS_END" 'BEGIN { printf "%+.1f", (b - a) * 100 / a }')
if awk -v d="$DRIFT" -v m="$DRIFT_MAX" 'BEGIN { exit !(d > m || d < -m) }'; then
  echo "FAIL: RSS drifted $DRIFT % (limit $DRIFT_MAX %)"
  fail=1
fi
S="$WORK/soak.txt"
printf 'soak: %s requests in %s s (%s req/s): %s valid -> 2xx, %s invalid -> expected 4xx, %s mismatches, ' \
  "$(field responses "$S")" "$(field seconds "$S")" "$(field rps "$S")" "$(field valid_2xx "$S")" \
  "$(field invalid_4xx "$S")" "$(field mismatches "$S")"
printf '%s socket errors; RSS %s KiB after %s warm-up -> %s KiB after (%s %%, peak %s KiB); ' \
  "$(field socket_errors "$S")" "$RSS_WARM" "$WARM" "$RSS_END" "$DRIFT" "$PEAK"
printf '%s error log lines; exit %s; %s\n' "$errors" "$rc" "$([ $fail -eq 0 ] && echo PASS || echo FAIL)"
echo "reproduce: SOAK_REQUESTS=$N SOAK_WARMUP=$WARM SOAK_THREADS=$THREADS SOAK_CONNECTIONS=$CONNS make soak"
exit $fail
