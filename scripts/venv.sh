#!/bin/sh
# venv.sh DIR - a Python virtual environment with the real protocol clients
# the tests drive tiled with (tritonclient and KServe's SDK from PyPI). Idempotent.
set -eu
dir=${1:-build/venv}
if [ ! -x "$dir/bin/python" ] || ! "$dir/bin/python" -c 'import tritonclient.http, kserve, numpy, schemathesis, openapi_spec_validator' 2>/dev/null; then
  python3 -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check 'tritonclient[http]' 'kserve==0.21.0' numpy openapi-spec-validator schemathesis
fi
