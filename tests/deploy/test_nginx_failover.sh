#!/bin/sh
# test_nginx_failover.sh - three tiled replicas on loopback behind nginx with
# deploy/nginx/tiled.conf (only its replica addresses and listen address are
# rewritten). wrk sends POST /v1/tile through nginx for 9 s; mid-run one
# replica is SIGKILLed and, later, another gets SIGTERM and drains. Checks:
# not one failed request (wrk: no socket errors, no non-2xx; nginx: every
# status 200), the survivors keep taking requests after the kill (their
# tiled_requests_total grows), the drained replica exits 0, and the last one
# serves alone to the end. Before the load: a page behind nginx is at home
# (its Origin matches the Host nginx passes on), another origin gets 403.
#
#   TILED_BIN=build/tiled sh tests/deploy/test_nginx_failover.sh
#   TILED_NGINX_CONF=other.conf ...    checks another config the same way
#
# Needs nginx (Debian: nginx-light), wrk, curl and /usr/bin/python3.
# ok and bad always succeed, so "test && ok || bad" is an if-else here.
# shellcheck disable=SC2015
set -u
cd "$(dirname "$0")/../.." || exit 1
: "${TILED_BIN:=build/tiled}"
: "${TILED_NGINX_CONF:=deploy/nginx/tiled.conf}"
PY=/usr/bin/python3
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
DURATION=9
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
finish() { echo "nginx-failover: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

for t in "$NGINX" wrk curl "$PY"; do
  if ! command -v "$t" >/dev/null 2>&1; then
    echo "nginx-failover: $t not found (apt-get install nginx-light wrk curl python3)" >&2
    bad "missing $t"
    finish
  fi
done
[ -x "$TILED_BIN" ] || { echo "nginx-failover: $TILED_BIN not built" >&2; bad "missing $TILED_BIN"; finish; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiled-nginx.XXXXXX")
chmod 755 "$tmp" # nginx workers (nobody when started as root) use the temp dirs
pids=""
ngx=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  for p in $pids; do kill -KILL "$p" 2>/dev/null; done
  [ -n "$ngx" ] && kill -TERM "$ngx" 2>/dev/null && wait "$ngx" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ports=$($PY -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')
# shellcheck disable=SC2086 # four words
set -- $ports
pa=$1 pb=$2 pc=$3 pn=$4

start_replica() { # port -> pid in $rp
  "$TILED_BIN" serve --host 127.0.0.1 --port "$1" --workers 1 --log-level warn --drain-timeout 5 \
    > "$tmp/tiled-$1.log" 2>&1 &
  rp=$!
  pids="$pids $rp"
}
start_replica "$pa"; ra=$rp
start_replica "$pb"; rb=$rp
start_replica "$pc"; rc=$rp

# nginx.conf: deploy/nginx/tiled.conf with these replicas and this listener.
$PY - "$TILED_NGINX_CONF" "$tmp/tiled.conf" "$pn" "$pa" "$pb" "$pc" <<'EOF'
import re, sys
src, dst, listen, *replicas = sys.argv[1:]
text = open(src).read()
up = re.search(r"upstream tiled \{.*?\n\}", text, re.S)
servers = re.findall(r"^\s*server\s+\S+(.*);$", up.group(0), re.M)
assert len(servers) >= 2, "upstream lists fewer than two replicas"
params = servers[0]
body = re.sub(r"^\s*server\s+\S+.*;\n", "", up.group(0), flags=re.M)
lines = "".join("    server 127.0.0.1:%s%s;\n" % (p, params) for p in replicas)
body = body.replace("upstream tiled {\n", "upstream tiled {\n" + lines, 1)
text = text.replace(up.group(0), body)
text = re.sub(r"^(\s*)listen\s+\[::\].*;\n", "", text, flags=re.M)
text = re.sub(r"^(\s*)listen\s+\S+;", r"\1listen 127.0.0.1:%s;" % listen, text, flags=re.M)
open(dst, "w").write(text)
EOF
cat > "$tmp/nginx.conf" <<EOF
daemon off;
worker_processes 2;
pid $tmp/nginx.pid;
error_log $tmp/error.log warn;
events { worker_connections 1024; }
http {
    log_format failover '\$status \$upstream_addr \$upstream_status \$request_time';
    access_log $tmp/access.log failover;
    client_body_temp_path $tmp/client_body;
    proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fastcgi;
    uwsgi_temp_path $tmp/uwsgi;
    scgi_temp_path $tmp/scgi;
    include $tmp/tiled.conf;
}
EOF
if "$NGINX" -t -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/error.log" > "$tmp/nginx-t.log" 2>&1; then
  ok "nginx -t accepts $TILED_NGINX_CONF"
else
  cat "$tmp/nginx-t.log" >&2
  bad "nginx -t rejects the configuration"
  finish
fi
"$NGINX" -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/error.log" 2>"$tmp/nginx.stderr" &
ngx=$!

up() { "$TILED_BIN" probe "$1" >/dev/null 2>&1; }
i=0
until up "http://127.0.0.1:$pa/v2/health/ready" && up "http://127.0.0.1:$pb/v2/health/ready" &&
      up "http://127.0.0.1:$pc/v2/health/ready" && up "http://127.0.0.1:$pn/v2/health/ready"; do
  i=$((i + 1))
  if [ $i -ge 100 ]; then bad "replicas or nginx not ready after 10 s"; cat "$tmp/error.log" >&2; finish; fi
  sleep 0.1
done
ok "three replicas and nginx ready"

body='{"input": {"dtype": "float32", "shape": [2,2], "data": [1,2,3,4]}, "repeats": [1,2]}'
got=$(curl -sS -m 5 "http://127.0.0.1:$pn/v1/tile" -H 'Content-Type: application/json' -d "$body")
case "$got" in *'"data":[1.0,2.0,1.0,2.0,3.0,4.0,3.0,4.0]'*) ok "POST /v1/tile through nginx" ;; *) bad "POST /v1/tile through nginx: $got" ;; esac
rid=$(curl -sS -m 5 -o /dev/null -D - "http://127.0.0.1:$pn/v1/tile" -H 'X-Request-Id: failover-test-1' \
      -H 'Content-Type: application/json' -d "$body" | tr -d '\r' | sed -n 's/^[Xx]-[Rr]equest-[Ii]d: //p')
[ "$rid" = failover-test-1 ] && ok "X-Request-Id passes through nginx" || bad "X-Request-Id through nginx: '$rid'"
# A page served through nginx is at home: nginx passes the Host it was sent,
# port included, and tiled takes an Origin with that host and port for its
# own. A page on another origin is refused (403) by the replica.
code() { curl -sS -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$pn/v1/tile" -H "Origin: $1" \
           -H 'Content-Type: application/json' -d "$body"; }
st=$(code "http://127.0.0.1:$pn")
[ "$st" = 200 ] && ok "same-origin page through nginx: 200" || bad "same-origin page through nginx: $st"
st=$(code "http://elsewhere.example")
[ "$st" = 403 ] && ok "page on another origin through nginx: 403" || bad "page on another origin through nginx: $st"

count() { # port -> total /v1/tile requests answered 200 by that replica
  curl -fsS -m 2 "http://127.0.0.1:$1/metrics" 2>/dev/null |
    awk '/^tiled_requests_total\{/ && /route="\/v1\/tile"/ && /code="200"/ { n += $NF } END { print n + 0 }'
}

cat > "$tmp/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
EOF
WRK_CONNS=16
wrk -t 2 -c "$WRK_CONNS" -d "${DURATION}s" --timeout 5s -s "$tmp/post.lua" "http://127.0.0.1:$pn/v1/tile" > "$tmp/wrk.out" 2>&1 &
wrk_pid=$!

sleep 2
a0=$(count "$pa"); b0=$(count "$pb"); c0=$(count "$pc")
kill -KILL "$ra"
wait "$ra" 2>/dev/null
echo "nginx-failover: SIGKILL replica :$pa after 2 s ($a0 requests served; :$pb $b0, :$pc $c0)"
sleep 3
b1=$(count "$pb"); c1=$(count "$pc")
kill -TERM "$rb"
t0=$(date +%s)
wait "$rb"
rb_status=$?
t1=$(date +%s)
echo "nginx-failover: SIGTERM replica :$pb after 5 s; exited $rb_status after $((t1 - t0)) s"
sleep 1
c2=$(count "$pc")
wait "$wrk_pid"
wrk_status=$?
c3=$(count "$pc")
sed 's/^/  wrk| /' "$tmp/wrk.out"

[ "$wrk_status" = 0 ] && ok "wrk ran" || bad "wrk exited $wrk_status"
total=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
[ "${total:-0}" -gt 1000 ] && ok "load: $total requests in ${DURATION} s" || bad "load too small: '${total:-}' requests"
grep -q 'Socket errors' "$tmp/wrk.out" && bad "wrk socket errors: $(grep 'Socket errors' "$tmp/wrk.out")" || ok "no socket errors"
grep -q 'Non-2xx' "$tmp/wrk.out" && bad "wrk: $(grep 'Non-2xx' "$tmp/wrk.out")" || ok "no non-2xx responses"

# nginx's own record of every request, retried ones included.
kill -QUIT "$ngx" 2>/dev/null; wait "$ngx" 2>/dev/null; ngx=""
# wrk stops on the clock and closes its connections with their last requests
# in flight: nginx logs those as 499 (client closed). At most one per wrk
# connection is that; any other status, or more 499s, is a failure.
# One 403 is the other origin's request above.
non200=$(awk '$1 != 200 && $1 != 499 && $1 != 403' "$tmp/access.log" | wc -l)
refused=$(awk '$1 == 403' "$tmp/access.log" | wc -l)
aborted=$(awk '$1 == 499' "$tmp/access.log" | wc -l)
logged=$(wc -l < "$tmp/access.log")
retried=$(awk '$2 ~ /,/' "$tmp/access.log" | wc -l)
[ "$non200" -eq 0 ] && [ "$refused" -eq 1 ] && [ "$aborted" -le "$WRK_CONNS" ] &&
  ok "nginx: all $logged requests answered 200 ($retried retried on another replica, $aborted abandoned by wrk at its stop)" ||
  bad "nginx: $non200 of $logged requests not 200 (nor the one 403: $refused), $aborted abandoned: $(awk '$1 != 200' "$tmp/access.log" | sort | uniq -c | head -n 5)"

[ "$a0" -gt 0 ] && [ "$b0" -gt 0 ] && [ "$c0" -gt 0 ] && ok "all three replicas took traffic before the kill ($a0, $b0, $c0)" ||
  bad "traffic not spread before the kill ($a0, $b0, $c0)"
[ "$b1" -gt "$b0" ] && [ "$c1" -gt "$c0" ] && ok "both survivors kept taking traffic after the kill (+$((b1 - b0)), +$((c1 - c0)))" ||
  bad "survivors after the kill: :$pb $b0 -> $b1, :$pc $c0 -> $c1"
[ "$rb_status" = 0 ] && ok "SIGTERMed replica drained and exited 0" || bad "SIGTERMed replica exited $rb_status"
[ "$c3" -gt "$c2" ] && ok "last replica served alone to the end (+$((c3 - c2)))" || bad "last replica: $c2 -> $c3"
kill -TERM "$rc" 2>/dev/null; wait "$rc"
rc_status=$?
[ "$rc_status" = 0 ] && ok "last replica exits 0 on SIGTERM" || bad "last replica exited $rc_status"
pids=""
finish
