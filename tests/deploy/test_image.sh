#!/bin/sh
# test_image.sh - `make image-test`: runs the image built by `make image`.
#
#   1. image config: non-root numeric USER, EXPOSE 8080 and 8081 (gRPC, on
#      through TILED_GRPC_PORT), STOPSIGNAL SIGTERM,
#      HEALTHCHECK with `tiled probe .../v2/health/ready`, TILED_HOST=0.0.0.0,
#      ENTRYPOINT tiled, size;
#   2. a container from the image with its own entrypoint, under the
#      restrictions of deploy/k8s (read-only root filesystem, every
#      capability dropped, no-new-privileges), its ports 8080 and 8081 published
#      on loopback: readiness, a tile request and gRPC ServerLive from the host, the image's
#      HEALTHCHECK, uid 10001, no compiler or headers in the image, every
#      shared library resolved, the deploy/k8s preStop command present;
#   3. the engine's stop (the image's STOPSIGNAL, SIGTERM) drains and the
#      container exits with status 0 well before the stop timeout.
#
# Engine: docker when its daemon answers and holds the image; otherwise
# podman (with runc and cgroupfs, which work where crun and systemd do not);
# when no container can be started at all, `buildah run --isolation chroot`
# runs the entrypoint with the host network and the test signals the
# process itself (TILED_IMAGE_TEST_RUN=buildah forces this way). TILED_IMAGE
# selects the image (default tiled:latest).
set -u
cd "$(dirname "$0")/../.." || exit 1
IMAGE=${TILED_IMAGE:-tiled:latest}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { # check "description" command...
  d=$1; shift
  if "$@" >/dev/null 2>&1; then ok "$d"; else bad "$d"; fi
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiled-image.XXXXXX")
ctr=""
cleanup() {
  if [ -n "$ctr" ]; then
    case "$engine" in
      buildah) [ -n "${tpid:-}" ] && kill -KILL "$tpid" 2>/dev/null
               $E rm "$ctr" >/dev/null 2>&1 ;;
      *) $E rm -f "$ctr" >/dev/null 2>&1 ;;
    esac
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# podman and runc come with `make image`; install them here too when missing.
need_pkgs() {
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
  done
  [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
  echo "image: installing$missing"
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 || true
}
if ! { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }; then
  need_pkgs podman runc
fi

# --- engine -----------------------------------------------------------------
engine=""
DRIVER=""
if command -v docker >/dev/null 2>&1 && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  engine=docker
  E=docker
  RUNOPTS=""
elif command -v podman >/dev/null 2>&1; then
  engine=podman
  DRIVER=$(sh deploy/storage.sh)
  E="podman --storage-driver $DRIVER"
  # crun refuses hybrid cgroup hierarchies; runc copes. Without systemd as
  # init there is no systemd cgroup manager. Explicit ulimits: the engine's
  # defaults may exceed what this process may set.
  [ -d /run/systemd/system ] || E="$E --cgroup-manager cgroupfs"
  command -v runc >/dev/null 2>&1 && E="$E --runtime runc"
  # Explicit ulimits below this process's hard limits (tiled's default
  # --max-connections is 4096).
  lim() { awk -v k="$1" -v want="$2" 'index($0, k) == 1 { v = $(NF - 1); print (v == "unlimited" || v + 0 > want ? want : v) }' /proc/self/limits; }
  nofile=$(lim 'Max open files' 8192)
  nproc=$(lim 'Max processes' 4096)
  RUNOPTS="--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
else
  echo "image: neither docker (with $IMAGE) nor podman found; run make image first" >&2
  echo "image: 0 passed, 1 failed"
  exit 1
fi
if ! $E image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "image: $IMAGE not found by $engine; run make image first" >&2
  echo "image: 0 passed, 1 failed"
  exit 1
fi
echo "image: $IMAGE with $engine"

# --- 1. configuration -----------------------------------------------------------
$E image inspect "$IMAGE" > "$tmp/inspect.json" 2>/dev/null
/usr/bin/python3 - "$tmp/inspect.json" > "$tmp/config.out" <<'EOF'
import json, sys
img = json.load(open(sys.argv[1]))
img = img[0] if isinstance(img, list) else img
cfg = img.get("Config") or {}
# docker: Config.Healthcheck; podman: Healthcheck beside Config
hc = (cfg.get("Healthcheck") or img.get("Healthcheck") or {}).get("Test") or []
env = dict(e.split("=", 1) for e in cfg.get("Env") or [])
user = cfg.get("User") or ""
def check(name, cond):
    print(("ok " if cond else "FAIL ") + name)
check("USER is numeric and not root (%s)" % user,
      user.split(":")[0].isdigit() and int(user.split(":")[0]) != 0)
check("EXPOSE 8080/tcp", "8080/tcp" in (cfg.get("ExposedPorts") or {}))
check("EXPOSE 8081/tcp (gRPC)", "8081/tcp" in (cfg.get("ExposedPorts") or {}))
check("ENV TILED_GRPC_PORT=8081", env.get("TILED_GRPC_PORT") == "8081")
check("STOPSIGNAL SIGTERM", cfg.get("StopSignal") in ("SIGTERM", "15", "TERM"))
# A shell form ("CMD-SHELL", script): http, or https when TILED_TLS_CERT is set.
script = " ".join(hc[1:])
check("HEALTHCHECK tiled probe http(s)://127.0.0.1:$TILED_PORT/v2/health/ready",
      hc[:1] == ["CMD-SHELL"] and "/usr/local/bin/tiled probe" in script
      and '"http://127.0.0.1:${TILED_PORT:-8080}/v2/health/ready"' in script
      and '--insecure "https://127.0.0.1:${TILED_PORT:-8080}/v2/health/ready"' in script
      and "TILED_TLS_CERT" in script)
check("ENV TILED_HOST=0.0.0.0", env.get("TILED_HOST") == "0.0.0.0")
check("ENTRYPOINT /usr/local/bin/tiled, CMD serve",
      cfg.get("Entrypoint") == ["/usr/local/bin/tiled"] and cfg.get("Cmd") == ["serve"])
size = img.get("Size") or 0
check("image size %.1f MB < 120 MB" % (size / 1e6), 0 < size < 120e6)
EOF
while read -r status what; do
  case "$status" in ok) ok "$what" ;; *) bad "$what" ;; esac
done < "$tmp/config.out"
[ -s "$tmp/config.out" ] || bad "image config could not be read"

# --- 2. run -------------------------------------------------------------------
port=$(free_port)
gport=$(free_port)
body='{"input": {"dtype": "float32", "shape": [2,2], "data": [1,2,3,4]}, "repeats": [1,2]}'
want='"data":[1.0,2.0,1.0,2.0,3.0,4.0,3.0,4.0]'
started=0
if [ "${TILED_IMAGE_TEST_RUN:-}" != buildah ]; then
  ctr=tiled-image-test-$$
  # shellcheck disable=SC2086
  if $E run -d --name "$ctr" -p "127.0.0.1:$port:8080" -p "127.0.0.1:$gport:8081" $RUNOPTS \
       --read-only --cap-drop ALL --security-opt no-new-privileges \
       "$IMAGE" > "$tmp/run.log" 2>&1; then
    started=1
  else
    echo "image: $engine cannot start a container here:" >&2
    grep -v 'systemd connection' "$tmp/run.log" | tail -n 3 >&2
    $E rm -f "$ctr" >/dev/null 2>&1
    ctr=""
  fi
fi
if [ "$started" = 0 ]; then
  # Fallback: the entrypoint under buildah's chroot isolation, host network.
  engine=buildah
  DRIVER=${DRIVER:-$(sh deploy/storage.sh)}
  E="buildah --storage-driver $DRIVER"
  ctr=$($E from --pull=never --name "tiled-image-test-$$" "$IMAGE" 2>>"$tmp/run.log") || ctr=""
  if [ -n "$ctr" ]; then
    entry=$($E inspect --type container --format '{{range .OCIv1.Config.Entrypoint}}{{.}} {{end}}{{range .OCIv1.Config.Cmd}}{{.}} {{end}}' "$ctr")
    # shellcheck disable=SC2086
    $E run --isolation chroot --network host -e "TILED_PORT=$port" -e "TILED_GRPC_PORT=$gport" "$ctr" -- $entry \
      > "$tmp/serve.log" 2>&1 &
    bpid=$!
    started=1
  fi
fi
if [ "$started" = 0 ]; then
  bad "no container could be started from $IMAGE"
  echo "image: $pass passed, $fail failed"
  exit 1
fi
echo "image: running with $engine on 127.0.0.1:$port"

ready=0
i=0
while [ $i -lt 100 ]; do
  if curl -fsS -m 2 "http://127.0.0.1:$port/v2/health/ready" > "$tmp/ready" 2>/dev/null; then ready=1; break; fi
  sleep 0.1
  i=$((i + 1))
done
if [ $ready = 1 ]; then ok "GET /v2/health/ready from the host: $(cat "$tmp/ready")"; else bad "container never became ready on 127.0.0.1:$port"; fi
check "GET /v2/health/live" curl -fsS -m 5 "http://127.0.0.1:$port/v2/health/live"
got=$(curl -sS -m 10 "http://127.0.0.1:$port/v1/tile" -H 'Content-Type: application/json' -d "$body" 2>&1)
case "$got" in *"$want"*) ok "POST /v1/tile answers the tiled tensor" ;; *) bad "POST /v1/tile: $got" ;; esac
check "GET /metrics counts requests" sh -c "curl -fsS -m 5 http://127.0.0.1:$port/metrics | grep -q '^tiled_requests_total'"
# gRPC ServerLive over h2c (curl with nghttp2): the answer is {live: true}.
live=$(printf '\000\000\000\000\000' | curl -sS -m 5 --http2-prior-knowledge -H 'content-type: application/grpc' \
  -H 'te: trailers' --data-binary @- "http://127.0.0.1:$gport/inference.GRPCInferenceService/ServerLive" |
  od -An -v -tx1 | tr -d ' \n')
[ "$live" = 00000000020801 ] && ok "gRPC ServerLive from the host (published 8081)" || bad "gRPC ServerLive: '$live'"

if [ "$engine" = buildah ]; then
  in_ctr() { $E run --isolation chroot --network host "$ctr" -- "$@"; }
  check "HEALTHCHECK command inside the container" in_ctr /usr/local/bin/tiled probe "http://127.0.0.1:$port/v2/health/ready"
else
  in_ctr() { $E exec "$ctr" "$@"; }
  if [ "$engine" = podman ]; then
    # shellcheck disable=SC2086 # $E is a command with options
    check "HEALTHCHECK (podman healthcheck run)" $E healthcheck run "$ctr"
  else
    check "HEALTHCHECK command inside the container" in_ctr /usr/local/bin/tiled probe http://127.0.0.1:8080/v2/health/ready
  fi
fi
uid=$(in_ctr id -u 2>/dev/null)
if [ "$uid" = 10001 ]; then ok "runs as uid 10001"; else bad "runs as uid '$uid', want 10001"; fi
check "no compiler, make or -dev headers in the runtime image" \
  in_ctr sh -c '! command -v cc && ! command -v gcc && ! command -v make && [ ! -e /usr/include/microhttpd.h ]'
# deploy/k8s's preStop hook runs a command from the image.
prestop=$(sed -n 's/^ *command: \["\([^"]*\)", "[0-9]*"\]/\1/p' deploy/k8s/deployment.yaml | head -n 1)
check "the k8s preStop command ${prestop:-?} exists in the image" in_ctr "${prestop:-/nonexistent}" 0
check "every shared library of tiled resolves" in_ctr sh -c 'ldd /usr/local/bin/tiled && ! ldd /usr/local/bin/tiled | grep -q "not found"'
if [ "$engine" != buildah ]; then
  check "root filesystem is read-only" in_ctr sh -c '! touch /usr/local/bin/x 2>/dev/null && ! touch /x 2>/dev/null'
fi

# --- 3. stop ---------------------------------------------------------------------
t0=$(date +%s)
if [ "$engine" = buildah ]; then
  # buildah run does not forward signals: SIGTERM the server process itself
  # (same PID namespace; its pid is in its start log line).
  tpid=$(sed -n 's/.*"event":"start","pid":\([0-9]*\).*/\1/p' "$tmp/serve.log" | head -n 1)
  if [ -n "$tpid" ] && kill -TERM "$tpid" 2>/dev/null; then
    wait "$bpid"
    code=$?
  else
    code=-1
  fi
  tail -n 3 "$tmp/serve.log"
else
  $E stop -t 30 "$ctr" >/dev/null 2>>"$tmp/run.log"
  code=$($E inspect --format '{{.State.ExitCode}}' "$ctr" 2>/dev/null)
  $E logs "$ctr" 2>&1 | grep -v 'systemd connection' | tail -n 3
fi
t1=$(date +%s)
# Exit status 0 is the drain's own exit: a daemon killed at the stop timeout exits 137.
if [ "$code" = 0 ]; then ok "SIGTERM: exit status 0 after $((t1 - t0)) s"; else bad "SIGTERM: exit status '$code' (137 = killed after the stop timeout)"; fi

echo "image: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
