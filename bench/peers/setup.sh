#!/bin/sh
# setup.sh VENV - installs what `make bench-peers` needs when it is missing:
# Debian's packages (apt-get, as root) and, in the virtual environment VENV
# (with Debian's site packages visible, so numpy and torch are Debian's),
# onnxruntime and onnx from PyPI, with numpy held at Debian's version.
set -eu
VENV=${1:-build/venv-peers}
PKGS="python3 python3-venv python3-pip python3-numpy python3-torch python3-threadpoolctl
      python3-fastapi python3-uvicorn python3-uvloop python3-httptools
      gnuplot-nox wrk nginx-light nghttp2-client curl util-linux linux-perf valgrind"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench-peers: installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "bench-peers: missing Debian packages:$missing" >&2
    exit 1
  fi
fi
PY=/usr/bin/python3
if ! "$VENV/bin/python" -c 'import onnxruntime, onnx, numpy, torch' 2>/dev/null; then
  echo "bench-peers: creating $VENV with onnxruntime and onnx from PyPI"
  rm -rf "$VENV"
  "$PY" -m venv --system-site-packages "$VENV"
  NPV=$("$PY" -c 'import numpy; print(numpy.__version__)')
  echo "numpy==$NPV" > "$VENV/constraints.txt"
  "$VENV/bin/pip" install -q --disable-pip-version-check -c "$VENV/constraints.txt" onnxruntime onnx
fi
"$VENV/bin/python" -c 'import onnxruntime, onnx, numpy, torch' 

# The race against inference servers (bench/peers/race.py): one venv per server,
# from PyPI, in the directory of VENV, because their pins conflict (numpy 1.x
# under nvidia-pytriton, 2.x under kserve). nvidia-pytriton carries the
# tritonserver binary, its Python backend and stubs, and tritonclient (the
# race's answer checks use it).
DIR=$(dirname "$VENV")
race_venv() { # name, import check, requirement
  if ! "$DIR/venv-race-$1/bin/python" -c "$2" 2>/dev/null; then
    echo "bench-peers: creating $DIR/venv-race-$1 with $3 from PyPI"
    rm -rf "$DIR/venv-race-$1"
    "$PY" -m venv "$DIR/venv-race-$1"
    "$DIR/venv-race-$1/bin/pip" install -q --disable-pip-version-check "$3"
  fi
}
race_venv triton 'import pytriton, tritonclient.grpc, tritonclient.http, numpy' nvidia-pytriton==0.7.0
race_venv kserve 'import kserve, numpy' kserve==0.21.0
race_venv mlserver 'import mlserver, numpy' mlserver==1.7.1
