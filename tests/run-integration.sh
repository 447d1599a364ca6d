#!/bin/sh
# Integration tests: the CLI and the daemon over real HTTP (loopback only).
# TILED_BIN selects the binary (build/tiled, or an ASan build).
set -eu
: "${TILED_BIN:=build/tiled}"
TILED_BIN=$(cd "$(dirname "$TILED_BIN")" && pwd)/$(basename "$TILED_BIN")
export TILED_BIN
status=0
sh tests/test_cli.sh || status=1
sh scripts/venv.sh build/venv
cd tests/server
/usr/bin/python3 -W ignore -m unittest -v test_http test_readme test_ops test_v2_protocol test_security test_bad_input test_resilience ${EXTRA_TESTS:-} || status=1
../../build/venv/bin/python -W ignore -m unittest -v test_tritonclient test_kserve test_perf_analyzer test_openapi || status=1
exit $status
