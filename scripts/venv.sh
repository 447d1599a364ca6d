#!/bin/sh
# venv.sh DIR - a Python virtual environment with the real protocol clients
# the tests drive tiled with (tritonclient over HTTP and gRPC, KServe's SDK,
# grpcio and grpcio-tools for stubs of api/proto/, grpcio-reflection's
# client for the server reflection tests, hpack for the hand-driven HTTP/2
# client of the gRPC transport's tests, selenium for the browser test,
# httptools (llhttp) and h11 for the HTTP/1.1 framing differential test,
# werkzeug for the Accept / Accept-Encoding differential test, grpclib (gRPC
# on hyper-h2, an HTTP/2 stack apart from gRPC's C core), REDbot (lint for
# HTTP's caching and validation, for the caching test), from PyPI).
# Idempotent. Fails, saying so, when PyPI cannot be reached: the suites that
# need it then fail by name instead of being left out.
set -eu
dir=${1:-build/venv}
# Two imports: tritonclient.grpc and kserve each define the inference.*
# protobuf messages, which one process's default pool cannot hold twice.
has() { "$dir/bin/python" -c "import $1" 2>/dev/null; }
if [ ! -x "$dir/bin/python" ] || ! has 'tritonclient.http, kserve, numpy, schemathesis, openapi_spec_validator' ||
   ! has 'tritonclient.grpc, grpc, grpc_tools, grpc_reflection, hpack, selenium, httptools, h11, werkzeug.http, prometheus_client.openmetrics.parser' ||
   ! has 'grpclib.client, grpclib.health.v1.health_grpc' || ! has 'redbot.cli, redbot.formatter.har' ||
   ! has 'opentelemetry.proto.collector.trace.v1.trace_service_pb2, opentelemetry.trace.propagation.tracecontext'; then
  python3 -m venv "$dir" || { echo "venv: python3 -m venv $dir failed (Debian: python3-venv)" >&2; exit 1; }
  "$dir/bin/pip" install -q --disable-pip-version-check 'tritonclient[grpc,http]' grpcio grpcio-tools grpcio-reflection grpclib hpack selenium httptools h11 werkzeug prometheus-client opentelemetry-proto opentelemetry-api 'kserve==0.21.0' numpy openapi-spec-validator schemathesis redbot || {
    echo "venv: pip could not install the test clients into $dir (is PyPI reachable?)" >&2; exit 1; }
fi
