#!/bin/sh
# jsondecode.sh BIN N - callgrind instructions per decode of the small /v1 and
# Open Inference Protocol JSON bodies (bench/bench_jsondecode.c), counting
# only inside the decode loops.
set -eu
bin=$1
n=${2:-2000}
dir=$(dirname "$bin")
for way in v1 v2; do
  out=$dir/callgrind.jsondecode.$way
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="run_$way" "$bin" "$way" "$n" \
    >/dev/null 2>&1
  total=$(sed -n 's/^\(summary\|totals\): \([0-9]*\).*/\2/p' "$out" | head -1)
  echo "$way: $((total / n)) instructions per decode (callgrind, $n decodes; profile in $out)"
done
