#!/bin/sh
# perf_analyzer.sh [WINDOW_MS] [http|grpc|grpc-streaming] - Triton's
# perf_analyzer (unmodified, through scripts/perf_analyzer.sh) against the
# daemon over HTTP (binary tensor data in and out) or gRPC (raw contents),
# unary calls or, with grpc-streaming, perf_analyzer's --streaming (every
# request of a worker over one ModelStreamInfer stream), concurrency 1 to 8,
# WINDOW_MS windows per level (default 1000).
#
#   1. rank 1: input FP32 [1024], repeats [4]        (the metadata's own rank:
#      only --input-data is needed)
#   2. rank 2: input FP32 [32,32], repeats [2,2]     (--shape sets the rank)
#
# Fails when perf_analyzer reports any error or when the daemon's statistics
# (which perf_analyzer reads) do not count the requests it sent. Prints
# infer/s and client latency percentiles per concurrency.
#
# Reproduce: make bench-perf-analyzer   (or: sh bench/perf_analyzer.sh [window-ms] [http|grpc])
set -eu
WINDOW_MS=${1:-1000}
PROTOCOL=${2:-http}
STREAMING=
if [ "$PROTOCOL" = grpc-streaming ]; then
  PROTOCOL=grpc
  STREAMING=--streaming
fi
TILED=${TILED_BIN:-build/tiled}
PA="sh scripts/perf_analyzer.sh"
WORK=$(mktemp -d /tmp/tiled-pa.XXXXXX)
cleanup() {
  [ -n "${TPID:-}" ] && kill "$TPID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

$PA --version >/dev/null 2>&1 # fetches perf_analyzer and its libraries once
"$TILED" serve --port 0 --grpc-port 0 --log-level warn > "$WORK/tiled.out" 2> "$WORK/tiled.err" &
TPID=$!
tries=0
until grep -q "listening on grpc" "$WORK/tiled.out" 2>/dev/null; do
  tries=$((tries + 1))
  if [ "$tries" -gt 200 ] || ! kill -0 "$TPID" 2>/dev/null; then
    cat "$WORK/tiled.err" >&2
    echo "the daemon ($TILED) did not start" >&2
    exit 1
  fi
  sleep 0.05
done
URL=$(sed -n "s|^listening on $PROTOCOL://||p" "$WORK/tiled.out")

python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
def write(name, shape, repeats):
    n = 1
    for d in shape:
        n *= d
    doc = {"data": [{"input": {"content": [float(i % 251) for i in range(n)], "shape": shape},
                     "repeats": {"content": repeats, "shape": [len(repeats)]}}]}
    with open(f"{work}/{name}.json", "w") as f:
        json.dump(doc, f)
write("rank1", [1024], [4])
write("rank2", [32, 32], [2, 2])
PY


run() { # name, extra perf_analyzer flags
  name=$1
  shift
  for c in 1 2 3 4 5 6 7 8; do
    # One process per level: perf_analyzer keeps every response of a run in
    # memory. Windows of WINDOW_MS until three agree within 10x (-s 1000):
    # the machine is shared, stability is not what is tested here.
    if ! $PA -m tile -x 13 -u "$URL" -i "$PROTOCOL" $STREAMING --input-data "$WORK/$name.json" "$@" --concurrency-range "$c" \
        --measurement-interval "$WINDOW_MS" -s 1000 -r 10 -f "$WORK/$name-$c.csv" > "$WORK/$name-$c.log" 2>&1 ||
        grep -qi "error" "$WORK/$name-$c.log"; then
      cat "$WORK/$name-$c.log" >&2
      echo "perf_analyzer reported an error ($name, concurrency $c)" >&2
      exit 1
    fi
  done
  python3 - "$WORK" "$name" <<'PY'
import csv, re, sys
work, name = sys.argv[1], sys.argv[2]
print(f"{name}:")
print(f"  {'conc':>4} {'infer/s':>9} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} {'client n':>9} {'server n':>9}")
for c in range(1, 9):
    log = open(f"{work}/{name}-{c}.log").read()
    client = int(re.search(r"Client:\s+Request count: (\d+)", log).group(1))
    server = int(re.search(r"Successful request count: (\d+)", log).group(1))
    for r in csv.DictReader(open(f"{work}/{name}-{c}.csv")):
        print(f"  {r['Concurrency']:>4} {float(r['Inferences/Second']):>9.0f} {r['p50 latency']:>8} "
              f"{r['p90 latency']:>8} {r['p99 latency']:>8} {client:>9} {server:>9}")
    # The daemon's statistics count every request the client sent (within
    # 2% below). perf_analyzer reads them while its requests keep flowing,
    # so the daemon's window can also hold the requests of the statistics
    # round trips at its edges: on a loaded machine those take long and the
    # daemon counts more, never fewer; three times the client's count
    # bounds that.
    if client == 0 or server < client - max(2 * c, client // 50) or server > 3 * client + 2 * c:
        sys.exit(f"{name}, concurrency {c}: perf_analyzer counted {client} requests, the daemon {server}")
PY
}

echo "perf_analyzer 2.60.0 -> tiled at $PROTOCOL://$URL${STREAMING:+ ($STREAMING)}, binary in/out, $WINDOW_MS ms windows"
run rank1
run rank2 --shape input:32,32
echo "reproduce: make bench-perf-analyzer  (sh bench/perf_analyzer.sh $WINDOW_MS ${2:-http})"
