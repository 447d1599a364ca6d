#!/bin/sh
# deps.sh GROUP... - installs the Debian packages tiled needs when they are
# missing (`make deps` asks for every group). Runs apt-get only as root on a
# system that has it; otherwise prints what is missing and fails.
#
#   build  compiler, libraries and headers of the daemon and the unit tests
#   test   what `make test`'s suites run: Python with numpy, valgrind,
#          promtool, man and groff, kubectl, nginx, wrk, systemd-analyze,
#          strace, the TLS scanners and clients (sslscan, testssl, gnutls-cli),
#          chromium and its WebDriver (the browser test), ...
#   bench  load generators and the peer web server
#   fuzz   clang with its sanitizer and libFuzzer runtimes; protobuf-c (its
#          compiler and library) for the differential protobuf target;
#          llvm-profdata and llvm-cov for a campaign's coverage report
#
# A COMMAND=PACKAGE entry is satisfied by the command from any source: a
# machine may have a newer kubectl than Debian's kubernetes-client (which
# `deploy/k8s` is kept renderable by), and the two cannot be installed together.
set -eu
[ $# -gt 0 ] || set -- build
want=""
for group in "$@"; do
  case "$group" in
    build) want="$want gcc libc6-dev make pkg-config libjansson-dev zlib1g-dev libcmocka-dev
                 libnghttp2-dev libgnutls28-dev" ;;
    test)  want="$want curl openssl procps python3 python3-numpy python3-venv python3-yaml valgrind prometheus
                 man=man-db groff=groff-base kubectl=kubernetes-client systemd strace nginx-light wrk sslscan testssl.sh
                 gnutls-bin h2load=nghttp2-client
                 chromium chromium-driver" ;;
    bench) want="$want wrk nginx-light curl python3-numpy h2load=nghttp2-client libmicrohttpd-dev" ;;
    fuzz)  want="$want clang libclang-rt-14-dev protobuf-c-compiler libprotobuf-c-dev llvm-profdata=llvm
                 llvm-cov=llvm" ;;
    *) echo "usage: $0 build|test|bench|fuzz..." >&2; exit 2 ;;
  esac
done
missing=""
for entry in $want; do
  case "$entry" in
    *=*) command -v "${entry%%=*}" >/dev/null 2>&1 && continue
         p=${entry#*=} ;;
    *) p=$entry ;;
  esac
  case " $missing " in *" $p "*) continue ;; esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  # Another apt run on the machine holds the lock for a while; wait for it.
  lock="-o DPkg::Lock::Timeout=600"
  # shellcheck disable=SC2086
  apt-get $lock update -qq >/dev/null || echo "deps: apt-get update failed; trying the package lists there are" >&2
  # shellcheck disable=SC2086
  apt-get $lock install -y -qq --no-install-recommends $missing >/dev/null
else
  echo "missing packages:$missing (install them, e.g. apt-get install$missing)" >&2
  exit 1
fi
