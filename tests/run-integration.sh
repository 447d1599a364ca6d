#!/bin/sh
# Integration tests: the CLI and the daemon over real HTTP (loopback only).
set -eu
: "${TILED_BIN:=build/tiled}"
export TILED_BIN
PY=/usr/bin/python3
status=0
if [ -f tests/test_cli.sh ]; then
  sh tests/test_cli.sh || status=1
fi
$PY -m unittest -v tests/server/test_http.py tests/server/test_readme.py || status=1
exit $status
