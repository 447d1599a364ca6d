#!/bin/sh
# transport_options.sh - `make bench-transport-options`: the two designs
# that keep strict framing in front of the HTTP transport without
# interposing recv(), measured against libmicrohttpd's own floor and nginx,
# same run (issue 31):
#
#   nginx        nginx `return 200`, one worker (the configuration of
#                bench/peers/run.py's nginx_conf)
#   mhd_floor    bench/mhd_floor.c: libmicrohttpd 0.9.75 alone, its own epoll thread
#   relay_floor  bench/relay_floor.c, design A: the application's epoll loop owns
#                the socket, h1wire.c judges the bytes, a socketpair carries them
#                to libmicrohttpd in external epoll mode (same thread) and the
#                replies back
#   relay_tcp    the same, its inner hop a loopback TCP connection instead of a
#                socketpair (`relay_floor PORT tcp`): the hop's cost apart from
#                the library's two failing setsockopt calls per reply on AF_UNIX
#   own_floor    bench/own_floor.c, design B: the application's epoll loop reads,
#                frames with h1wire.c and writes the reply itself; no library
#
# The floors answer every request with the same bytes (checked first: curl,
# then two pipelined requests in one write, the same in 3-byte pieces, the
# same followed by the client's shutdown of its sending side, and a
# Content-Length body followed by a Connection: close request). Then each
# server pinned to core 0, `wrk -t1 -cN --latency` pinned to core 1, 3 s per
# point, N = 16 and 64; ROUNDS rounds, each taking every point for every
# server back to back; the table gives the medians of requests/s, of p99
# latency and of the server's CPU time per request, with ratios to mhd_floor.
#
#   sh bench/transport_options.sh [--bin DIR] [--rounds 4] [--dur 3] [--conns "16 64"]
#
# DIR holds mhd_floor, relay_floor and own_floor (default build/bench).
# Traffic goes to 127.0.0.1 only; every process started here is stopped here.
set -eu

bin=build/bench
rounds=4
dur=3
conns="16 64"
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dur) dur=$2; shift 2 ;;
    --conns) conns=$2; shift 2 ;;
    *) echo "usage: $0 [--bin DIR] [--rounds N] [--dur S] [--conns \"16 64\"]" >&2; exit 2 ;;
  esac
done
for t in wrk nginx taskset curl python3; do
  command -v "$t" > /dev/null || { echo "transport_options: $t is missing (sh scripts/deps.sh bench installs it)" >&2; exit 1; }
done
for b in mhd_floor relay_floor own_floor; do
  [ -x "$bin/$b" ] || { echo "transport_options: $bin/$b is not built" >&2; exit 1; }
done

tmp=$(mktemp -d)
pids=""
stop_all() {
  for p in $pids; do kill -TERM "$p" 2> /dev/null || true; done
  for p in $pids; do wait "$p" 2> /dev/null || true; done
  rm -rf "$tmp"
}
trap stop_all EXIT
trap 'exit 130' HUP INT TERM PIPE

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# nginx, as bench/peers/run.py's nginx_conf writes it (without the static files).
p_nginx=$(port)
mkdir -p "$tmp/nginx"
cat > "$tmp/nginx/nginx.conf" << EOF
worker_processes 1;
daemon off;
user root;
pid $tmp/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000000;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  server {
    listen 127.0.0.1:$p_nginx;
    location = /small { return 200 '{"ok":true}'; }
  }
}
EOF
taskset -c 0 nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" > "$tmp/nginx.log" 2>&1 &
pids="$pids $!"
servers="nginx"
echo "$p_nginx" > "$tmp/port.nginx"
echo "$!" > "$tmp/pid.nginx"
for s in mhd_floor relay_floor relay_tcp own_floor; do
  p=$(port)
  case $s in
    relay_tcp) taskset -c 0 "$bin/relay_floor" "$p" tcp > "$tmp/$s.log" 2>&1 & ;;
    *) taskset -c 0 "$bin/$s" "$p" > "$tmp/$s.log" 2>&1 & ;;
  esac
  pids="$pids $!"
  servers="$servers $s"
  echo "$p" > "$tmp/port.$s"
  echo "$!" > "$tmp/pid.$s"
done
for s in $servers; do
  p=$(cat "$tmp/port.$s")
  i=0
  until curl -fs -o /dev/null "http://127.0.0.1:$p/small"; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "transport_options: $s did not answer on port $p" >&2; exit 1; }
    sleep 0.05
  done
done
# nginx serves from its one worker, the master's child.
master=$(cat "$tmp/pid.nginx")
cut -d' ' -f1 < "/proc/$master/task/$master/children" > "$tmp/pid.nginx"

# The floors' replies: the same bytes (Date aside), two for two pipelined requests.
python3 - "$(cat "$tmp/port.mhd_floor")" "$(cat "$tmp/port.relay_floor")" "$(cat "$tmp/port.relay_tcp")" \
  "$(cat "$tmp/port.own_floor")" << 'EOF'
import re, socket, sys, time

def exchange(port, data, piece, half_close=False):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.5)
    for i in range(0, len(data), piece):
        s.sendall(data[i:i + piece])
        if piece < len(data):
            time.sleep(0.002)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except socket.timeout:
        pass
    s.close()
    return re.sub(rb"Date: [^\r]*", b"Date: -", out)

req = b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n"
cases = [("two pipelined in one write", req + req, 1 << 20, False), ("the same in 3-byte pieces", req + req, 3, False),
         ("the same, then the client shuts its sending side", req + req, 1 << 20, True),
         ("a body, then Connection: close", b"POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
          + b"GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1 << 20, False)]
names = ["mhd_floor", "relay_floor", "relay_tcp", "own_floor"]
bad = 0
for label, data, piece, half in cases:
    got = [exchange(int(p), data, piece, half) for p in sys.argv[1:]]
    n = got[0].count(b"HTTP/1.1 200 OK")
    for name, g in zip(names, got):
        if g != got[0] or n != 2:
            print("transport_options: %s, %s: %d replies, %s mhd_floor's bytes" %
                  (name, label, g.count(b"HTTP/1.1 200 OK"), "same as" if g == got[0] else "not"), file=sys.stderr)
            bad += 1
if bad:
    sys.exit(1)
print("checked: mhd_floor, relay_floor (both hops) and own_floor send the same bytes (Date aside), two replies for two "
      "pipelined requests, whole, in 3-byte pieces or followed by the client's shutdown", file=sys.stderr)
EOF

# The CPU time a process has used, in clock ticks (user + system).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# One point: requests/s and p99 (microseconds) of wrk against a server, and
# the server's CPU time per request (microseconds): wrk on one core can be
# the limit, the server's own cost per request is measured either way.
point() { # point SERVER CONNS
  p=$(cat "$tmp/port.$1")
  pid=$(cat "$tmp/pid.$1")
  t0=$(ticks "$pid")
  out=$(taskset -c 1 wrk -t1 -c"$2" -d"${dur}s" --latency "http://127.0.0.1:$p/small" 2>&1)
  t1=$(ticks "$pid")
  n=$(printf '%s\n' "$out" | awk '/requests in/ {print $1}')
  rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec:/ {print $2}')
  p99=$(printf '%s\n' "$out" | awk '$1 == "99%" {v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
        f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1000000 : 0; printf "%.0f", v * f}')
  errs=$(printf '%s\n' "$out" | grep -E 'Non-2xx|Socket errors' || true)
  if [ -z "$rps" ] || [ -z "$p99" ] || [ -n "$errs" ]; then
    echo "transport_options: $1 at $2 connections: ${errs:-no result}" >&2
    printf '%s\n' "$out" >&2
    exit 1
  fi
  echo "$1 $2 $rps $p99 $(awk -v t="$((t1 - t0))" -v hz="$hz" -v n="$n" 'BEGIN {printf "%.3f", t * 1e6 / hz / n}')" >> "$tmp/points"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
r=1
while [ $r -le "$rounds" ]; do
  for c in $conns; do
    for s in $servers; do point "$s" "$c"; done
  done
  echo "round $r of $rounds done ($(awk -v r="$r" 'END {print NR}' "$tmp/points") points)" >&2
  r=$((r + 1))
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$tmp/points" "$conns" "$servers" "$rounds" "$dur" << 'EOF'
import statistics, sys
pts = {}
for line in open(sys.argv[1]):
    s, c, rps, p99, cpu = line.split()
    pts.setdefault((s, int(c)), []).append((float(rps), int(p99), float(cpu)))
conns = [int(c) for c in sys.argv[2].split()]
servers = sys.argv[3].split()
label = {"nginx": "nginx `return 200`", "mhd_floor": "mhd_floor (libmicrohttpd alone, its own epoll thread)",
         "relay_floor": "relay_floor (A: own socket, h1wire, socketpair to libmicrohttpd in external epoll mode)",
         "relay_tcp": "relay_floor tcp (A, its inner hop loopback TCP)",
         "own_floor": "own_floor (B: own reader and writer with h1wire, no library)"}
med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in pts.items()}
head = "| server |" + "".join(" %d conns req/s | x mhd_floor | p99 | server CPU us/req | x mhd_floor |" % c
                              for c in conns)
print(head)
print("|---|" + "---:|---:|---:|---:|---:|" * len(conns))
for s in servers:
    row = "| %s |" % label.get(s, s)
    for c in conns:
        rps, p99, cpu = med[(s, c)]
        f = med[("mhd_floor", c)]
        row += " %.1fk | %.2fx | %s | %.2f | %.2fx |" % (
            rps / 1000, rps / f[0], "%.2f ms" % (p99 / 1000) if p99 >= 1000 else "%d us" % p99, cpu, cpu / f[2])
    print(row)
print()
print("Medians of %s rounds x %s s per point; each round loads every server back to back. "
      "Servers pinned to core 0 (taskset -c 0), wrk -t1 --latency pinned to core 1." % (sys.argv[4], sys.argv[5]))
print("Server CPU us/req: the server's user + system time (/proc/PID/stat, the nginx worker's for nginx) over "
      "the point, divided by the requests wrk completed; when wrk on its one core is the limit, req/s ratios "
      "flatten towards 1 and this column still tells the servers apart.")
print("Each point's requests/s of the rounds: " + "; ".join(
    "%s/%d: %s" % (s, c, " ".join("%.0fk" % (x[0] / 1000) for x in pts[(s, c)])) for c in conns for s in servers))
EOF
echo
echo "Command: sh bench/transport_options.sh --bin $bin --rounds $rounds --dur $dur --conns \"$conns\"" \
  "(wrk: taskset -c 1 wrk -t1 -cN -d${dur}s --latency http://127.0.0.1:PORT/small)"
