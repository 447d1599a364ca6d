#!/bin/sh
# bench_http.sh - the daemon beside nginx, same run, same layout: server on
# core 0, load generator (wrk or curl) on core 1, loopback only.
#
#   1. small JSON tile request, wrk -c64: req/s, p50/p99  (nginx: `return 200`)
#   2. a 1 GiB binary output fetched by curl vs nginx's static 1 GiB file
#      (sendfile), with the daemon's peak RSS.
#   3. a 2.3 MiB in-memory output (uint8 [3,224,224] x [1,4,4], raw binary),
#      wrk -c1: the daemon reusing response bodies (--body-cache, the default)
#      against one allocating each body afresh (--body-cache 0).
#
# Reproduce: make bench   (or: sh bench/bench_http.sh [seconds])
set -eu
DUR=${1:-10}
TILED=${TILED_BIN:-build/tiled}
WORK=$(mktemp -d /tmp/tiled-bench.XXXXXX)
NGINX_PORT=18080
TILED_PORT=18081
NOCACHE_PORT=18082
cleanup() {
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  [ -n "${TPID:-}" ] && kill "$TPID" 2>/dev/null || true
  [ -n "${NPID:-}" ] && kill "$NPID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir -p "$WORK/static"
chmod 755 "$WORK" "$WORK/static"
head -c $((1 << 30)) /dev/zero > "$WORK/static/big.bin"
chmod 644 "$WORK/static/big.bin"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon on;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location = /small { return 200 '{"ok":true}'; }
    location /static/ { alias $WORK/static/; }
  }
}
CONF
taskset -c 0 nginx -c "$WORK/nginx.conf" -p "$WORK" 2>/dev/null
taskset -c 0 "$TILED" serve --port $TILED_PORT --workers 1 --log-level warn > "$WORK/tiled.out" 2> "$WORK/tiled.err" &
TPID=$!
taskset -c 0 "$TILED" serve --port $NOCACHE_PORT --workers 1 --body-cache 0 --log-level warn > "$WORK/nocache.out" 2> "$WORK/nocache.err" &
NPID=$!
until grep -q listening "$WORK/tiled.out" 2>/dev/null && grep -q listening "$WORK/nocache.out" 2>/dev/null; do sleep 0.05; done

cat > "$WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"input":{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]},"repeats":[2,2]}'
LUA

wrk_line() { # url script -> "req/s p50 p99"
  taskset -c 1 wrk -t1 -c64 -d"${DUR}s" --latency ${2:+-s "$2"} "$1" > "$WORK/wrk.txt"
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p50=$(awk '$1=="50%" {print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")
  err=$(awk '/Non-2xx|Socket errors/ {print}' "$WORK/wrk.txt" | tr '\n' ' ')
  echo "$rps $p50 $p99 $err"
}

echo "tiled HTTP benchmark ($(nproc) cores; server on core 0, client on core 1; ${DUR}s per run)"
echo "reproduce: make bench   (or: sh bench/bench_http.sh $DUR)"
echo
set -- $(wrk_line "http://127.0.0.1:$NGINX_PORT/small" "$WORK/post.lua")
NG_RPS=$1; NG_P50=$2; NG_P99=$3
set -- $(wrk_line "http://127.0.0.1:$TILED_PORT/v1/tile" "$WORK/post.lua")
TL_RPS=$1; TL_P50=$2; TL_P99=$3
echo "| small POST, wrk -c64        | req/s | p50 | p99 |"
echo "|---|---|---|---|"
echo "| nginx return 200            | $NG_RPS | $NG_P50 | $NG_P99 |"
echo "| tiled JSON tile 2x2 x [2,2] | $TL_RPS | $TL_P50 | $TL_P99 |"
echo "ratio tiled/nginx: $(awk "BEGIN {printf \"%.2f\", $TL_RPS / $NG_RPS}")"
echo

curl_speed() { taskset -c 1 curl -s -o /dev/null -w '%{speed_download}' "$@"; }
NG_SPEED=$(curl_speed "http://127.0.0.1:$NGINX_PORT/static/big.bin")
printf '\001\002\003\004' > "$WORK/in.bin"
PEAK_FILE="$WORK/peak"
( peak=0; while kill -0 $TPID 2>/dev/null; do
    r=$(awk '/VmRSS/ {print $2}' /proc/$TPID/status 2>/dev/null || echo 0)
    [ "${r:-0}" -gt "$peak" ] && peak=$r && echo $peak > "$PEAK_FILE"
    sleep 0.02
  done ) &
MON=$!
TL_SPEED=$(curl_speed -H 'Content-Type: application/octet-stream' --data-binary @"$WORK/in.bin" \
  "http://127.0.0.1:$TILED_PORT/v1/tile?dtype=uint8&shape=4&repeats=$((1 << 28))")
kill $MON 2>/dev/null || true
echo "| 1 GiB download, curl | GB/s |"
echo "|---|---|"
echo "| nginx static file (sendfile) | $(awk "BEGIN {printf \"%.2f\", $NG_SPEED / 1e9}") |"
echo "| tiled streamed binary output | $(awk "BEGIN {printf \"%.2f\", $TL_SPEED / 1e9}") |"
echo "ratio tiled/nginx: $(awk "BEGIN {printf \"%.2f\", $TL_SPEED / $NG_SPEED}"); daemon peak RSS $(($(cat "$PEAK_FILE" 2>/dev/null || echo 0) / 1024)) MiB"

# 3. Reused response bodies: the same 2.3 MiB request against both daemons.
head -c $((3 * 224 * 224)) /dev/urandom > "$WORK/img.bin"
cat > "$WORK/img.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Accept"] = "application/octet-stream"
local f = io.open("$WORK/img.bin", "rb")
wrk.body = f:read("*all")
f:close()
LUA
OUT_BYTES=$((3 * 896 * 896))
wrk_c1() { # url -> req/s
  taskset -c 1 wrk -t1 -c1 -d"${DUR}s" -s "$WORK/img.lua" "$1" | awk '/Requests\/sec/ {print $2}'
}
IMG_PATH="/v1/tile?dtype=uint8&shape=3,224,224&repeats=1,4,4"
RC_RPS=$(wrk_c1 "http://127.0.0.1:$TILED_PORT$IMG_PATH")
NC_RPS=$(wrk_c1 "http://127.0.0.1:$NOCACHE_PORT$IMG_PATH")
tile_ms() { # port -> median of the Server-Timing tile phase over 21 requests, ms
  for _ in $(seq 21); do
    taskset -c 1 curl -s -D - -o /dev/null -H 'Content-Type: application/octet-stream' \
      -H 'Accept: application/octet-stream' --data-binary @"$WORK/img.bin" "http://127.0.0.1:$1$IMG_PATH" |
      sed -n 's/.*tile;dur=\([0-9.]*\).*/\1/p'
  done | sort -n | sed -n 11p
}
RC_MS=$(tile_ms $TILED_PORT)
NC_MS=$(tile_ms $NOCACHE_PORT)
gbps() { awk "BEGIN {printf \"%.2f\", $1 * $OUT_BYTES / 1e9}"; }
echo
echo "| 2.3 MiB in-memory output | wrk -c1 req/s | GB/s of output | tile phase ms (median of 21) | tile phase GB/s |"
echo "|---|---|---|---|---|"
echo "| tiled, bodies reused (--body-cache 64M) | $RC_RPS | $(gbps "$RC_RPS") | $RC_MS | $(gbps "1000 / $RC_MS") |"
echo "| tiled, a fresh body each time (--body-cache 0) | $NC_RPS | $(gbps "$NC_RPS") | $NC_MS | $(gbps "1000 / $NC_MS") |"
echo "ratio reused/fresh: requests $(awk "BEGIN {printf \"%.2f\", $RC_RPS / $NC_RPS}"), tile phase $(awk "BEGIN {printf \"%.2f\", $NC_MS / $RC_MS}")"
echo "(the tile phase is planning plus writing the body; the rest of a request is mostly the 2.3 MiB send)"
