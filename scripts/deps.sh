#!/bin/sh
# deps.sh build|test|bench - installs the Debian packages tiled needs when
# they are missing. Runs apt-get only as root on a system that has it;
# otherwise prints what is missing and fails.
set -eu
case "${1:-build}" in
  build) pkgs="gcc make pkg-config libmicrohttpd-dev libjansson-dev zlib1g-dev libcmocka-dev" ;;
  test)  pkgs="curl python3 python3-numpy python3-venv python3-yaml valgrind prometheus" ;;
  bench) pkgs="wrk nginx-light curl python3-numpy" ;;
  fuzz)  pkgs="clang libclang-rt-14-dev" ;;
  *) echo "usage: $0 build|test|bench|fuzz" >&2; exit 2 ;;
esac
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
  echo "missing packages:$missing (install them, e.g. apt-get install$missing)" >&2
  exit 1
fi
