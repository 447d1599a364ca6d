#!/bin/sh
# curl-load.sh - HTTP load with nothing but curl.
#
#   sh bench/curl-load.sh URL BODYFILE CONTENT_TYPE REQUESTS PARALLEL [TIMINGS_FILE]
#
# Sends REQUESTS identical POSTs of BODYFILE to URL with
# `curl --parallel --parallel-max PARALLEL` (one curl process, its transfers
# listed in a generated config file), writes one line of `-w` timings per
# request to TIMINGS_FILE (default: a temporary file that is removed):
#     time_total time_starttransfer http_code num_connects   (seconds)
# and ends with a summary line:
#     curl-load: N requests, P parallel, W s, R req/s, p50 X ms, p99 Y ms, non-200 E, connects C
# Bounded: exactly REQUESTS requests, each with a 30 s time limit. Prefix the
# command with `taskset -c 1` to pin the client to a core.
set -eu
if [ $# -lt 5 ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
URL=$1 BODY=$2 CTYPE=$3 N=$4 PAR=$5
OUT=${6:-}
case $N in '' | *[!0-9]*) echo "curl-load: REQUESTS must be a number" >&2; exit 2 ;; esac
case $PAR in '' | *[!0-9]*) echo "curl-load: PARALLEL must be a number" >&2; exit 2 ;; esac
if [ "$N" -lt 1 ] || [ "$N" -gt 10000000 ]; then echo "curl-load: REQUESTS out of range" >&2; exit 2; fi
[ -r "$BODY" ] || { echo "curl-load: cannot read $BODY" >&2; exit 2; }
TMP=$(mktemp -d /tmp/curl-load.XXXXXX)
trap 'rm -rf "$TMP"' EXIT INT TERM
[ -n "$OUT" ] || OUT=$TMP/timings.txt

# One `url` and one `output` per transfer; the options before them apply to all.
awk -v n="$N" -v url="$URL" 'BEGIN {
  for (i = 0; i < n; i++) { printf "url = \"%s\"\noutput = \"/dev/null\"\n", url }
}' > "$TMP/urls.cfg"

start=$(date +%s.%N)
curl --silent --show-error --no-progress-meter --parallel --parallel-immediate --parallel-max "$PAR" \
  --max-time 30 -X POST -H "Content-Type: $CTYPE" --data-binary @"$BODY" \
  --write-out '%{time_total} %{time_starttransfer} %{http_code} %{num_connects}\n' \
  --config "$TMP/urls.cfg" > "$OUT" || true
end=$(date +%s.%N)

sort -n -k1,1 "$OUT" | awk -v n="$N" -v par="$PAR" -v t0="$start" -v t1="$end" '
  { t[NR] = $1; if ($3 != 200) bad++; conn += $4 }
  END {
    w = t1 - t0; got = NR
    i50 = int(got * 0.50); if (i50 < 1) i50 = 1
    i99 = int(got * 0.99); if (i99 < 1) i99 = 1
    printf "curl-load: %d requests, %d parallel, %.3f s, %.0f req/s, p50 %.3f ms, p99 %.3f ms, non-200 %d, connects %d\n",
      got, par, w, got / w, t[i50] * 1000, t[i99] * 1000, bad + (n - got), conn
  }'
