#!/bin/sh
# perf_analyzer.sh [ARGS...] - runs Triton's perf_analyzer (PyPI perf-analyzer 2.60.0)
# with ARGS, on a Debian 12 host, without changing the host.
#
# The PyPI wheel is built for manylinux_2_38 (glibc 2.38, libstdc++ 3.4.32),
# newer than Debian 12's libraries. The binary itself is unchanged: it runs
# through Debian 13's own dynamic loader with Debian 13's libc6, libstdc++6
# and libgcc-s1, fetched with `apt-get download` through a private apt state
# (its own source list, lists and cache; an empty dpkg status) and unpacked
# with `dpkg-deb -x` under $PA_DIR. Its other libraries (libssl3, zlib) come
# from the host, but for the CUDA runtime: perf_analyzer loads libcudart.so
# when it starts with --shared-memory (even `system`, to unregister CUDA
# regions), and a machine without CUDA gets it from PyPI's
# nvidia-cuda-runtime-cu12 (the library alone; no GPU is used). Everything is
# cached in $PA_DIR (default build/perf_analyzer);
# any download failure stops the script with an error.
#
#   sh scripts/perf_analyzer.sh -m tile -u 127.0.0.1:8080 --input-data tile.json
set -eu
PA_VERSION=2.60.0
DIR=${PA_DIR:-build/perf_analyzer}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
BIN=$DIR/wheel/perf_analyzer/bin/perf_analyzer
ROOT=$DIR/trixie
CUDART=$DIR/cudart

# pip_download DEST [PIP-OPTION...] REQUIREMENT: with pip from a venv of its
# own (the host may have no pip); `pip download` because pip would not install
# a manylinux_2_38 wheel on this glibc.
pip_download() {
  dest=$1
  shift
  [ -x "$DIR/venv/bin/pip" ] || python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$dest" "$@" >&2
}

fetch_wheel() {
  rm -rf "$DIR/wheel" "$DIR/dl"
  pip_download "$DIR/dl" --platform manylinux_2_38_x86_64 --python-version 3.11 "perf-analyzer==$PA_VERSION"
  python3 -m zipfile -e "$DIR"/dl/perf_analyzer-*.whl "$DIR/wheel"
  chmod +x "$BIN"
}

fetch_cudart() {
  rm -rf "$CUDART" "$DIR/dl-cudart"
  pip_download "$DIR/dl-cudart" "nvidia-cuda-runtime-cu12==12.9.79"
  python3 -m zipfile -e "$DIR"/dl-cudart/nvidia_cuda_runtime_cu12-*.whl "$DIR/dl-cudart/wheel"
  mkdir -p "$CUDART"
  cp "$DIR/dl-cudart/wheel/nvidia/cuda_runtime/lib/libcudart.so.12" "$CUDART/"
  ln -s libcudart.so.12 "$CUDART/libcudart.so"
}

# The Debian mirror this machine already uses, for a trixie source line.
debian_mirror() {
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v '^[[:space:]]*#' | grep -o 'https\?://[^ ]*/debian\b' | grep -v security | head -n 1
}

fetch_trixie_libs() {
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  apt=$DIR/apt
  rm -rf "$apt" "$ROOT"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$ROOT"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$apt/sources.list"
  set -- -o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=- \
    -o "Dir::State::Lists=$apt/lists" -o Dir::State::status=/dev/null -o "Dir::Cache=$apt/cache" \
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root
  apt-get "$@" -qq --error-on=any update >&2
  (cd "$apt/debs" && apt-get "$@" -qq download libc6 libstdc++6 libgcc-s1 >&2)
  for deb in "$apt"/debs/*.deb; do
    dpkg-deb -x "$deb" "$ROOT"
  done
}

# One fetch at a time: make test runs suites side by side, and two of them may
# be first to need perf_analyzer (each fetch starts by removing what it makes).
exec 9> "$DIR/.fetch.lock"
flock 9
[ -x "$BIN" ] || fetch_wheel
[ -x "$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" ] || fetch_trixie_libs
[ -e "$CUDART/libcudart.so" ] || fetch_cudart
exec 9>&-
exec "$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \
  --library-path "$ROOT/usr/lib/x86_64-linux-gnu:$CUDART:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu" \
  "$BIN" "$@"
