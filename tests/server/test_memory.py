"""--max-memory: one budget for the request memory of every request, over both transports.

A client holds part of the budget with a body it has not finished sending; meanwhile a
request whose body would go above it (HTTP), one whose in-memory output would (HTTP), and a
gRPC call whose message would, are refused with 503 and Retry-After (gRPC: UNAVAILABLE),
naming the flag; the held request then completes whole, the budget is all given back (the
daemon's own gauge), and the refused requests succeed when sent again. A request above the
budget is served when it is alone. What one request holds is, by the daemon's own account, its
work record, its body once, a compressed body's inflated copy, its decoded input and its reply;
one that fits the budget to the byte is served, one byte more is refused. Waits are for
conditions (the daemon's gauges), not time.

    cd tests/server && TILED_BIN=../../build/tiled build/venv/bin/python -m unittest -v test_memory
"""
import gzip
import http.client
import json
import socket
import unittest

import grpc
import numpy as np

from harness.daemon import DaemonCase, Daemon, wait_for
from harness.grpcwire import INFER, infer_request, pb_len, raw_method, raw_output

BUDGET = 1 << 20
HELD = 800_000          # the held request's body and output: more than half the budget
SENT_FIRST = 700_000    # what its client sends before it stops
RAW = {"Content-Type": "application/octet-stream"}
JSON = {"Content-Type": "application/json"}
V2_INFER = "/v2/models/tile/infer"


def metric(d, name):
    resp, body = d.request("GET", "/metrics")
    assert resp.status == 200, resp.status
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{name} is not on /metrics")


def tile_path(n, repeats=1):
    return f"/v1/tile?dtype=int8&shape={n}&repeats={repeats}"


class MemoryBudget(DaemonCase):
    daemon_args = ("--max-memory", str(BUDGET), "--max-body", "4M", "--grpc-port", "0", "--log-level", "warn")

    def held(self):
        return metric(self.d, "tiled_request_memory_bytes")

    def begin_upload(self, data, sent):
        """A connection whose raw request for `data` (tiled once) has sent `sent` bytes of its body
        and stopped, once the daemon holds them (the library may still buffer a few KiB)."""
        s = socket.create_connection((self.d.host, self.d.port), timeout=60)
        s.sendall(f"POST {tile_path(data.size)} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n"
                  f"Content-Length: {data.size}\r\n\r\n".encode() + data[:sent].tobytes())
        self.assertTrue(wait_for(lambda: self.held() >= sent - (64 << 10), 60), self.held())
        return s

    def end_upload(self, s, data, sent):
        """The rest of the body: the request ends whole."""
        s.sendall(data[sent:].tobytes())
        resp = http.client.HTTPResponse(s)
        resp.begin()
        self.assertEqual((resp.status, resp.read()), (200, data.tobytes()))

    def assert_refused(self, resp, body):
        self.assertEqual(resp.status, 503, body[:300])
        self.assertEqual(resp.getheader("Retry-After"), "1")
        self.assertIn("--max-memory", json.loads(body)["error"])

    def test_a_held_body_keeps_others_out_until_it_ends(self):
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())
        data = (np.arange(HELD) % 97).astype(np.int8)
        refused0 = metric(self.d, "tiled_request_memory_refused_total")
        s = self.begin_upload(data, SENT_FIRST)
        try:
            # A body that would go above the budget, refused as it arrives.
            resp, body = self.d.request("POST", tile_path(HELD), data.tobytes(), RAW)
            self.assert_refused(resp, body)
            # A small body whose in-memory output (1,000,000 bytes) would.
            small = data[:1000]
            resp, body = self.d.request("POST", tile_path(1000, 1000), small.tobytes(), RAW)
            self.assert_refused(resp, body)
            # A gRPC call whose message would: the budget is the process's, not a transport's.
            with grpc.insecure_channel(f"{self.d.host}:{self.d.grpc_port}") as ch:
                with self.assertRaises(grpc.RpcError) as cm:
                    raw_method(ch, INFER)(infer_request(data, [1]), timeout=60)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("--max-memory", cm.exception.details())
            self.assertEqual(metric(self.d, "tiled_request_memory_refused_total") - refused0, 3)

            self.end_upload(s, data, SENT_FIRST)  # the held request ends whole
        finally:
            s.close()
        # Everything taken is given back, and the refused requests pass when sent again.
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())
        resp, body = self.d.request("POST", tile_path(1000, 1000), data[:1000].tobytes(), RAW)
        self.assertEqual(resp.status, 200)
        self.assertEqual(body, np.tile(data[:1000], 1000).tobytes())
        with grpc.insecure_channel(f"{self.d.host}:{self.d.grpc_port}") as ch:
            reply = raw_method(ch, INFER)(infer_request(data, [1]), timeout=60)
        self.assertEqual(raw_output(reply), data.tobytes())
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())
        self.assertGreaterEqual(metric(self.d, "tiled_request_memory_peak_bytes"), SENT_FIRST)
        self.assertEqual(metric(self.d, "tiled_request_memory_budget_bytes"), BUDGET)

    def test_a_grpc_call_without_room_for_its_own_state_is_refused_before_it_begins(self):
        """A call's own state (about 10 KiB) is request memory: with the budget all but full, a new
        stream is refused (REFUSED_STREAM; grpc-python retries it once, then says UNAVAILABLE)."""
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())
        total, first = BUDGET - 1000, BUDGET - 8000
        data = (np.arange(total) % 83).astype(np.int8)
        refused0 = metric(self.d, "tiled_request_memory_refused_total")
        s = self.begin_upload(data, first)
        try:
            self.assertTrue(wait_for(lambda: self.held() + 10000 > BUDGET, 60), self.held())
            with grpc.insecure_channel(f"{self.d.host}:{self.d.grpc_port}") as ch:
                with self.assertRaises(grpc.RpcError) as cm:
                    raw_method(ch, INFER)(infer_request(data[:10], [1]), timeout=60)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE, cm.exception.details())
            self.assertGreaterEqual(metric(self.d, "tiled_request_memory_refused_total") - refused0, 1)
            self.end_upload(s, data, first)
        finally:
            s.close()
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())
        with grpc.insecure_channel(f"{self.d.host}:{self.d.grpc_port}") as ch:
            reply = raw_method(ch, INFER)(infer_request(data[:10], [1]), timeout=60)
        self.assertEqual(raw_output(reply), data[:10].tobytes())

    def test_a_request_above_the_budget_is_served_alone(self):
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())
        data = (np.arange(3 * BUDGET // 2) % 89).astype(np.int8)
        resp, body = self.d.request("POST", tile_path(data.size, 2), data.tobytes(), RAW)
        self.assertEqual(resp.status, 200, body[:300])
        self.assertEqual(body, np.tile(data, 2).tobytes())


def fp64_infer(n):
    """A v2 JSON infer of an FP64 input of n ones, tiled once: 2 bytes of text an element, 8 decoded."""
    return json.dumps({"inputs": [{"name": "input", "datatype": "FP64", "shape": [n], "data": [1] * n},
                                  {"name": "repeats", "datatype": "INT64", "shape": [1], "data": [1]}]},
                      separators=(",", ":")).encode()


class WhatARequestHolds(unittest.TestCase):
    """The daemon's own account of a request (tiled_request_memory_peak_bytes of a fresh daemon,
    one request at a time, each holding more than the one before): its work record, its body
    once as it arrived, a compressed body's inflated copy, its decoded input and its reply, each
    counted once and all held at its end. The record's size is what a request refused at decode
    holds beside its body."""

    N = 4096  # FP64 elements: a body of 8 KiB, a decoded input of 32 KiB

    def setUp(self):
        self.d = Daemon("--max-memory", str(BUDGET), "--grpc-port", "0", "--log-level", "warn")

    def tearDown(self):
        self.assertEqual(self.d.stop(), 0)

    def held(self):
        return metric(self.d, "tiled_request_memory_bytes")

    def peak(self):
        return metric(self.d, "tiled_request_memory_peak_bytes")

    def record(self):
        """A v2 infer's work record: the first request, refused at decode, holds it and its body."""
        self.assertEqual((self.held(), self.peak()), (0, 0))
        resp, body = self.d.request("POST", V2_INFER, b"{}", JSON)
        self.assertEqual(resp.status, 400, body)
        return self.peak() - 2

    def infer(self, body, headers=JSON):
        resp, reply = self.d.request("POST", V2_INFER, body, headers)
        self.assertEqual(resp.status, 200, reply[:300])
        self.assertEqual(json.loads(reply)["outputs"][0]["data"], [1] * self.N)
        return reply

    def test_a_plain_and_a_gzip_body_beside_the_decoded_input_and_reply(self):
        record, doc = self.record(), fp64_infer(self.N)
        reply = self.infer(doc)
        self.assertEqual(self.peak(), record + len(doc) + 8 * self.N + len(reply))
        packed = gzip.compress(doc)
        reply = self.infer(packed, dict(JSON, **{"Content-Encoding": "gzip"}))
        self.assertEqual(self.peak(), record + len(packed) + len(doc) + 8 * self.N + len(reply))
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())

    def test_a_grpc_call_beside_its_decoded_input_and_reply(self):
        """A call's own state is counted beside its request's: a call refused at decode holds it,
        the record and its message."""
        self.assertEqual((self.held(), self.peak()), (0, 0))
        probe = pb_len(1, b"tile")  # model "tile", no inputs
        data = (np.arange(8192) % 97).astype(np.int8)
        message = infer_request(data, [2])
        with grpc.insecure_channel(f"{self.d.host}:{self.d.grpc_port}") as ch:
            with self.assertRaises(grpc.RpcError) as cm:
                raw_method(ch, INFER)(probe, timeout=60)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, cm.exception.details())
            state = self.peak() - len(probe)
            reply = raw_method(ch, INFER)(message, timeout=60)
        self.assertEqual(raw_output(reply), np.tile(data, 2).tobytes())
        self.assertEqual(self.peak(), state + len(message) + data.size + len(reply))
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())

    def test_a_request_that_fits_to_the_byte_is_served_and_one_byte_more_is_refused(self):
        """Beside an unfinished body holding the rest of the budget (a v2 infer's record is made
        when its body is whole, so it holds its bytes alone): with room for the request's body,
        record, decoded input and reply it is served; one byte less and its reply is refused; as
        many less again as the reply's bytes, and its decoded input is."""
        record, doc = self.record(), fp64_infer(self.N)
        reply = self.infer(doc)
        need = record + len(doc) + 8 * self.N + len(reply)
        self.assertEqual(self.peak(), need)
        refused0 = metric(self.d, "tiled_request_memory_refused_total")
        s = socket.create_connection((self.d.host, self.d.port), timeout=60)
        try:
            s.sendall(f"POST {V2_INFER} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {BUDGET}\r\n\r\n".encode())
            others = 0
            for more, refused in ((BUDGET - need, None), (1, len(reply)), (len(reply), 8 * self.N)):
                s.sendall(b" " * more)
                others += more
                self.assertTrue(wait_for(lambda: self.held() == others, 60), (self.held(), others))
                if refused is None:
                    self.assertEqual(self.infer(doc), reply)
                    self.assertEqual(self.peak(), BUDGET)
                    continue
                resp, body = self.d.request("POST", V2_INFER, doc, JSON)
                self.assertEqual(resp.status, 503, body[:300])
                self.assertEqual(resp.getheader("Retry-After"), "1")
                self.assertIn(f"server memory budget: {refused} more bytes do not fit, other requests hold "
                              f"{others} of the max-memory limit of {BUDGET} bytes (--max-memory)",
                              json.loads(body)["error"])
            self.assertEqual(metric(self.d, "tiled_request_memory_refused_total") - refused0, 2)
        finally:
            s.close()
        self.assertTrue(wait_for(lambda: self.held() == 0, 60), self.held())
        self.assertEqual(self.infer(doc), reply)


class NoBudget(unittest.TestCase):
    def test_the_default_counts_without_refusing(self):
        d = Daemon("--log-level", "warn")
        try:
            self.assertEqual(metric(d, "tiled_request_memory_budget_bytes"), 0)
            data = np.arange(1 << 20).astype(np.int8)
            resp, body = d.request("POST", tile_path(data.size), data.tobytes(), RAW)
            self.assertEqual(resp.status, 200)
            self.assertGreaterEqual(metric(d, "tiled_request_memory_peak_bytes"), 2 * data.size)
            self.assertEqual(metric(d, "tiled_request_memory_refused_total"), 0)
            # A JSON body and its reply are held at once, with what the decoder keeps of the input.
            n = 1 << 18
            doc = json.dumps({"inputs": [{"name": "input", "datatype": "FP64", "shape": [n], "data": [1] * n},
                                         {"name": "repeats", "datatype": "INT64", "shape": [1], "data": [1]}]},
                             separators=(",", ":")).encode()
            resp, body = d.request("POST", "/v2/models/tile/infer", doc, {"Content-Type": "application/json"})
            self.assertEqual(resp.status, 200, body[:300])
            self.assertGreaterEqual(metric(d, "tiled_request_memory_peak_bytes"), len(doc) + len(body))
            self.assertTrue(wait_for(lambda: metric(d, "tiled_request_memory_bytes") == 0, 60))
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
