#!/bin/sh
# bench_http.sh - the daemon beside nginx, same run, same layout: server on
# core 0, load generator (wrk or curl) on core 1, loopback only.
#
#   1. small JSON tile request, wrk -c64: req/s, p50/p99  (nginx: `return 200`)
#   2. a 1 GiB binary output fetched by curl vs nginx's static 1 GiB file
#      (sendfile), with the daemon's peak RSS.
#
# Reproduce: make bench   (or: sh bench/bench_http.sh [seconds])
set -eu
DUR=${1:-10}
TILED=${TILED_BIN:-build/tiled}
WORK=$(mktemp -d /tmp/tiled-bench.XXXXXX)
NGINX_PORT=18080
TILED_PORT=18081
cleanup() {
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  [ -n "${TPID:-}" ] && kill "$TPID" 2>/dev/null || true
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
until grep -q listening "$WORK/tiled.out" 2>/dev/null; do sleep 0.05; done

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
