#!/bin/sh
# test_systemd.sh - checks deploy/systemd/tiled.service:
#   1. the required keys (grep; always);
#   2. `systemd-analyze verify` on a copy whose ExecStart is the built binary,
#      and `systemd-analyze security --offline=yes` exposure at most 2.0
#      (when systemd-analyze exists);
#   3. the daemon under strace through a session of requests, SIGHUP and
#      SIGTERM: every system call it makes is allowed by the unit's
#      SystemCallFilter (expanded with `systemd-analyze syscall-filter`), its
#      sockets are of the families in RestrictAddressFamilies and it never
#      maps memory writable and executable (MemoryDenyWriteExecute) (when
#      strace and systemd-analyze exist).
# The unit itself is not started: that needs systemd as PID 1.
#
#   TILED_BIN=build/tiled sh tests/deploy/test_systemd.sh
#   TILED_UNIT=other.service ...       checks another unit the same way
# ok and bad always succeed, so "test && ok || bad" is an if-else here.
# shellcheck disable=SC2015
set -u
cd "$(dirname "$0")/../.." || exit 1
: "${TILED_BIN:=build/tiled}"
UNIT=${TILED_UNIT:-deploy/systemd/tiled.service}
PY=/usr/bin/python3
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
skip() { echo "skip: $*"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiled-systemd.XXXXXX")
spid=""
cleanup() { [ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- 1. keys --------------------------------------------------------------------
has() { # has KEY REGEX: a line KEY=VALUE whose value matches REGEX
  grep -Eq "^$1=($2)[[:space:]]*$" "$UNIT"
}
for kv in \
  "Type|exec|simple" \
  "ExecStart|/usr/local/bin/tiled serve" \
  "DynamicUser|yes|true" \
  "ProtectSystem|strict" \
  "ProtectHome|yes|true" \
  "PrivateTmp|yes|true" \
  "NoNewPrivileges|yes|true" \
  "ProtectKernelTunables|yes|true" \
  "ProtectKernelModules|yes|true" \
  "ProtectKernelLogs|yes|true" \
  "RestrictAddressFamilies|AF_INET AF_INET6 AF_UNIX" \
  "CapabilityBoundingSet|" \
  "SystemCallFilter|@system-service" \
  "MemoryDenyWriteExecute|yes|true" \
  "LockPersonality|yes|true" \
  "KillSignal|SIGTERM" \
  "Restart|on-failure" \
  "EnvironmentFile|-/etc/default/tiled" \
  "Environment|TILED_GRPC_PORT=8081"; do
  key=${kv%%|*}
  val=${kv#*|}
  if has "$key" "$val"; then ok "$key=${val%%|*}"; else bad "$key=${val%%|*} missing"; fi
done
drain=$("$TILED_BIN" serve --print-config 2>/dev/null | sed -n 's/^drain-timeout = //p')
drain=${drain:-20}
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s\{0,1\}[[:space:]]*$/\1/p' "$UNIT")
if [ -n "$stop" ] && [ "$stop" -gt "$drain" ]; then
  ok "TimeoutStopSec=$stop above the drain timeout ($drain s)"
else
  bad "TimeoutStopSec '${stop:-}' not above the drain timeout ($drain s)"
fi
grep -Eq '^(User|Group)=' "$UNIT" && bad "User=/Group= set next to DynamicUser" || ok "no fixed User= or Group="

# --- 2. systemd-analyze -----------------------------------------------------------
if ! command -v systemd-analyze >/dev/null 2>&1; then
  skip "systemd-analyze not installed (Debian: systemd); verify, security and the syscall filter not checked"
  echo "systemd: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]; exit
fi
bin=$(cd "$(dirname "$TILED_BIN")" && pwd)/$(basename "$TILED_BIN")
mkdir -p "$tmp/man/man1"
cp deploy/man/tiled.1 "$tmp/man/man1/" 2>/dev/null
sed "s|^ExecStart=/usr/local/bin/tiled |ExecStart=$bin |" "$UNIT" > "$tmp/tiled.service"
if MANPATH="$tmp/man" systemd-analyze verify "$tmp/tiled.service" > "$tmp/verify.log" 2>&1 && [ ! -s "$tmp/verify.log" ]; then
  ok "systemd-analyze verify"
else
  bad "systemd-analyze verify: $(cat "$tmp/verify.log")"
fi
systemd-analyze security --offline=yes "$tmp/tiled.service" > "$tmp/security.log" 2>&1
exposure=$(sed -n 's/.*Overall exposure level for tiled.service: \([0-9.]*\).*/\1/p' "$tmp/security.log")
if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
  ok "systemd-analyze security: exposure $exposure (at most 2.0)"
else
  bad "systemd-analyze security: exposure '${exposure:-?}'"; tail -n 5 "$tmp/security.log" >&2
fi

# --- 3. the daemon inside the unit's limits ----------------------------------------
if ! command -v strace >/dev/null 2>&1; then
  skip "strace not installed; system calls not checked against SystemCallFilter"
  echo "systemd: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]; exit
fi
free_port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
gport=$(free_port)
strace -f -qq -o "$tmp/trace" -e trace=all -e signal=none \
  env -i TILED_HOST=127.0.0.1 TILED_PORT="$port" TILED_GRPC_PORT="$gport" TILED_LOG_LEVEL=warn "$bin" serve > "$tmp/serve.log" 2>&1 &
spid=$!
i=0
until "$bin" probe "http://127.0.0.1:$port/v2/health/ready" >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.1
done
url=http://127.0.0.1:$port
{
  curl -s "$url/v1/tile" -H 'Content-Type: application/json' \
    -d '{"input": {"dtype": "float32", "shape": [2,2], "data": [1,2,3,4]}, "repeats": [1,2]}'
  printf '\001\002\003' | curl -s --data-binary @- -H 'Content-Type: application/octet-stream' "$url/v1/tile?dtype=uint8&shape=3&repeats=2"
  printf '{"input": {"dtype": "int32", "data": [1,2,3]}, "repeats": [2]}' | gzip |
    curl -s --data-binary @- -H 'Content-Type: application/json' -H 'Content-Encoding: gzip' -H 'Accept-Encoding: gzip' "$url/v1/tile"
  # A streamed output (above the 8M stream threshold), then bad input.
  head -c 1024 /dev/zero | curl -s -o /dev/null --data-binary @- -H 'Content-Type: application/octet-stream' \
    "$url/v1/tile?dtype=uint8&shape=1024&repeats=16384"
  curl -s "$url/v1/tile" -H 'Content-Type: application/json' -d '{"input": '
  curl -s "$url/v2/models/tile"; curl -s "$url/v2/health/live"; curl -s "$url/metrics"; curl -s "$url/openapi.json"
} > "$tmp/answers" 2>&1
# gRPC over h2c (curl with nghttp2): ServerLive, and a ModelInfer whose 16 MiB
# output is tiled on a worker and streamed (uint8 [1024] x [16384]).
$PY - "$tmp/infer.grpc" <<'PY'
import struct, sys
def varint(n):
    out = b""
    while n > 0x7F:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])
def ld(number, payload):  # a length-delimited protobuf field
    return bytes([number << 3 | 2]) + varint(len(payload)) + payload
def tensor(name, dtype, dim):
    return ld(1, name) + ld(2, dtype) + ld(3, varint(dim))
msg = (ld(1, b"tile") + ld(5, tensor(b"input", b"UINT8", 1024)) + ld(5, tensor(b"repeats", b"INT64", 1))
       + ld(7, bytes(range(256)) * 4) + ld(7, struct.pack("<q", 16384)))
open(sys.argv[1], "wb").write(b"\0" + struct.pack(">I", len(msg)) + msg)
PY
printf '\000\000\000\000\000' > "$tmp/live.grpc"
grpc_call() { # RPC REQUEST-FILE [CURL-OPTION...]
  rpc=$1 req=$2
  shift 2
  curl -s --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$req" "$@" "http://127.0.0.1:$gport/inference.GRPCInferenceService/$rpc"
}
grpc_live=$(grpc_call ServerLive "$tmp/live.grpc" | od -An -v -tx1 | tr -d ' \n')
grpc_out=$(grpc_call ModelInfer "$tmp/infer.grpc" -o /dev/null -w '%{size_download}')
# strace's child is the daemon (env execs it).
tpid=$(ps -o pid= --ppid "$spid" | tr -d ' ' | head -n 1)
kill -HUP "${tpid:-$spid}" 2>/dev/null; sleep 0.2
kill -TERM "${tpid:-$spid}" 2>/dev/null
wait "$spid"
status=$?
spid=""
grep -q '"output"' "$tmp/answers" && [ "$status" = 0 ] && ok "traced daemon served requests and exited 0 on SIGTERM" ||
  bad "traced daemon: status $status, answers: $(head -c 300 "$tmp/answers")"
[ "$grpc_live" = 00000000020801 ] && [ "${grpc_out:-0}" -gt $((16 << 20)) ] &&
  ok "traced daemon answered gRPC: ServerLive live, a 16 MiB ModelInfer output" ||
  bad "traced daemon over gRPC: ServerLive '$grpc_live', ModelInfer ${grpc_out:-?} bytes"

systemd-analyze syscall-filter > "$tmp/groups" 2>/dev/null
{ $PY - "$UNIT" "$tmp/groups" "$tmp/trace" <<'EOF'
import re, sys
unit, groups_file, trace = sys.argv[1:]
groups, cur = {}, None
for line in open(groups_file):
    if line.startswith("@"):
        cur = groups.setdefault(line.split()[0], set())
    elif line.startswith("    ") and cur is not None and not line.strip().startswith("#"):
        cur.add(line.strip())
    elif not line.strip():
        cur = None
def expand(names, seen=()):
    out = set()
    for n in names:
        if n.startswith("@"):
            if n not in seen:
                out |= expand(groups.get(n, ()), seen + (n,))
        else:
            out.add(n)
    return out
allow, deny = set(), set()
for line in open(unit):
    m = re.match(r"SystemCallFilter=(~?)(.*)", line.strip())
    if m:
        names = expand(m.group(2).split())
        (deny if m.group(1) else allow).update(names)
allowed = allow - deny
used, families, wx = set(), set(), []
call = re.compile(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]")
for line in open(trace):
    m = call.match(line)
    if m:
        used.add(m.group(1))
    s = re.search(r"\bsocket\((AF_[A-Z0-9]+)", line)
    if s:
        families.add(s.group(1))
    if re.search(r"\b(mmap|mprotect|pkey_mprotect)\(", line) and "PROT_WRITE" in line and "PROT_EXEC" in line:
        wx.append(line.strip())
# The trace starts in env(1) and the exec itself, before the filter applies.
used.discard("execve")
passed = failed = 0
def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1; print("ok: " + name)
    else:
        failed += 1; print("FAIL: %s %s" % (name, detail), file=sys.stderr)
check("SystemCallFilter expands to %d allowed calls" % len(allowed), len(allowed) > 100, len(allowed))
check("the daemon made %d distinct system calls" % len(used), len(used) > 20, sorted(used))
outside = sorted(used - allowed)
check("every one of them is allowed by SystemCallFilter", not outside, outside)
ra = next((l.split("=", 1)[1].split() for l in open(unit) if l.startswith("RestrictAddressFamilies=")), [])
check("socket families %s within RestrictAddressFamilies" % sorted(families), families and families <= set(ra), ra)
check("no writable and executable mapping (MemoryDenyWriteExecute)", not wx, wx[:3])
print("RESULT %d %d" % (passed, failed))
EOF
} 2>&1 | tee "$tmp/py.out" | grep -v '^RESULT'
res=$(sed -n 's/^RESULT //p' "$tmp/py.out")
pass=$((pass + ${res%% *}))
fail=$((fail + ${res##* }))

echo "systemd: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
