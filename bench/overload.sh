#!/bin/sh
# overload.sh - what a full queue costs: 503 latency and throughput around it.
#
# One daemon with --workers 1 --queue 2. Phases of OVERLOAD_SECONDS (10):
#   before  wrk: small JSON requests alone (served on the HTTP thread)
#   during  the same wrk run while OVERLOAD_CLIENTS (16) clients flood slow
#           requests (16 MiB outputs gzip-compressed on the worker, ~0.1 s
#           each): most get 503 + Retry-After; their latency is measured
#   after   wrk alone again
# Checks: 503 p99 under OVERLOAD_MAX_503_MS (50), no flood request failed at
# the socket level or timed out, small requests never got a non-2xx, and
# throughput after the flood is at least half of before (a loose bound: the
# load generators share the machine; the load average is printed). Ends with
# one summary line; exit status 1 when a check fails.
#
#   make overload
#   TILED_BIN=build/tiled OVERLOAD_SECONDS=30 sh bench/overload.sh
set -eu
TILED=${TILED_BIN:-build/tiled}
DUR=${OVERLOAD_SECONDS:-10}
CLIENTS=${OVERLOAD_CLIENTS:-16}
MAX503=${OVERLOAD_MAX_503_MS:-50}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/tiled-overload.XXXXXX)
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
command -v wrk >/dev/null || { echo "overload: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[ -x "$TILED" ] || { echo "overload: $TILED is not built (make)" >&2; exit 2; }

"$TILED" serve --port 0 --workers 1 --queue 2 --stream-threshold 64M --log-level warn \
  > "$WORK/out" 2> "$WORK/err" &
PID=$!
i=0
until grep -q '^listening on' "$WORK/out" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 "$PID" 2>/dev/null; then
    echo "overload: the daemon did not start" >&2
    cat "$WORK/err" >&2
    exit 1
  fi
  sleep 0.1
done
PORT=$(sed -n 's|^listening on http://[0-9.]*:\([0-9]*\)$|\1|p' "$WORK/out")
URL="http://127.0.0.1:$PORT"

cat > "$WORK/flood.py" <<'PY'
"""Clients that send slow requests back to back for a bounded time."""
import http.client, sys, threading, time
port, clients, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
body = bytes(range(256)) * 16
path = "/v1/tile?dtype=uint8&shape=4096&repeats=4096"
headers = {"Content-Type": "application/octet-stream", "Accept-Encoding": "gzip"}
lock, rows = threading.Lock(), []
t_start = time.monotonic()
deadline = t_start + seconds

def client():
    conn = None
    for _ in range(100000):
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("POST", path, body, headers)
            resp = conn.getresponse()
            resp.read()
            row = (resp.status, time.perf_counter() - t0, resp.getheader("Retry-After"))
        except (OSError, http.client.HTTPException) as exc:
            row = (type(exc).__name__, time.perf_counter() - t0, None)
            if conn:
                conn.close()
            conn = None
        with lock:
            rows.append(row)
    if conn:
        conn.close()

threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join(seconds + 60)
elapsed = time.monotonic() - t_start
busy = sorted(r[1] for r in rows if r[0] == 503)
ok = sorted(r[1] for r in rows if r[0] == 200)
other = [r for r in rows if r[0] not in (200, 503)]
no_retry = sum(1 for r in rows if r[0] == 503 and r[2] != "1")
def pct(v, p):
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] * 1e3 if v else float("nan")
kinds = {}
for r in other:
    kinds[str(r[0])] = kinds.get(str(r[0]), 0) + 1
print(f"FLOOD requests={len(rows)} ok={len(ok)} busy={len(busy)} other={len(other)} no_retry_after={no_retry} "
      f"p50_503={pct(busy, 50):.2f} p99_503={pct(busy, 99):.2f} max_503={pct(busy, 100):.2f} "
      f"p50_200={pct(ok, 50):.1f} p99_200={pct(ok, 99):.1f} ok_per_s={len(ok) / elapsed:.1f} "
      f"busy_per_s={len(busy) / elapsed:.0f} hung={sum(t.is_alive() for t in threads)} other_kinds={kinds or '-'}")
PY

wrk_small() { # label seconds
  wrk -t1 -c16 -d"$2s" --timeout 10s --latency -s "$HERE/overload_small.lua" "$URL" > "$WORK/$1.txt" 2>&1 || true
}
rps() { awk '/Requests\/sec/ {print $2}' "$WORK/$1.txt"; }
lat() { awk -v p="$2" '$1 == p {print $2}' "$WORK/$1.txt"; }
non2xx() { awk '/Non-2xx/ {print $NF}' "$WORK/$1.txt" | grep . || echo 0; }
sockerr() { awk '/Socket errors/ {n = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) n += $i; print n}' "$WORK/$1.txt" | grep . || echo 0; }
ff() { sed -n "s/^FLOOD.* $1=\([^ ]*\).*/\1/p" "$WORK/flood.txt"; }

echo "== overload: --workers 1 --queue 2, $CLIENTS flooding clients, ${DUR} s phases, $URL ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
wrk_small before "$DUR"
/usr/bin/python3 "$WORK/flood.py" "$PORT" "$CLIENTS" "$((DUR + 2))" > "$WORK/flood.txt" 2>&1 &
FLOOD=$!
sleep 1
wrk_small during "$DUR"
wait "$FLOOD" || true
sleep 1
wrk_small after "$DUR"
cat "$WORK/flood.txt"

printf '%-8s %12s %10s %10s %8s %8s\n' phase "small req/s" p50 p99 non-2xx "sock err"
for p in before during after; do
  printf '%-8s %12s %10s %10s %8s %8s\n' "$p" "$(rps $p)" "$(lat $p 50%)" "$(lat $p 99%)" "$(non2xx $p)" "$(sockerr $p)"
done
echo "flood: $(ff requests) slow requests: $(ff ok) x 200 ($(ff ok_per_s)/s, p50 $(ff p50_200) ms), $(ff busy) x 503 ($(ff busy_per_s)/s), $(ff other) other ($(ff other_kinds)), $(ff no_retry_after) 503s without Retry-After: 1"

kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=

fail=0
check() { # condition message
  if ! awk "BEGIN { exit !($1) }"; then echo "FAIL: $2"; fail=1; fi
}
check "$(ff p99_503) < $MAX503" "503 p99 $(ff p99_503) ms is not under $MAX503 ms"
check "$(ff other) == 0 && $(ff hung) == 0" "$(ff other) flood requests failed or timed out ($(ff other_kinds))"
check "$(ff no_retry_after) == 0" "503 answers without Retry-After: 1"
check "$(ff busy) > 0" "the flood never filled the queue"
for p in before during after; do
  check "$(non2xx $p) == 0 && $(sockerr $p) == 0" "small requests $p the flood: $(non2xx $p) non-2xx, $(sockerr $p) socket errors"
done
check "$(rps after) >= 0.5 * $(rps before)" "throughput after the flood ($(rps after)/s) is below half of before ($(rps before)/s)"
check "$rc == 0" "the daemon exited with status $rc"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "overload: 503 latency p50 $(ff p50_503) ms p99 $(ff p99_503) ms max $(ff max_503) ms; small requests/s before $(rps before), during $(rps during), after $(rps after); slow 200/s during $(ff ok_per_s); exit $rc; $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
echo "reproduce: OVERLOAD_SECONDS=$DUR OVERLOAD_CLIENTS=$CLIENTS make overload"
exit $fail
