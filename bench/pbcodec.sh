#!/bin/sh
# pbcodec.sh DIR N - the figures of the codec decision (make bench-pbcodec):
# instructions per call of each way to decode a small ModelInferRequest
# (callgrind, counting only inside run_<way>), heap and copies for a 64 MiB
# raw_input_contents request, and the lines kept by hand.
set -eu
dir=${1:?usage: pbcodec.sh DIR N}
n=${2:-20000}
bin=$dir/bench_pbcodec
"$bin" small 1 | head -n 1
for way in pbc_unpack pbc_tensors tiled; do
  out=$dir/callgrind.$way
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="run_$way" "$bin" small "$n" \
    >/dev/null 2>&1
  total=$(sed -n 's/^totals: *//p; s/^summary: *//p' "$out" | head -n 1)
  echo "$way: $((total / n)) instructions per call (callgrind, $n calls)"
done
"$bin" big
# Lines kept by hand for the wire format and the field numbers (tiled), and
# what protoc-c generates instead (never edited, rebuilt from the .proto).
echo "hand-written reader and writer: $(cat api/pbwire.c api/pbwire.h | wc -l) lines (api/pbwire.[ch])"
echo "hand-written message codecs: $(cat api/grpc_infer.c api/grpc_msgs.c api/grpc_reflect.c | wc -l) lines" \
     "(api/grpc_infer.c, grpc_msgs.c, grpc_reflect.c; semantic checks included)," \
     "$(cat api/grpc_infer.c api/grpc_msgs.c api/grpc_reflect.c | grep -cE '^ +[A-Z_]+ = [0-9]+,') field-number constants"
echo "protoc-c output: $(cat "$dir"/*.pb-c.c "$dir"/*.pb-c.h | wc -l) lines generated, plus libprotobuf-c" \
     "($(stat -L -c %s "$(ldconfig -p | sed -n 's/.*libprotobuf-c.so.1 .*=> //p' | head -n 1)") bytes)"
