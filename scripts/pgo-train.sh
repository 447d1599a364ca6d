#!/bin/sh
# pgo-train.sh - the training run of the daemon's profile-guided build (the
# Makefile's PGO): the instrumented daemon serves scripts/pgo_train.c's
# requests and exits, which writes its counters: a .gcda for each object of
# USE_DIR, the tree compiled with -fprofile-use (the Makefile names them so).
#
#   sh scripts/pgo-train.sh TILED PGO_TRAIN USE_DIR
#
# TILED is the instrumented daemon. The counters of an earlier run are
# removed first (the daemon would add to them). The daemon runs as by default
# (an access line for every request, its log to a file) on a free port of
# 127.0.0.1; it fails, and so the build, if the daemon does not start,
# answers wrongly, or does not exit cleanly.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 TILED PGO_TRAIN USE_DIR" >&2; exit 2; }
bin=$1 client=$2 use=$3

mkdir -p "$use"
find "$use" -name '*.gcda' -exec rm -f {} +
tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' HUP INT TERM

"$bin" serve --host 127.0.0.1 --port 0 > "$tmp/out" 2> "$tmp/log" &
pid=$!
# Until it says where it listens (its first line), or is gone; 60 s at most.
i=0
until grep -q "listening on" "$tmp/out"; do
  if ! kill -0 "$pid" 2> /dev/null || [ $i -ge 600 ]; then
    echo "pgo-train: the instrumented daemon did not start:" >&2
    cat "$tmp/log" >&2
    exit 1
  fi
  i=$((i + 1))
  sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/out" | head -n 1)
"$client" "$port" 200
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
if [ $rc -ne 0 ]; then
  echo "pgo-train: the instrumented daemon exited with status $rc:" >&2
  tail -n 20 "$tmp/log" >&2
  exit 1
fi

n=$(find "$use" -name '*.gcda' | wc -l)
[ "$n" -gt 0 ] || { echo "pgo-train: the daemon wrote no profile" >&2; exit 1; }
echo "pgo-train: $n profiles"
