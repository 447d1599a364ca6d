"""Tracing (server/infra/trace.c, api/otlp.c): W3C Trace Context on every request,
the trace id in the access log, and spans exported over OTLP/HTTP to a
collector written here from the OTLP specification (POST /v1/traces,
application/x-protobuf, answered 200 with an ExportTraceServiceResponse);
what it receives is parsed by PyPI's opentelemetry-proto. Also: a collector
that is gone or never answers does not slow or fail requests, and the
spans the daemon cannot hold are dropped and counted, its memory bounded.

Run from tests/server with the venv's Python (grpcio, opentelemetry-proto):
    TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest test_tracing
"""
import http.client
import http.server
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import unittest

import random

import grpc
import numpy as np
from opentelemetry import trace as otel_trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

sys.path.insert(0, os.path.dirname(__file__))
from harness.daemon import BIN, WRAP, Daemon, wait_for  # noqa: E402
from harness.grpcwire import LIVE, infer_request, raw_method  # noqa: E402

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
SLOW = 20 if WRAP or "ASAN_OPTIONS" in os.environ else 1


class Collector:
    """An OTLP/HTTP trace receiver: every span it is sent, parsed."""

    def __init__(self):
        spans, lock = [], threading.Lock()
        self.spans, self.lock, self.posts = spans, lock, []

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(body)
                with lock:
                    outer.posts.append((self.path, self.headers["Content-Type"], req))
                    for rs in req.resource_spans:
                        for ss in rs.scope_spans:
                            spans.extend(ss.spans)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def trace(self, trace_id):
        with self.lock:
            return [s for s in self.spans if s.trace_id.hex() == trace_id]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Hanging:
    """Accepts connections and never answers (nor reads)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.conns, self.stopped = [], False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def run(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def stop(self):
        self.stopped = True
        self.sock.close()
        for c in self.conns:
            c.close()


def access_line(d, request_id):
    for line in d.log_lines():
        if line.startswith("{") and '"event":"access"' in line:
            doc = json.loads(line)
            if doc["request_id"] == request_id:
                return doc
    return None


def metric(d, name):
    _, body = d.request("GET", "/metrics")
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", body.decode(), re.M)
    return float(m.group(1)) if m else None


def infer_body(n):
    """A v2 JSON infer request of an n x n float32 input (repeats 2, 2)."""
    data = np.arange(n * n, dtype=np.float32).tolist()
    return json.dumps({"inputs": [
        {"name": "input", "datatype": "FP32", "shape": [n, n], "data": data},
        {"name": "repeats", "datatype": "INT64", "shape": [2], "data": [2, 2]}]})


class Exported(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector()
        cls.d = Daemon("--grpc-port", "0", "--otlp-endpoint", cls.c.url)

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.d.stop() == 0, "daemon exit status"
        finally:
            cls.c.stop()

    def spans_of(self, trace_id, count):
        self.assertTrue(wait_for(lambda: len(self.c.trace(trace_id)) >= count, 30 * SLOW),
                        f"{count} spans of {trace_id}: {self.c.trace(trace_id)}")
        return self.c.trace(trace_id)

    def test_traced_infer_spans_and_access_log(self):
        # Above --inline-max (64K), so it waits for a worker: every phase.
        body = infer_body(128)
        self.assertGreater(len(body), 65536)
        traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
        resp, data = self.d.request("POST", "/v2/models/tile/infer", body, {
            "Content-Type": "application/json", "traceparent": traceparent, "tracestate": "congo=t61rcWkgMzE,rojo=00f0",
            "X-Request-Id": "traced-1"})
        self.assertEqual(resp.status, 200, data)
        self.assertTrue(wait_for(lambda: access_line(self.d, "traced-1")))
        log = access_line(self.d, "traced-1")
        self.assertEqual(log["trace_id"], TRACE_ID)

        expected = ["send"] + [p for p in ("queue", "decode", "tile", "encode") if log[p + "_us"] > 0]
        self.assertIn("queue", expected)
        spans = self.spans_of(TRACE_ID, 1 + len(expected))
        servers = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
        self.assertEqual(len(servers), 1)
        root = servers[0]
        self.assertEqual(root.parent_span_id.hex(), PARENT_ID)
        self.assertEqual(root.trace_state, "congo=t61rcWkgMzE,rojo=00f0")
        self.assertEqual(root.name, "POST /v2/models/")
        self.assertEqual(len(root.span_id), 8)
        self.assertNotEqual(root.span_id, bytes(8))
        attrs = {a.key: a.value for a in root.attributes}
        self.assertEqual(attrs["http.response.status_code"].int_value, 200)
        self.assertEqual(attrs["tiled.request_id"].string_value, "traced-1")
        self.assertEqual(attrs["url.path"].string_value, "/v2/models/tile/infer")
        self.assertLess(root.start_time_unix_nano, root.end_time_unix_nano)
        # The phases, measured one after the other, fit in the request.
        self.assertGreaterEqual(root.end_time_unix_nano - root.start_time_unix_nano,
                                1000 * sum(log[p + "_us"] for p in ("queue", "decode", "tile", "encode")))
        children = {s.name: s for s in spans if s is not root}
        self.assertEqual(sorted(children), sorted(expected))
        for name, s in children.items():
            self.assertEqual(s.parent_span_id, root.span_id, name)
            self.assertEqual(s.kind, trace_pb2.Span.SPAN_KIND_INTERNAL, name)
            self.assertNotEqual(s.span_id, root.span_id)
            self.assertGreaterEqual(s.start_time_unix_nano, root.start_time_unix_nano, name)
            self.assertLessEqual(s.end_time_unix_nano, root.end_time_unix_nano, name)
            if name != "send":
                self.assertEqual(s.end_time_unix_nano - s.start_time_unix_nano, log[name + "_us"] * 1000, name)
        self.assertEqual(len({s.span_id for s in spans}), len(spans), "span ids are unique")
        # What the collector was sent: the OTLP path, protobuf, the resource.
        with self.c.lock:
            path, ctype, req = self.c.posts[-1]
        self.assertEqual(path, "/v1/traces")
        self.assertEqual(ctype, "application/x-protobuf")
        res = {a.key: a.value.string_value for a in req.resource_spans[0].resource.attributes}
        self.assertEqual(res["service.name"], "tiled")
        self.assertGreater(metric(self.d, "tiled_otlp_spans_exported_total"), 0)

    def test_absent_or_invalid_traceparent_starts_a_new_trace(self):
        invalid = [
            None,
            f"00-{TRACE_ID.upper()}-{PARENT_ID}-01",        # upper-case hex
            f"00-{'0' * 32}-{PARENT_ID}-01",                # all-zero trace id
            f"00-{TRACE_ID}-{'0' * 16}-01",                 # all-zero parent id
            f"ff-{TRACE_ID}-{PARENT_ID}-01",                # version ff
            f"00-{TRACE_ID}-{PARENT_ID}-01-extra",          # version 00 is exactly 55 characters
            f"00-{TRACE_ID[:-1]}-{PARENT_ID}-01",           # short trace id
            f"00_{TRACE_ID}-{PARENT_ID}-01",                # wrong separator
            f"00-{TRACE_ID}-{PARENT_ID}-0g",                # flags not hex
            "",
        ]
        seen, sent = set(), []
        # Every request first, then their spans: they come in the exporter's batches (one a second).
        for i, tp in enumerate(invalid):
            rid = f"fresh-{i}"
            headers = {"X-Request-Id": rid, "tracestate": "k=v"}
            if tp is not None:
                headers["traceparent"] = tp
            resp, _ = self.d.request("GET", "/v2/health/live", None, headers)
            self.assertEqual(resp.status, 200)
            sent.append((rid, tp))
        for rid, tp in sent:
            self.assertTrue(wait_for(lambda: access_line(self.d, rid)))
            tid = access_line(self.d, rid)["trace_id"]
            self.assertRegex(tid, r"^[0-9a-f]{32}$")
            self.assertNotEqual(tid, "0" * 32)
            self.assertNotEqual(tid, TRACE_ID, tp)
            seen.add(tid)
            (span,) = [s for s in self.spans_of(tid, 2) if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
            self.assertEqual(span.parent_span_id, b"", tp)  # a root span
            self.assertEqual(span.trace_state, "", "tracestate goes with the traceparent it came with")
        self.assertEqual(len(seen), len(invalid), "every new trace has its own id")

    def test_future_version_is_read_by_its_first_fields(self):
        tid = "0af7651916cd43dd8448eb211c80319c"
        resp, _ = self.d.request("GET", "/v2/health/live", None, {
            "traceparent": f"cc-{tid}-b7ad6b7169203331-01-what-the-future-holds", "X-Request-Id": "future-1"})
        self.assertEqual(resp.status, 200)
        self.assertTrue(wait_for(lambda: access_line(self.d, "future-1")))
        self.assertEqual(access_line(self.d, "future-1")["trace_id"], tid)
        (span,) = [s for s in self.spans_of(tid, 2) if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
        self.assertEqual(span.parent_span_id.hex(), "b7ad6b7169203331")

    def test_unsampled_is_logged_not_exported(self):
        unsampled, sampled = "1" * 32, "2" * 32
        self.d.request("GET", "/v2/health/live", None, {"traceparent": f"00-{unsampled}-{PARENT_ID}-00",
                                                          "X-Request-Id": "unsampled-1"})
        self.d.request("GET", "/v2/health/live", None, {"traceparent": f"00-{sampled}-{PARENT_ID}-01"})
        self.assertTrue(wait_for(lambda: access_line(self.d, "unsampled-1")))
        self.assertEqual(access_line(self.d, "unsampled-1")["trace_id"], unsampled)
        # Spans leave in the order requests end: once the later request's
        # are in, the earlier one's would be too.
        self.spans_of(sampled, 2)
        self.assertEqual(self.c.trace(unsampled), [])

    def test_grpc_call_is_traced(self):
        channel = grpc.insecure_channel(f"127.0.0.1:{self.d.grpc_port}")
        try:
            tid = "3" * 32
            raw_method(channel, LIVE)(b"", metadata=(("traceparent", f"00-{tid}-{PARENT_ID}-01"),
                                                     ("tracestate", "vendor=grpc")), timeout=30)
            arr = np.arange(6, dtype=np.float32).reshape(2, 3)
            tid2 = "4" * 32
            reply = raw_method(channel, "/inference.GRPCInferenceService/ModelInfer")(
                infer_request(arr, [2, 1]), metadata=(("traceparent", f"00-{tid2}-{PARENT_ID}-01"),), timeout=30)
            self.assertTrue(reply)
        finally:
            channel.close()
        (root,) = [s for s in self.spans_of(tid, 2) if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
        self.assertEqual(root.name, "inference.GRPCInferenceService/ServerLive")
        self.assertEqual(root.parent_span_id.hex(), PARENT_ID)
        self.assertEqual(root.trace_state, "vendor=grpc")
        attrs = {a.key: a.value.string_value for a in root.attributes}
        self.assertEqual(attrs["tiled.transport"], "grpc")
        self.assertEqual(attrs["rpc.method"], LIVE)
        spans = self.spans_of(tid2, 2)
        (root2,) = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
        self.assertEqual(root2.name, "inference.GRPCInferenceService/ModelInfer")
        names = {s.name for s in spans if s is not root2}
        self.assertIn("send", names)
        for s in spans:
            if s is not root2:
                self.assertEqual(s.parent_span_id, root2.span_id)
                self.assertGreaterEqual(s.start_time_unix_nano, root2.start_time_unix_nano)
                self.assertLessEqual(s.end_time_unix_nano, root2.end_time_unix_nano)


class Unreachable(unittest.TestCase):
    """A collector that is gone or never answers: requests go on."""

    def hammer(self, d, n):
        conn = http.client.HTTPConnection(d.host, d.port, timeout=60)
        statuses = set()
        for _ in range(n):
            conn.request("GET", "/v2/health/live")
            resp = conn.getresponse()
            resp.read()
            statuses.add(resp.status)
        conn.close()
        return statuses

    def test_hanging_collector(self):
        h = Hanging()
        d = Daemon("--otlp-endpoint", h.url)
        try:
            # The ring holds 2048 requests and the exporter is stuck on a
            # batch (for its 2 s deadline): requests faster than it drains
            # overflow the ring, and what overflows is counted.
            deadline = time.monotonic() + 300
            while not metric(d, "tiled_otlp_spans_dropped_total") and time.monotonic() < deadline:
                self.assertEqual(self.hammer(d, 1000), {200})
            dropped = metric(d, "tiled_otlp_spans_dropped_total")
            self.assertGreater(dropped, 0)
            capacity = metric(d, "tiled_otlp_queue_capacity")
            self.assertEqual(capacity, 2048)
            self.assertEqual(self.hammer(d, 6000), {200})
            self.assertTrue(wait_for(lambda: metric(d, "tiled_otlp_spans_failed_total") > 0, 60 * SLOW))
            # The queue is bounded by its own account, not by resident memory (which also
            # counts the allocator's arenas): it never holds more than its capacity, and
            # requests that found it full had their spans dropped, not kept.
            self.assertLessEqual(metric(d, "tiled_otlp_queued_requests"), capacity)
            self.assertGreater(metric(d, "tiled_otlp_spans_dropped_total"), dropped)
        finally:
            self.assertEqual(d.stop(), 0)
            h.stop()

    def test_stopped_collector(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there: connections are refused
        d = Daemon("--otlp-endpoint", f"http://127.0.0.1:{port}/v1/traces")
        try:
            self.assertEqual(self.hammer(d, 300), {200})
            self.assertTrue(wait_for(lambda: metric(d, "tiled_otlp_spans_failed_total") > 0, 60 * SLOW))
            self.assertEqual(metric(d, "tiled_otlp_spans_exported_total"), 0)
        finally:
            self.assertEqual(d.stop(), 0)


def traceparent_cases(rng, n):
    """Valid traceparents and near misses: each field mutated the ways a
    parser could get wrong (case, length, separators, zero ids, versions,
    suffixes), with a fresh trace id each so verdicts cannot be confused."""
    out = []
    for _ in range(n):
        tid = "".join(rng.choice("0123456789abcdef") for _ in range(32))
        pid = "".join(rng.choice("0123456789abcdef") for _ in range(16))
        version = rng.choice(["00", "00", "01", "cc", "fe", "ff", "0F", "g0", "0"])
        flags = rng.choice(["00", "01", "03", "ff", "0", "0x", "FF"])
        suffix = rng.choice(["", "", "", "-", "-x", "-what-ever", "x", " ", "\t", "  -x", "-" + "a" * 460])
        fields = [version, tid, pid, flags]
        m = rng.randrange(8)
        if m == 1:
            fields[1] = "0" * 32
        elif m == 2:
            fields[2] = "0" * 16
        elif m == 3:
            i = rng.randrange(4)
            fields[i] = fields[i].upper()
        elif m == 4:
            i = rng.randrange(1, 3)
            fields[i] = fields[i][:-1] if rng.random() < 0.5 else fields[i] + "a"
        sep = rng.choice(["-", "-", "-", "-", "_", "--"])
        out.append((tid, sep.join(fields) + suffix))
    return out


class Differential(unittest.TestCase):
    """The traceparent reader against OpenTelemetry's own propagator
    (opentelemetry-api's TraceContextTextMapPropagator): what one accepts,
    the other accepts with the same trace id; what it refuses, tiled
    answers with a new trace id."""

    def test_against_opentelemetry_propagator(self):
        rng = random.Random(2024)
        cases = traceparent_cases(rng, 400)
        prop = TraceContextTextMapPropagator()
        logging.getLogger("opentelemetry").setLevel(logging.ERROR)  # its warning on each long value
        d = Daemon()
        try:
            conn = http.client.HTTPConnection(d.host, d.port, timeout=60)
            for i, (_, tp) in enumerate(cases):
                conn.request("GET", "/v2/health/live", headers={"traceparent": tp, "X-Request-Id": f"diff-{i}"})
                resp = conn.getresponse()
                resp.read()
                self.assertEqual(resp.status, 200)
            conn.close()
            last = f"diff-{len(cases) - 1}"
            self.assertTrue(wait_for(lambda: access_line(d, last)))
            logged = {}
            for line in d.log_lines():
                if line.startswith("{") and '"event":"access"' in line:
                    doc = json.loads(line)
                    logged[doc["request_id"]] = doc["trace_id"]
            accepted = 0
            for i, (tid, tp) in enumerate(cases):
                # HTTP carries a field value without the spaces around it.
                ctx = otel_trace.get_current_span(prop.extract({"traceparent": tp.strip(" \t")})).get_span_context()
                theirs = format(ctx.trace_id, "032x") if ctx.is_valid else None
                ours = logged[f"diff-{i}"]
                if theirs:
                    accepted += 1
                    self.assertEqual(ours, theirs, f"accepted by opentelemetry: {tp!r}")
                else:
                    self.assertNotEqual(ours, tid, f"refused by opentelemetry: {tp!r}")
            # Both verdicts are well represented.
            self.assertGreater(accepted, 20)
            self.assertLess(accepted, len(cases) - 20)
        finally:
            self.assertEqual(d.stop(), 0)


class Config(unittest.TestCase):
    def test_unusable_endpoints_stop_the_start(self):
        for url, fragment in (("https://collector:4318", "https is not supported"),
                              ("collector:4318", "is not an http://"),
                              ("http://:4318", "bad host"),
                              ("http://collector:99999", "bad port")):
            r = subprocess.run([BIN, "serve", "--port", "0", "--otlp-endpoint", url], capture_output=True, text=True,
                               timeout=60)
            self.assertNotEqual(r.returncode, 0, url)
            self.assertIn(fragment, r.stderr, url)

    def test_off_by_default(self):
        d = Daemon()
        try:
            resp, _ = d.request("GET", "/v2/health/live", None, {"X-Request-Id": "off-1"})
            self.assertEqual(resp.status, 200)
            self.assertTrue(wait_for(lambda: access_line(d, "off-1")))
            self.assertRegex(access_line(d, "off-1")["trace_id"], r"^[0-9a-f]{32}$")
            self.assertIsNone(metric(d, "tiled_otlp_spans_exported_total"))
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
