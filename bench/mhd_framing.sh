#!/bin/sh
# mhd_framing.sh - `make bench-mhd-framing`: the framing table of
# tests/server/test_framing.py against libmicrohttpd alone (bench/mhd_floor.c
# at each discipline level its version has) and against tiled, one line of
# counts each (bench/mhd_framing.py says what the classes mean).
#   MHD_FLOOR=build/bench/mhd_floor TILED_BIN=build/tiled sh bench/mhd_framing.sh
# A floor built against another libmicrohttpd (e.g. 1.0.1 from Debian 13's
# source package) is named the same way: MHD_FLOOR=path/to/it.
set -u
floor=${MHD_FLOOR:-build/bench/mhd_floor}
tiled=${TILED_BIN:-build/tiled}
port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
run() { # run LABEL COMMAND...: starts the server, waits for its first line, measures, stops it
  label=$1
  shift
  out=$(mktemp)
  "$@" > "$out" 2>/dev/null &
  pid=$!
  i=0
  while [ ! -s "$out" ] && [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
  if [ -s "$out" ]; then
    echo "$label: $(/usr/bin/python3 bench/mhd_framing.py "$p" | tail -n 1)"
  else
    echo "$label: did not start"
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -f "$out"
}
for l in $("$floor" levels); do
  [ "$l" -lt 0 ] && continue # more lenient than the default: not a candidate
  p=$(port)
  run "libmicrohttpd alone, discipline $l" "$floor" "$p" "$l"
done
p=$(port)
run "tiled" "$tiled" serve --port "$p" --log-level error
