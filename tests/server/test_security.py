"""Access control: API keys (Bearer, constant-time, SIGHUP reload, never
logged) and TLS with a certificate the test generates."""
import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from harness.certs import make_certificate
from harness.daemon import Daemon

PROTECTED = [("GET", "/v2"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/v2/models/tile"),
             ("POST", "/v2/models/tile/infer"), ("POST", "/v1/tile"), ("GET", "/nope")]


class ApiKeys(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.keyfile = os.path.join(self.dir, "keys")
        with open(self.keyfile, "w") as f:
            f.write("# tiled keys\nfirst-key-123\n\n  second-key-456  \n")
        self.d = Daemon("--api-key-file", self.keyfile)

    def tearDown(self):
        self.assertEqual(self.d.stop(), 0)

    def get(self, path, key=None, method="GET"):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body = b"{}" if method == "POST" else None
        if body:
            headers["Content-Type"] = "application/json"
        return self.d.request(method, path, body, headers)

    def test_every_route_but_health_needs_a_key(self):
        for method, path in PROTECTED:
            for key in (None, "wrong", "first-key-12", "first-key-1234"):
                resp, body = self.get(path, key, method)
                self.assertEqual(resp.status, 401, (method, path, key))
                self.assertTrue(resp.getheader("WWW-Authenticate").startswith("Bearer"))
                self.assertIn("API key", json.loads(body)["error"])
        for path in ("/v2/health/live", "/v2/health/ready"):
            self.assertEqual(self.get(path)[0].status, 200)

    def test_valid_keys_pass(self):
        for key in ("first-key-123", "second-key-456"):
            self.assertEqual(self.get("/v2", key)[0].status, 200)
        resp, body = self.d.request("POST", "/v1/tile",
                                    '{"input":{"dtype":"int8","shape":[1],"data":[7]},"repeats":[2]}',
                                    {"Content-Type": "application/json", "Authorization": "Bearer second-key-456"})
        self.assertEqual(resp.status, 200, body)

    def test_sighup_rereads_the_file_and_keys_are_never_logged(self):
        with open(self.keyfile, "w") as f:
            f.write("third-key-789\n")
        self.d.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while time.time() < deadline and self.get("/v2", "third-key-789")[0].status != 200:
            time.sleep(0.05)
        self.assertEqual(self.get("/v2", "third-key-789")[0].status, 200)
        self.assertEqual(self.get("/v2", "first-key-123")[0].status, 401)
        log = "\n".join(self.d.log_lines())
        for key in ("first-key-123", "second-key-456", "third-key-789"):
            self.assertNotIn(key, log)


class Tls(unittest.TestCase):
    def test_https_with_a_generated_certificate(self):
        cert, key = make_certificate()
        d = Daemon("--tls-cert", cert, "--tls-key", key, scheme="https")
        try:
            url = f"https://127.0.0.1:{d.port}"
            r = subprocess.run(["curl", "-sS", "--cacert", cert, url + "/v1/tile", "-H",
                                "Content-Type: application/json", "-d",
                                '{"input":{"dtype":"int16","shape":[2],"data":[1,2]},"repeats":[2]}'],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["output"]["data"], [1, 2, 1, 2])
            # Plain HTTP to the TLS port does not get an answer.
            r = subprocess.run(["curl", "-sS", "-m", "3", f"http://127.0.0.1:{d.port}/v2/health/live"],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_trickled_body_over_tls_is_closed_and_logged_as_408(self):
        """Over TLS a body that comes too late closes the connection
        (h1conn.c, answer_in_body, as when libmicrohttpd held the session):
        no plaintext is written into the TLS stream, and the access log has
        408."""
        cert, key = make_certificate()
        d = Daemon("--tls-cert", cert, "--tls-key", key, "--header-timeout", "1", "--log-level", "info",
                   scheme="https")
        try:
            ctx = ssl.create_default_context(cafile=cert)
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", d.port), timeout=5),
                                server_hostname="127.0.0.1")
            s.sendall(b"POST /v1/tile?dtype=uint8&shape=8&repeats=2 HTTP/1.1\r\nHost: t\r\n"
                      b"Content-Type: application/octet-stream\r\nContent-Length: 8\r\nX-Request-Id: tls-trickle\r\n\r\n")
            # Seven of the eight body bytes, one every 0.3 s: the body never
            # completes, so only the body timeout ends the connection.
            got, closed, sent = b"", False, 0
            s.settimeout(0.3)
            deadline = time.monotonic() + 60  # only a hang reaches it
            while time.monotonic() < deadline:
                try:
                    if sent < 7:
                        s.sendall(b"x")
                        sent += 1
                    got = s.recv(4096)
                    closed = got == b""
                    break
                except (socket.timeout, TimeoutError):
                    continue
                except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError):
                    closed = True  # a close; bytes outside the TLS session would be a record error instead
                    break
            s.close()
            self.assertTrue(closed, f"not closed; got {got[:80]!r}")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any('"request_id":"tls-trickle"' in line
                                                          for line in d.log_lines()):
                time.sleep(0.05)  # a poll interval: the log line decides
            access = [json.loads(line) for line in d.log_lines()
                      if '"request_id":"tls-trickle"' in line and '"event":"access"' in line]
            self.assertEqual([a["status"] for a in access], [408])
        finally:
            self.assertEqual(d.stop(), 0)

    def test_cert_without_key_is_refused(self):
        r = subprocess.run([os.environ.get("TILED_BIN", "build/tiled"), "serve", "--port", "0", "--tls-cert", "x"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--tls-cert and --tls-key must be given together", r.stderr)


if __name__ == "__main__":
    unittest.main()
