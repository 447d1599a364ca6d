"""HTTP conventions clients, caches and browsers assume, each asserted.

- CORS is opt-in (--cors-origins): a browser's preflight is answered with
  the methods and headers tiled takes (Authorization too when API keys are
  on, and without a key itself), answers name the allowed origin; off by
  default, and other origins get a 403 (the Origin check in full:
  test_origin.py).
- Allow lists HEAD wherever GET is served (HEAD works there).
- One rule for Connection: close: a request refused from its head closes the
  connection only when it announced a body it did not get to send; otherwise
  errors keep the connection open.
- With Expect: 100-continue, what the head alone refuses is answered instead
  of "100 Continue", and the body is never asked for.
(Vary: Accept-Encoding and the 1 KiB compression floor: test_v2_protocol.Compression.)

Run from tests/server with Debian's python3:
    TILED_BIN=../../build/tiled /usr/bin/python3 -m unittest test_conventions -v
"""
import http.client
import json
import os
import socket
import tempfile
import unittest

from harness.daemon import Daemon, DaemonCase

ORIGIN = "https://app.example"
TILE = json.dumps({"input": {"dtype": "int8", "data": [1, 2]}, "repeats": [2]}).encode()


def preflight(d, path, origin=ORIGIN, method="POST", headers="content-type"):
    return d.request("OPTIONS", path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                               "Access-Control-Request-Headers": headers})


def listed(value):
    return {v.strip().lower() for v in (value or "").split(",") if v.strip()}


class Cors(DaemonCase):
    daemon_args = ("--cors-origins", f"{ORIGIN}, http://localhost:3000")

    def test_browser_preflight_then_request(self):
        resp, body = preflight(self.d, "/v1/tile")
        self.assertEqual(resp.status, 204, body)
        self.assertEqual(resp.getheader("Access-Control-Allow-Origin"), ORIGIN)
        self.assertTrue({"get", "head", "post"} <= listed(resp.getheader("Access-Control-Allow-Methods")))
        allowed = listed(resp.getheader("Access-Control-Allow-Headers"))
        self.assertTrue({"content-type", "inference-header-content-length", "content-encoding"} <= allowed)
        self.assertNotIn("authorization", allowed, "no API keys, no Authorization")
        self.assertIn("origin", listed(resp.getheader("Vary")))
        self.assertTrue(int(resp.getheader("Access-Control-Max-Age")) > 0)
        # The request the page then sends.
        resp, body = self.d.request("POST", "/v1/tile", TILE, {"Origin": ORIGIN, "Content-Type": "application/json"})
        self.assertEqual(resp.status, 200, body)
        self.assertEqual(json.loads(body)["output"]["data"], [1, 2, 1, 2])
        self.assertEqual(resp.getheader("Access-Control-Allow-Origin"), ORIGIN)
        self.assertIn("x-request-id", listed(resp.getheader("Access-Control-Expose-Headers")))
        self.assertIn("server-timing", listed(resp.getheader("Access-Control-Expose-Headers")))
        # Errors too carry it, so the page can read the message.
        resp, body = self.d.request("GET", "/nope", headers={"Origin": ORIGIN})
        self.assertEqual((resp.status, resp.getheader("Access-Control-Allow-Origin")), (404, ORIGIN))
        # A v2 infer preflight from the second origin.
        resp, _ = preflight(self.d, "/v2/models/tile/infer", origin="http://localhost:3000")
        self.assertEqual((resp.status, resp.getheader("Access-Control-Allow-Origin")), (204, "http://localhost:3000"))

    def test_other_origins_get_nothing(self):
        resp, body = preflight(self.d, "/v1/tile", origin="https://evil.example")
        self.assertEqual(resp.status, 403, body)
        self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))
        self.assertIn("evil.example", json.loads(body)["error"])
        # The request itself too: refused from its head, nothing tiled.
        resp, body = self.d.request("POST", "/v1/tile", TILE,
                                    {"Origin": "https://evil.example", "Content-Type": "application/json"})
        self.assertEqual(resp.status, 403, body)
        self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))


class CorsWithApiKeys(unittest.TestCase):
    def test_preflight_needs_no_key_and_allows_authorization(self):
        with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
            f.write("s3cret-key-0123456789\n")
        d = Daemon("--cors-origins", "*", "--api-key-file", f.name)
        try:
            resp, body = preflight(d, "/v1/tile", headers="authorization, content-type")
            self.assertEqual(resp.status, 204, body)
            self.assertIn("authorization", listed(resp.getheader("Access-Control-Allow-Headers")))
            self.assertEqual(resp.getheader("Access-Control-Allow-Origin"), ORIGIN)
            resp, _ = d.request("POST", "/v1/tile", TILE, {"Origin": ORIGIN, "Content-Type": "application/json"})
            self.assertEqual((resp.status, resp.getheader("Access-Control-Allow-Origin")), (401, ORIGIN))
            resp, body = d.request("POST", "/v1/tile", TILE, {"Origin": ORIGIN, "Content-Type": "application/json",
                                                              "Authorization": "Bearer s3cret-key-0123456789"})
            self.assertEqual((resp.status, resp.getheader("Access-Control-Allow-Origin")), (200, ORIGIN), body)
        finally:
            self.assertEqual(d.stop(), 0)
            os.unlink(f.name)


class Conventions(DaemonCase):

    def test_cors_is_off_by_default(self):
        # Another origin: refused, preflight or request.
        resp, _ = preflight(self.d, "/v1/tile")
        self.assertEqual(resp.status, 403)
        resp, _ = self.d.request("POST", "/v1/tile", TILE, {"Origin": ORIGIN, "Content-Type": "application/json"})
        self.assertEqual(resp.status, 403)
        self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))
        # Its own origin: no CORS needed (nor any OPTIONS route: 405).
        own = f"http://{self.d.host}:{self.d.port}"
        resp, _ = preflight(self.d, "/v1/tile", origin=own)
        self.assertEqual(resp.status, 405)
        resp, _ = self.d.request("POST", "/v1/tile", TILE, {"Origin": own, "Content-Type": "application/json"})
        self.assertEqual(resp.status, 200)
        self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))

    def test_allow_lists_head_where_get_is_served(self):
        for path in ("/v2/health/live", "/metrics", "/openapi.json", "/v2"):
            with self.subTest(path=path):
                resp, _ = self.d.request("HEAD", path)
                self.assertEqual(resp.status, 200)
                resp, body = self.d.request("POST", path, b"")
                self.assertEqual(resp.status, 405, body)
                self.assertEqual(listed(resp.getheader("Allow")), {"get", "head"})
        for path in ("/v2/models/tile", "/v2/models/tile/config", "/v2/models/tile/versions/6/stats"):
            with self.subTest(path=path):
                resp, body = self.d.request("POST", path, b"")
                self.assertEqual(resp.status, 405, body)
                self.assertEqual(listed(resp.getheader("Allow")), {"get", "head"})
        resp, _ = self.d.request("GET", "/v1/tile")
        self.assertEqual((resp.status, listed(resp.getheader("Allow"))), (405, {"post"}))
        resp, _ = self.d.request("GET", "/v2/models/tile/infer")
        self.assertEqual((resp.status, listed(resp.getheader("Allow"))), (405, {"post"}))

    def test_one_rule_for_connection_close(self):
        """Bodyless errors keep the connection; an error sent before an announced body closes it."""
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=10)
        try:
            for method, path, body, status in (("GET", "/nope", None, 404), ("DELETE", "/v1/tile", None, 405),
                                               ("GET", "/v2/models/resnet", None, 404),
                                               ("POST", "/v1/tile", b"{", 400),  # found in the body
                                               ("GET", "/v2/health/live", None, 200)):
                conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                self.assertEqual(resp.status, status, (method, path))
                self.assertNotEqual((resp.getheader("Connection") or "").lower(), "close", (method, path))
                self.assertFalse(resp.will_close, (method, path))
        finally:
            conn.close()
        for method, path, status in (("POST", "/nope", 404), ("PUT", "/v1/tile", 405),
                                     ("POST", "/v2/models/resnet/infer", 404), ("POST", "/v2/models/tile", 405)):
            with self.subTest(method=method, path=path):
                resp, _ = self.d.request(method, path, b"x" * 100, {"Content-Type": "application/json"})
                self.assertEqual(resp.status, status)
                self.assertEqual(resp.getheader("Connection"), "close")

    def head_with_expect(self, head):
        """Sends a request head with Expect: 100-continue and no body; returns what comes back."""
        with socket.create_connection((self.d.host, self.d.port), timeout=10) as s:
            s.sendall(head)
            s.settimeout(2)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except socket.timeout:
                pass
            return data

    def test_expect_100_continue_refused_from_the_head(self):
        cases = [
            (b"POST /v1/tile?dtype=int8&shape=2&repeats=x HTTP/1.1\r\nContent-Type: application/octet-stream\r\n",
             b"400", b"repeats"),
            (b"POST /v1/tile?dtype=nope&shape=2&repeats=2 HTTP/1.1\r\nContent-Type: application/octet-stream\r\n",
             b"400", b"dtype"),
            (b"POST /v1/tile HTTP/1.1\r\nContent-Type: text/plain\r\n", b"415", b"Content-Type"),
            (b"POST /v1/tile HTTP/1.1\r\nContent-Type: application/json\r\nAccept: image/png\r\n", b"406", b"Accept"),
            (b"POST /v2/models/resnet/infer HTTP/1.1\r\n", b"404", b"resnet"),
            (b"POST /v2/models/tile/versions/7/infer HTTP/1.1\r\n", b"404", b"version 7"),
            (b"POST /v2/models/tile/infer HTTP/1.1\r\nInference-Header-Content-Length: 12abc\r\n", b"400",
             b"Inference-Header-Content-Length"),
        ]
        for head, status, word in cases:
            with self.subTest(head=head[:60]):
                data = self.head_with_expect(head + b"Host: x\r\nContent-Length: 8\r\nExpect: 100-continue\r\n\r\n")
                self.assertNotIn(b"100 Continue", data)
                self.assertTrue(data.startswith(b"HTTP/1.1 " + status), data[:200])
                self.assertIn(word, data)
        # A head that is fine is asked for its body.
        data = self.head_with_expect(b"POST /v1/tile?dtype=int8&shape=2&repeats=2 HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Type: application/octet-stream\r\nContent-Length: 2\r\n"
                                     b"Expect: 100-continue\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 100 Continue"), data[:100])


if __name__ == "__main__":
    unittest.main()
