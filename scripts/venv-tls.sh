#!/bin/sh
# venv-tls.sh DIR - a Python virtual environment with sslyze (PyPI), the TLS
# scanner tests/server/test_tls.py checks both ports' policy with. Its own
# venv: sslyze 6 needs cryptography < 47 and KServe's SDK (build/venv)
# needs >= 50, so pip cannot put them in one environment.
# Idempotent. Fails, saying so, when PyPI cannot be reached.
set -eu
dir=${1:-build/venv-tls}
if [ ! -x "$dir/bin/python" ] || ! "$dir/bin/python" -c 'import sslyze' 2>/dev/null; then
  python3 -m venv "$dir" || { echo "venv-tls: python3 -m venv $dir failed (Debian: python3-venv)" >&2; exit 1; }
  "$dir/bin/pip" install -q --disable-pip-version-check 'sslyze>=6,<7' || {
    echo "venv-tls: pip could not install sslyze into $dir (is PyPI reachable?)" >&2; exit 1; }
fi
