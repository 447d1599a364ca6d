#!/bin/sh
# transport_syscalls.sh - `make bench-transport-syscalls`: system calls per
# request of bench/mhd_floor.c, bench/relay_floor.c (over a socketpair, and
# as relay_tcp over loopback TCP) and bench/own_floor.c (see
# bench/transport_options.sh) under the same load: each server pinned
# to core 0, `wrk -t1 -cN -d${DUR}s` pinned to core 1, its calls counted
# over the whole wrk run and divided by the requests wrk completed.
#
#   sh bench/transport_syscalls.sh [--bin DIR] [--conns 16] [--dur 2] [--strace]
#
# By default the count comes from the kernel's syscall tracepoints through
# `perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_NAME... -p PID`,
# which leaves the servers at full speed; --strace counts with
# `strace -c -f -p PID` instead (every call stops the server, so requests
# batch less per epoll_wait and the figures are an upper bound).
set -eu

bin=build/bench
conns=16
dur=2
tool=perf
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --conns) conns=$2; shift 2 ;;
    --dur) dur=$2; shift 2 ;;
    --strace) tool=strace; shift ;;
    *) echo "usage: $0 [--bin DIR] [--conns N] [--dur S] [--strace]" >&2; exit 2 ;;
  esac
done
for t in wrk taskset "$tool" python3; do
  command -v "$t" > /dev/null || { echo "transport_syscalls: $t is missing" >&2; exit 1; }
done

tmp=$(mktemp -d)
srv=""
mon=""
cleanup() {
  [ -n "$mon" ] && kill -INT "$mon" 2> /dev/null && wait "$mon" 2> /dev/null
  [ -n "$srv" ] && kill -TERM "$srv" 2> /dev/null && wait "$srv" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' HUP INT TERM PIPE

names="read write recvfrom sendmsg sendto setsockopt epoll_wait epoll_ctl writev"
events=raw_syscalls:sys_enter
for n in $names; do events="$events,syscalls:sys_enter_$n"; done

echo "| server | requests | syscalls/request | $(echo "$names" | sed 's/ / | /g') |"
echo "|---|---:|---:|$(for n in $names; do printf -- '---:|'; done)"
for b in mhd_floor relay_floor relay_tcp own_floor; do
  p=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  case $b in
    relay_tcp) taskset -c 0 "$bin/relay_floor" "$p" tcp > "$tmp/$b.log" 2>&1 & ;;
    *) taskset -c 0 "$bin/$b" "$p" > "$tmp/$b.log" 2>&1 & ;;
  esac
  srv=$!
  i=0
  until [ -s "$tmp/$b.log" ]; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "transport_syscalls: $b did not start" >&2; exit 1; }
    sleep 0.05
  done
  if [ "$tool" = perf ]; then
    perf stat -x, -e "$events" -p "$srv" -o "$tmp/count" &
  else
    strace -c -f -p "$srv" -o "$tmp/count" 2> /dev/null &
  fi
  mon=$!
  sleep 0.5
  taskset -c 1 wrk -t1 -c"$conns" -d"${dur}s" "http://127.0.0.1:$p/small" > "$tmp/wrk" 2>&1
  sleep 0.2
  kill -INT "$mon"
  wait "$mon" || true
  mon=""
  kill -TERM "$srv"
  wait "$srv" || true
  srv=""
  req=$(awk '/requests in/ {print $1}' "$tmp/wrk")
  python3 - "$tool" "$tmp/count" "$req" "$b" "$names" << 'EOF'
import re, sys
tool, path, req, name, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5].split()
count = {}
for line in open(path):
    if tool == "perf":
        f = line.strip().split(",")
        if len(f) > 2 and f[0].isdigit():
            ev = f[2]
            count["total" if ev == "raw_syscalls:sys_enter" else ev.replace("syscalls:sys_enter_", "")] = int(f[0])
    else:
        f = line.split()
        if len(f) >= 5 and f[3].isdigit():
            count[f[-1]] = int(f[3])
if tool == "strace":
    count["total"] = sum(v for k, v in count.items() if k != "total")
print("| %s | %d | %.2f | %s |" % (name, req, count.get("total", 0) / req,
                                   " | ".join("%.2f" % (count.get(n, 0) / req) for n in names)))
EOF
done
echo
echo "Command: sh bench/transport_syscalls.sh --bin $bin --conns $conns --dur $dur$([ "$tool" = strace ] && echo ' --strace')" \
  "(counted by $tool over the whole run of taskset -c 1 wrk -t1 -c$conns -d${dur}s; servers on core 0)"
