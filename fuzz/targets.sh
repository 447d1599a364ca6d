# shellcheck shell=sh
# targets.sh - what fuzz/run.sh and fuzz/campaign.sh know of each target
# (sourced, from the repository's root).

# Longest input per target: enough for every structure the decoder knows,
# small enough to keep executions fast.
max_len() {
  case "$1" in
    lists) echo 256 ;;
    raw | npy) echo 4096 ;;
    # Dozens of calls on a connection, or 256 streams of indexed headers:
    # with 8192 bytes, 20-second runs reached the same edges at two thirds
    # of the executions (the longest inputs cost the most).
    grpc_transport) echo 4096 ;;
    h1wire) echo 20000 ;; # past the head limit (16 KiB), to reach every refusal
    # A few pipelined requests with bodies past --max-body (4 KiB).
    h1_transport) echo 8192 ;;
    *) echo 8192 ;;
  esac
}

# The libFuzzer options every run of target $1 takes (its dictionary by
# absolute path: a campaign runs libFuzzer from its log directory).
fuzz_opts() {
  opts="-max_len=$(max_len "$1") -timeout=25 -rss_limit_mb=2048 -print_final_stats=1"
  [ -f "fuzz/dict/$1.dict" ] && opts="$opts -dict=$(pwd)/fuzz/dict/$1.dict"
  echo "$opts"
}

# The sources a target is written against, whose coverage a campaign
# reports apart from the rest of what it links.
focus() {
  json="api/jsonread.c api/jsonlex.c api/jsondata.c api/numfmt.c"
  case "$1" in
    v1_json) echo "api/v1_json.c $json" ;;
    raw) echo "api/request.c" ;;
    npy) echo "api/npy.c" ;;
    v2) echo "api/v2.c api/v2_model.c $json" ;;
    lists) echo "api/request.c core/dtype.c" ;;
    grpc) echo "api/grpc_infer.c api/grpc_frame.c api/grpc_msgs.c api/grpc_reflect.c api/pbwire.c" ;;
    pbdiff) echo "api/grpc_infer.c api/grpc_msgs.c api/grpc_reflect.c api/pbwire.c" ;;
    grpc_transport) echo "server/grpc/call.c server/grpc/conn.c server/grpc/loop.c" ;;
    h1wire) echo "server/http/h1wire.c" ;;
    h1_transport) echo "server/http/h1conn.c server/http/h1head.c server/http/h1loop.c server/http/h1reply.c server/http/h1wire.c" ;;
  esac
}
