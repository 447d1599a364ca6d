"""Integration tests: the daemon over real HTTP on loopback.

Starts build/tiled (or $TILED_BIN) on a free port, drives it with http.client
and checks every answer against numpy.tile. Run with /usr/bin/python3 (it
needs Debian's python3-numpy): python3 -m unittest tests/server/test_http.py
"""
import http.client
import io
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harness.daemon import QUICK, Daemon, read_until_close  # noqa: E402
from harness.tensors import same, sample  # noqa: E402

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def to_json_value(x, dtype):
    """A numpy element as tiled's JSON form."""
    if dtype.startswith("complex"):
        return [to_json_value(x.real, "float64"), to_json_value(x.imag, "float64")]
    if dtype == "bool":
        return bool(x)
    if dtype.startswith(("int", "uint")):
        return int(x)
    f = float(x)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def from_json_value(v, dtype):
    if dtype.startswith("complex"):
        return complex(from_json_value(v[0], "float64"), from_json_value(v[1], "float64"))
    if isinstance(v, str):
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[v]
    return v


class TileHTTP(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()
        cls.rng = np.random.default_rng(1234)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"

    def post_json(self, doc, accept=None):
        headers = {"Content-Type": "application/json"}
        if accept:
            headers["Accept"] = accept
        return self.d.request("POST", "/v1/tile", json.dumps(doc), headers)

    def json_ok(self, doc):
        resp, body = self.post_json(doc)
        self.assertEqual(resp.status, 200, body)
        return json.loads(body)

    def assert_error(self, resp, body, status, fragment):
        self.assertEqual(resp.status, status, body)
        self.assertEqual(resp.getheader("Content-Type"), "application/json")
        msg = json.loads(body)["error"]
        self.assertIn(fragment, msg)

    # ---- JSON -----------------------------------------------------------
    def test_json_every_dtype(self):
        for dtype in DTYPES:
            a = sample(dtype, (2, 3), self.rng)
            flat = [to_json_value(x, dtype) for x in a.flatten()]
            out = self.json_ok({"input": {"dtype": dtype, "shape": [2, 3], "data": flat}, "repeats": [2, 2]})
            self.assertEqual(out["output"]["dtype"], dtype)
            self.assertEqual(out["output"]["shape"], [4, 6])
            got = np.array([from_json_value(v, dtype) for v in out["output"]["data"]], dtype=dtype).reshape(4, 6)
            self.assertTrue(same(got, np.tile(a, (2, 2))), dtype)

    def test_json_nested_infers_shape(self):
        out = self.json_ok({"input": {"dtype": "int32", "data": [[1, 2], [3, 4]]}, "repeats": [1, 2]})
        self.assertEqual(out["output"]["shape"], [2, 4])
        self.assertEqual(out["output"]["data"], [1, 2, 1, 2, 3, 4, 3, 4])

    def test_json_strings(self):
        data = ["", "héllo", "x" * 3000, "日本"]
        out = self.json_ok({"input": {"dtype": "string", "shape": [4], "data": data}, "repeats": [2]})
        self.assertEqual(out["output"]["dtype"], "str")
        self.assertEqual(out["output"]["data"], data * 2)

    def test_json_special_floats_and_extremes(self):
        out = self.json_ok({"input": {"dtype": "float32", "shape": [4],
                                      "data": ["NaN", "Infinity", "-Infinity", 0.1]}, "repeats": [1]})
        self.assertEqual(out["output"]["data"][1:], ["Infinity", "-Infinity", 0.1])
        self.assertEqual(out["output"]["data"][0], "NaN")
        big = [18446744073709551615, 0, 9223372036854775808]
        out = self.json_ok({"input": {"dtype": "uint64", "shape": [3], "data": big}, "repeats": [2]})
        self.assertEqual(out["output"]["data"], big * 2)
        ints = [-9223372036854775808, 9223372036854775807]
        out = self.json_ok({"input": {"dtype": "int64", "shape": [2], "data": ints}, "repeats": [1]})
        self.assertEqual(out["output"]["data"], ints)

    def test_json_metrics_match_server_timing(self):
        resp, body = self.post_json({"input": {"dtype": "float32", "shape": [2], "data": [1, 2]}, "repeats": [3]})
        doc = json.loads(body)
        st = resp.getheader("Server-Timing")
        for phase in ("queue", "decode", "tile", "encode", "total"):
            self.assertIn(f"{phase}_us", doc["metrics"])
            m = re.search(phase + r";dur=([0-9.]+)", st)
            self.assertIsNotNone(m, st)
            self.assertAlmostEqual(float(m.group(1)) * 1000, doc["metrics"][f"{phase}_us"], delta=1.0)
        self.assertTrue(resp.getheader("X-Request-Id"))

    def test_request_id_echoed(self):
        resp, _ = self.d.request("GET", "/v2/health/live", headers={"X-Request-Id": "abc-123"})
        self.assertEqual(resp.getheader("X-Request-Id"), "abc-123")

    def test_semantics(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        flat = a.flatten().tolist()
        cases = [
            ({"repeats": [2, 2, 2], "semantics": "numpy"}, np.tile(a, (2, 2, 2))),
            ({"repeats": [3], "semantics": "openvino"}, np.tile(a, 3)),
            ({"tiles": 2, "axis": -1, "semantics": "onnx1"}, np.concatenate([a, a], axis=-1)),
            ({"repeats": [1, 2], "semantics": "directml"}, np.tile(a, (1, 2))),
        ]
        for extra, want in cases:
            doc = {"input": {"dtype": "float32", "shape": [2, 3], "data": flat}, **extra}
            out = self.json_ok(doc)
            got = np.array(out["output"]["data"], dtype=np.float32).reshape(out["output"]["shape"])
            self.assertTrue(same(got, want), extra)

    def test_json_body_with_query_fields(self):
        """A JSON request's query joins its body: honoured, and checked where both speak."""
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        tensor = {"dtype": "float32", "shape": [2, 3], "data": a.flatten().tolist()}

        def post(doc, query):
            return self.d.request("POST", "/v1/tile?" + query, json.dumps(doc), {"Content-Type": "application/json"})

        ok = [({"input": tensor, "repeats": [2, 2, 2]}, "semantics=numpy", np.tile(a, (2, 2, 2))),
              ({"input": tensor}, "repeats=1,2", np.tile(a, (1, 2))),
              ({"input": tensor, "semantics": "onnx1"}, "tiles=2&axis=0", np.concatenate([a, a], axis=0)),
              ({"input": tensor, "repeats": [2, 1], "semantics": "numpy"},
               "repeats=2,1&semantics=numpy&dtype=float32&shape=2,3", np.tile(a, (2, 1)))]
        for doc, query, want in ok:
            with self.subTest(query=query):
                resp, body = post(doc, query)
                self.assertEqual(resp.status, 200, body)
                out = json.loads(body)["output"]
                got = np.array(out["data"], dtype=np.float32).reshape(out["shape"])
                self.assertTrue(same(got, want), query)
        bad = [({"input": tensor, "repeats": [2, 2]}, "repeats=2,3", "'repeats' is given in the query and in the JSON"),
               ({"input": tensor, "repeats": [2, 2], "semantics": "onnx"}, "semantics=numpy", "'semantics' is given"),
               ({"input": tensor, "repeats": [2, 2]}, "dtype=int8", "query dtype 'int8' does not match"),
               ({"input": tensor, "repeats": [2, 2]}, "shape=3,2", "query shape [3,2] does not match"),
               ({"input": tensor, "repeats": [2, 2]}, "colour=red", "unknown query parameter 'colour'")]
        for doc, query, fragment in bad:
            with self.subTest(query=query):
                resp, body = post(doc, query)
                self.assert_error(resp, body, 400, fragment)

    # ---- raw and npy ------------------------------------------------------
    def test_raw_every_dtype(self):
        for dtype in DTYPES:
            a = sample(dtype, (3, 2), self.rng)
            resp, body = self.d.request("POST", f"/v1/tile?dtype={dtype}&shape=3,2&repeats=2,3", a.tobytes(),
                                        {"Content-Type": "application/octet-stream"})
            self.assertEqual(resp.status, 200, body)
            self.assertEqual(resp.getheader("X-Tensor-Dtype"), dtype)
            self.assertEqual(resp.getheader("X-Tensor-Shape"), "[6,6]")
            got = np.frombuffer(body, dtype=dtype).reshape(6, 6)
            self.assertTrue(same(got, np.tile(a, (2, 3))), dtype)

    def test_raw_strings_and_scalar(self):
        items = [b"a", b"", "é".encode()]
        body = b"".join(len(s).to_bytes(4, "little") + s for s in items)
        resp, out = self.d.request("POST", "/v1/tile?dtype=BYTES&shape=3&repeats=2", body,
                                   {"Content-Type": "application/octet-stream"})
        self.assertEqual(resp.status, 200, out)
        self.assertEqual(out, body * 2)
        resp, out = self.d.request("POST", "/v1/tile?dtype=float64&shape=&repeats=", np.float64(2.5).tobytes(),
                                   {"Content-Type": "application/octet-stream"})
        self.assertEqual(resp.status, 200, out)
        self.assertEqual(resp.getheader("X-Tensor-Shape"), "[]")
        self.assertEqual(np.frombuffer(out, np.float64).tolist(), [2.5])

    def test_npy_round_trip(self):
        for dtype in DTYPES + ["<U3", "|S4"]:
            if dtype.startswith(("<U", "|S")):
                a = np.array([["ab", "c"], ["", "xyz"]], dtype=dtype)
            else:
                a = sample(dtype, (2, 2), self.rng)
            for order in ("C", "F"):
                buf = io.BytesIO()
                np.save(buf, np.asarray(a, order=order))
                resp, out = self.d.request("POST", "/v1/tile?repeats=2,1", buf.getvalue(),
                                           {"Content-Type": "application/x-npy"})
                self.assertEqual(resp.status, 200, out)
                got = np.load(io.BytesIO(out))
                self.assertTrue(np.array_equal(got, np.tile(a, (2, 1))), (dtype, order))
                self.assertEqual(got.dtype.kind, a.dtype.kind)

    def test_accept_negotiation(self):
        a = np.arange(4, dtype=np.int16)
        doc = {"input": {"dtype": "int16", "shape": [4], "data": a.tolist()}, "repeats": [2]}
        resp, body = self.post_json(doc, accept="application/octet-stream")
        self.assertEqual(resp.getheader("Content-Type"), "application/octet-stream")
        self.assertEqual(np.frombuffer(body, np.int16).tolist(), np.tile(a, 2).tolist())
        resp, body = self.post_json(doc, accept="application/x-npy")
        self.assertTrue(np.array_equal(np.load(io.BytesIO(body)), np.tile(a, 2)))
        resp, body = self.post_json(doc, accept="text/html")
        self.assert_error(resp, body, 406, "Accept")
        resp, body = self.post_json(doc, accept="text/html;q=0.9, application/x-npy;q=0.5")
        self.assertEqual(resp.getheader("Content-Type"), "application/x-npy")

    # ---- errors -----------------------------------------------------------
    def test_error_statuses(self):
        resp, body = self.d.request("GET", "/nope")
        self.assert_error(resp, body, 404, "/nope")
        resp, body = self.d.request("GET", "/v1/tile")
        self.assert_error(resp, body, 405, "GET")
        self.assertEqual(resp.getheader("Allow"), "POST")
        resp, body = self.d.request("POST", "/v1/tile", b"{}", {"Content-Type": "text/plain"})
        self.assert_error(resp, body, 415, "text/plain")
        resp, body = self.post_json({"input": {"dtype": "float32", "shape": [2], "data": [1, 2]},
                                     "repeats": [1, 2]})
        self.assert_error(resp, body, 400, "repeats has 2 values but input has rank 1")
        resp, body = self.d.request("POST", "/v1/tile", b"{\"input\": ", {"Content-Type": "application/json"})
        self.assertEqual(resp.status, 400, body)
        resp, body = self.d.request("POST", "/v1/tile?dtype=float32&shape=2&repeats=2", b"abc",
                                    {"Content-Type": "application/octet-stream"})
        self.assert_error(resp, body, 400, "bytes")
        resp, body = self.d.request("POST", "/v1/tile?dtype=float32&shape=2&repeats=2&bogus=1", b"abcdabcd",
                                    {"Content-Type": "application/octet-stream"})
        self.assert_error(resp, body, 400, "bogus")
        resp, body = self.post_json({"input": {"dtype": "uint8", "shape": [1], "data": [1]},
                                     "repeats": [1 << 62]}, accept="application/json")
        self.assertEqual(resp.status, 413, body)
        # The daemon is still healthy after all of it.
        resp, _ = self.d.request("GET", "/v2/health/ready")
        self.assertEqual(resp.status, 200)

    def test_concurrent_clients(self):
        errors = []

        def worker(seed):
            rng = np.random.default_rng(seed)
            for _ in range(20):
                a = sample("float32", (4, 5), rng)
                resp, body = self.d.request("POST", "/v1/tile?dtype=float32&shape=4,5&repeats=3,2", a.tobytes(),
                                            {"Content-Type": "application/octet-stream"})
                if resp.status != 200 or np.frombuffer(body, np.float32).tobytes() != np.tile(a, (3, 2)).tobytes():
                    errors.append((seed, resp.status))

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_large_output_offloaded_and_streamed(self):
        a = np.arange(256, dtype=np.float32)
        resp, body = self.d.request("POST", "/v1/tile?dtype=float32&shape=256&repeats=40000", a.tobytes(),
                                    {"Content-Type": "application/octet-stream"})
        self.assertEqual(resp.status, 200)
        self.assertEqual(len(body), 256 * 4 * 40000)
        self.assertEqual(body, np.tile(a, 40000).tobytes())

    def test_streamed_json_carries_its_metrics(self):
        """A JSON body produced while it is sent ends with real figures: the
        total covers the phases that came before the tail was written."""
        d = Daemon("--stream-threshold", "64K", "--stream-chunk", "16K")
        try:
            a = np.arange(8, dtype=np.int32)
            resp, body = d.request("POST", "/v1/tile", json.dumps(
                {"input": {"dtype": "int32", "shape": [8], "data": a.tolist()}, "repeats": [20000]}),
                {"Content-Type": "application/json"})
            self.assertEqual(resp.status, 200)
            doc = json.loads(body)
            self.assertGreater(len(body), 64 << 10)
            self.assertEqual(doc["output"]["data"], np.tile(a, 20000).tolist())
            m = doc["metrics"]
            self.assertGreater(m["encode_us"], 0)
            self.assertGreater(m["total_us"], 0)
            self.assertGreaterEqual(m["total_us"], m["queue_us"] + m["decode_us"] + m["tile_us"])
        finally:
            self.assertEqual(d.stop(), 0)

    def test_access_log_is_json(self):
        self.d.request("GET", "/v2/health/live", headers={"X-Request-Id": "log-check"})

        def lines():
            return [l for l in map(json.loads, self.d.log_lines())
                    if l.get("event") == "access" and l.get("request_id") == "log-check"]

        deadline = time.monotonic() + 60  # the line is written after the answer: wait for it
        while not lines() and time.monotonic() < deadline:
            time.sleep(0.02)
        access = lines()
        self.assertEqual(len(access), 1)
        for key in ("time", "method", "path", "status", "bytes_in", "bytes_out", "total_us", "remote"):
            self.assertIn(key, access[0])


class Streaming(unittest.TestCase):
    @unittest.skipIf(QUICK, "TILED_QUICK: the multi-GiB stream is too slow under a wrapper")
    def test_multi_gib_stream_keeps_rss_bounded(self):
        d = Daemon()
        try:
            a = np.arange(1024, dtype=np.uint8)
            size = 1024 * (3 << 20)  # 3 GiB
            conn = http.client.HTTPConnection(d.host, d.port, timeout=120)
            conn.request("POST", f"/v1/tile?dtype=uint8&shape=1024&repeats={3 << 20}", a.tobytes(),
                         {"Content-Type": "application/octet-stream"})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(int(resp.getheader("Content-Length")), size)
            got, peak = 0, 0
            while True:
                chunk = resp.read(1 << 22)
                if not chunk:
                    break
                if got % (256 << 20) < len(chunk):
                    self.assertEqual(chunk[:1024], a.tobytes()[:min(1024, len(chunk))])
                got += len(chunk)
                peak = max(peak, d.rss_kib())
            self.assertEqual(got, size)
            # The margin: a daemon that held the reply would grow by 3 GiB; one that streams
            # holds a few 1 MiB chunks (--stream-chunk) over its ~10-30 MiB at rest (ASan's
            # shadow and quarantine included), so 64 MiB is 48x below the failure and 2x
            # above what the allocator can explain.
            self.assertLess(peak, 64 * 1024, "daemon RSS must stay under 64 MiB while streaming")
        finally:
            self.assertEqual(d.stop(), 0)

    def test_trailers_on_request(self):
        d = Daemon("--stream-threshold", "1K")
        try:
            s = socket.create_connection((d.host, d.port))
            body = np.arange(16, dtype=np.uint8).tobytes()
            s.sendall(b"POST /v1/tile?dtype=uint8&shape=16&repeats=1000 HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n"
                      b"Content-Type: application/octet-stream\r\nConnection: close\r\n"
                      b"Content-Length: 16\r\n\r\n" + body)
            data, _ = read_until_close(s, limit=1 << 30)
            s.close()
            head, _, rest = data.partition(b"\r\n\r\n")
            self.assertIn(b"Transfer-Encoding: chunked", head)
            self.assertIn(b"Trailer: Server-Timing", head)
            self.assertRegex(rest[-80:].decode(errors="replace"), r"Server-Timing: total;dur=[0-9.]+\r\n\r\n$")
        finally:
            self.assertEqual(d.stop(), 0)


class BodyReuse(unittest.TestCase):
    """In-memory outputs are written into buffers of earlier answers
    (--body-cache): every answer stays exact whatever a reused buffer held
    before, and /metrics counts the reuse."""

    @staticmethod
    def cache_metrics(d):
        _, data = d.request("GET", "/metrics")
        got = {}
        for line in data.decode().splitlines():
            m = re.fullmatch(r"tiled_body_cache_(hits_total|misses_total|bytes) (\d+)", line)
            if m:
                got[m.group(1)] = int(m.group(2))
        return got

    def post_raw(self, d, a, reps, accept_encoding=None):
        headers = {"Content-Type": "application/octet-stream", "Accept": "application/octet-stream"}
        if accept_encoding:
            headers["Accept-Encoding"] = accept_encoding
        shape = ",".join(map(str, a.shape))
        resp, data = d.request("POST", f"/v1/tile?dtype={a.dtype}&shape={shape}&repeats={','.join(map(str, reps))}",
                               a.tobytes(), headers)
        self.assertEqual(resp.status, 200, data[:200])
        if accept_encoding:
            import zlib
            self.assertEqual(resp.getheader("Content-Encoding"), "gzip")
            data = zlib.decompress(data, 31)
        self.assertEqual(data, np.tile(a, reps).tobytes())

    def test_reused_bodies_are_exact_and_counted(self):
        d = Daemon("--workers", "2")
        rng = np.random.default_rng(77)
        try:
            before = self.cache_metrics(d)
            self.assertEqual(before, {"hits_total": 0, "misses_total": 0, "bytes": 0})
            img = rng.integers(0, 256, (3, 224, 224), dtype=np.uint8)
            for _ in range(3):  # 2.3 MiB, the same size again and again
                self.post_raw(d, img, (1, 4, 4))
            # a smaller body of another dtype into the same buffer, then gzip
            # (the compressed copy replaces the reused buffer, which goes back)
            self.post_raw(d, rng.standard_normal((100, 700)).astype(np.float32), (2, 3))
            self.post_raw(d, img, (1, 4, 4), accept_encoding="gzip")
            self.post_raw(d, img, (1, 4, 4))
            after = self.cache_metrics(d)
            self.assertEqual(after["hits_total"] + after["misses_total"], 6)
            self.assertGreaterEqual(after["hits_total"], 4)
            self.assertGreater(after["bytes"], 2 << 20)
            self.assertLessEqual(after["bytes"], 64 << 20)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_cache_off_keeps_nothing(self):
        d = Daemon("--body-cache", "0")
        try:
            img = np.arange(3 * 224 * 224, dtype=np.uint8).reshape(3, 224, 224)
            for _ in range(2):
                self.post_raw(d, img, (1, 4, 4))
            self.assertEqual(self.cache_metrics(d), {"hits_total": 0, "misses_total": 2, "bytes": 0})
        finally:
            self.assertEqual(d.stop(), 0)


class Lifecycle(unittest.TestCase):
    def test_overload_gives_503_with_retry_after(self):
        d = Daemon("--workers", "1", "--queue", "1", "--stream-threshold", "1G", "--max-output", "2G")
        try:
            results = []

            def big():
                a = np.zeros(1 << 16, dtype=np.uint8)
                resp, body = d.request("POST", "/v1/tile?dtype=uint8&shape=65536&repeats=8000", a.tobytes(),
                                       {"Content-Type": "application/octet-stream"})
                results.append((resp.status, resp.getheader("Retry-After"), len(body)))

            threads = [threading.Thread(target=big) for _ in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            statuses = sorted(r[0] for r in results)
            self.assertIn(503, statuses)
            self.assertIn(200, statuses)
            for status, retry, _ in results:
                if status == 503:
                    self.assertEqual(retry, "1")
        finally:
            self.assertEqual(d.stop(), 0)

    def test_sigterm_drains_in_flight_requests(self):
        d = Daemon("--stream-chunk", "64K")
        a = np.arange(64, dtype=np.uint8)
        conn = http.client.HTTPConnection(d.host, d.port, timeout=60)
        conn.request("POST", f"/v1/tile?dtype=uint8&shape=64&repeats={1 << 22}", a.tobytes(),
                     {"Content-Type": "application/octet-stream"})
        resp = conn.getresponse()
        first = resp.read(1 << 16)
        d.proc.send_signal(signal.SIGTERM)
        # New connections are refused while draining (the listener closes once the signal is
        # seen), and the stream in flight still completes below.
        deadline = time.monotonic() + 30
        refused = False
        while not refused and time.monotonic() < deadline:
            try:
                socket.create_connection((d.host, d.port), timeout=5).close()
            except (ConnectionRefusedError, ConnectionResetError):  # the listener gone, or closing
                refused = True
        self.assertTrue(refused, "the listener stayed open while draining")
        rest = resp.read()
        self.assertEqual(len(first) + len(rest), 64 << 22)
        self.assertEqual(d.proc.wait(30), 0)

    def test_drain_timeout_cuts_slow_streams_and_exits_cleanly(self):
        d = Daemon("--drain-timeout", "1", "--stream-chunk", "64K")
        conn = http.client.HTTPConnection(d.host, d.port, timeout=30)
        conn.request("POST", f"/v1/tile?dtype=uint8&shape=64&repeats={1 << 24}", np.arange(64, dtype=np.uint8).tobytes(),
                     {"Content-Type": "application/octet-stream"})
        resp = conn.getresponse()
        resp.read(1 << 16)  # then stop reading: the stream stalls
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(d.proc.wait(60), 0)  # exits although the stream never drains
        print(f"\n  drain cut the stalled stream after {time.monotonic() - t0:.2f} s (--drain-timeout 1)")
        conn.close()


if __name__ == "__main__":
    unittest.main()
