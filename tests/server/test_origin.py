"""The Origin check and the CORS headers over raw HTTP (no browser; the
browser itself: test_browser.py).

- A request whose Origin is neither its own (the listener's scheme, the Host
  header's host and port) nor listed in --cors-origins gets a JSON 403 from
  its head: before the body is read (a body that would not decode, one over
  --max-body, a chunked one, one behind Expect: 100-continue), and the
  counters show no inference ran.
- Origins compare by parts: scheme and host case-insensitively, default
  ports filled in, IPv6 literals by address; "null" is nobody's own; the
  decision matches a reference built on Python's urllib.parse and ipaddress
  over encodings a browser never sends. X-Forwarded-* are not trusted.
- The TLS listener's own scheme is https.
- Requests without Origin (curl, the SDKs, perf_analyzer) are never refused.
- While CORS is on every answer has Vary: Origin; a listed origin gets
  Access-Control-Allow-Origin, Timing-Allow-Origin and the exposed headers
  (WWW-Authenticate among them); a preflight is a 204 with no body type.

Run from tests/server with Debian's python3:
    TILED_BIN=../../build/tiled /usr/bin/python3 -m unittest -v test_origin
"""
import http.client
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import unittest
import urllib.parse

from harness.certs import make_certificate
from harness.daemon import Daemon, DaemonCase, read_until_close

LISTED = "https://app.example"
V2 = "/v2/models/tile/infer"
V2_BODY = json.dumps({"inputs": [{"name": "input", "shape": [2], "datatype": "INT32", "data": [7, 8]},
                                 {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [3]}]}).encode()


def listed(value):
    return {v.strip().lower() for v in (value or "").split(",") if v.strip()}


def infer_counts(d):
    """(v2 infer requests the metrics counted, inferences the model counted)."""
    _, text = d.request("GET", "/metrics")
    infer = sum(int(n) for n in re.findall(rb'tiled_requests_total\{[^}]*route="/v2/models/[^"]*infer"[^}]*\} (\d+)',
                                           text))
    _, stats = d.request("GET", "/v2/models/tile/stats")
    return infer, sum(s["inference_count"] for s in json.loads(stats)["model_stats"])


def raw_exchange(d, head, body=b""):
    """Sends a raw request head (and body) and reads until the server closes."""
    s = socket.create_connection((d.host, d.port), timeout=30)
    try:
        s.sendall(head + body)
        data, _ = read_until_close(s)
    finally:
        s.close()
    return data


def reference_same_origin(origin, host, tls):
    """The Origin check's same-origin rule, from urllib.parse and ipaddress."""
    try:
        o = urllib.parse.urlsplit(origin)
        h = urllib.parse.urlsplit("//" + host)
        if (not o.scheme or not o.netloc or o.path or o.query or o.fragment or "?" in origin or "#" in origin
                or o.username is not None or h.path or h.query or h.fragment or h.username is not None):
            return False
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", o.scheme) or not o.hostname or not h.hostname:
            return False
        # Some Python versions take "[::1]x" for [::1]; RFC 3986 allows only ":port" after "]".
        for netloc in (o.netloc, h.netloc):
            if ("[" in netloc or "]" in netloc) and not re.fullmatch(r"\[[^\[\]]*\](:[^:]*)?", netloc):
                return False
        default = {"http": 80, "https": 443}
        mine = "https" if tls else "http"
        o_port = o.port if o.port is not None else default.get(o.scheme.lower())
        h_port = h.port if h.port is not None else default[mine]
    except ValueError:  # a port out of range, an unclosed IPv6 bracket
        return False

    def addr(name, netloc):
        if "[" in netloc:
            try:
                return ipaddress.IPv6Address(name)
            except ValueError:
                return name
        return name

    return (o.scheme.lower() == mine and o_port == h_port
            and addr(o.hostname, o.netloc) == addr(h.hostname, h.netloc))


class OriginCheck(DaemonCase):
    """CORS off (the default): only a page's own origin may call."""

    def own(self):
        return f"{self.d.host}:{self.d.port}"

    def post(self, origin, body=V2_BODY, path=V2, host=None, headers=None):
        h = {"Content-Type": "text/plain", **(headers or {})}
        if origin is not None:
            h["Origin"] = origin
        if host is not None:
            h["Host"] = host
        return self.d.request("POST", path, body, h)

    def assert_refused(self, resp, body, origin):
        self.assertEqual(resp.status, 403, body)
        self.assertEqual(resp.getheader("Content-Type"), "application/json")
        self.assertIn(f"origin '{origin}' may not call this server", json.loads(body)["error"])
        self.assertEqual(listed(resp.getheader("Vary")), {"origin"})
        self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))

    def test_no_origin_is_never_refused(self):
        resp, body = self.post(None)
        self.assertEqual(resp.status, 200, body)
        self.assertNotIn("origin", listed(resp.getheader("Vary")), "CORS off: no Vary: Origin without Origin")
        r = subprocess.run(["curl", "-sS", "-f", f"http://{self.own()}{V2}", "-d", V2_BODY.decode()],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["outputs"][0]["data"], [7, 8] * 3)

    def test_simple_post_from_another_origin_does_no_work(self):
        before = infer_counts(self.d)
        for origin in ("https://evil.example", "http://127.0.0.1:1", "null", ""):
            with self.subTest(origin=origin):
                resp, body = self.post(origin)
                self.assert_refused(resp, body, origin)
        # A body that would not decode is not read: still the 403, not a 400.
        resp, body = self.post("https://evil.example", b"{not json")
        self.assert_refused(resp, body, "https://evil.example")
        resp, body = self.post(None, b"{not json")
        self.assertEqual(resp.status, 400, body)
        after = infer_counts(self.d)
        self.assertEqual(after[1], before[1], "no inference ran")
        self.assertEqual(after[0], before[0] + 1, "only the 400 reached the infer route")

    def test_refused_from_the_head_before_the_body(self):
        before = infer_counts(self.d)
        origin = b"Origin: https://evil.example\r\n"
        # Expect: 100-continue: the 403 instead of "100 Continue"; the body is never asked for.
        out = raw_exchange(self.d, b"POST " + V2.encode() + b" HTTP/1.1\r\nHost: h\r\n" + origin +
                           b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 403 "), out)
        self.assertNotIn(b"100 Continue", out)
        self.assertIn(b"Connection: close", out)
        # A Content-Length over --max-body: 403, not 413 (the check comes first).
        out = raw_exchange(self.d, b"POST " + V2.encode() + b" HTTP/1.1\r\nHost: h\r\n" + origin +
                           b"Content-Length: 1099511627776\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 403 "), out)
        # A chunked body that never ends: answered at once, the connection closed.
        out = raw_exchange(self.d, b"POST " + V2.encode() + b" HTTP/1.1\r\nHost: h\r\n" + origin +
                           b"Transfer-Encoding: chunked\r\n\r\n10\r\n{\"inputs\": [{\"na\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 403 "), out)
        self.assertEqual(infer_counts(self.d), before)
        # Every route, not just infer; the health probes a page might poke too.
        for method, path in (("GET", "/v2/health/ready"), ("GET", "/metrics"), ("OPTIONS", "/v1/tile"),
                             ("GET", "/nope")):
            with self.subTest(path=path):
                resp, body = self.d.request(method, path, headers={"Origin": "https://evil.example"})
                self.assert_refused(resp, body, "https://evil.example")

    def test_own_origin_default_ports_and_case(self):
        port = self.d.port
        for origin, host in ((f"http://127.0.0.1:{port}", None),
                             (f"HTTP://127.0.0.1:{port}", None),
                             ("http://tiled.example", "tiled.example"),
                             ("http://tiled.example:80", "tiled.example"),
                             ("http://tiled.example", "tiled.example:80"),
                             ("http://Tiled.EXAMPLE", "tILED.example"),
                             ("http://[::1]:8080", "[::1]:8080"),
                             ("http://[0:0::1]:8080", "[::1]:8080"),
                             ("http://[2001:DB8::a]", "[2001:db8::A]:80")):
            with self.subTest(origin=origin, host=host):
                resp, body = self.post(origin, host=host)
                self.assertEqual(resp.status, 200, body)
                self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))
        for origin, host in ((f"http://127.0.0.1:{port + 1}", None),
                             (f"https://127.0.0.1:{port}", None),  # the listener is plain HTTP
                             (f"http://localhost:{port}", None),
                             ("http://tiled.example:8080", "tiled.example"),
                             ("http://tiled.example", "tiled.example:8080"),
                             ("https://tiled.example:80", "tiled.example"),
                             ("http://[::2]:8080", "[::1]:8080"),
                             ("http://tiled.example/", "tiled.example"),
                             ("http://user@tiled.example", "tiled.example")):
            with self.subTest(origin=origin, host=host):
                resp, body = self.post(origin, host=host)
                self.assert_refused(resp, body, origin)

    def test_behind_a_reverse_proxy_host_counts_forwarded_headers_do_not(self):
        # A proxy that passes the browser's Host on: the page's origin is its own.
        resp, body = self.post("http://api.example:8443", host="api.example:8443")
        self.assertEqual(resp.status, 200, body)
        # X-Forwarded-* are not trusted (tiled has no option to trust a proxy):
        # they neither make another origin its own nor change the scheme.
        for origin, host, fwd in (("https://evil.example", "api.example",
                                   {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}),
                                  ("https://api.example", "api.example", {"X-Forwarded-Proto": "https"}),
                                  ("http://evil.example", "api.example", {"Forwarded": "host=evil.example"})):
            with self.subTest(origin=origin, fwd=fwd):
                resp, body = self.post(origin, host=host, headers=fwd)
                self.assert_refused(resp, body, origin)

    def test_matches_a_reference_on_odd_encodings(self):
        """Differential: the 403-or-not decision against urllib.parse and
        ipaddress, over origins and hosts a browser would never send."""
        origins = ["http://h", "HTTP://H", "http://h:80", "http://h:0080", "http://h:", "http://h:81",
                   "https://h", "https://h:443", "hTTp://h:80", "http://H:80", "http://h.", "ftp://h",
                   "http://h/", "http://h?", "http://h#", "http://u@h", "http://u:p@h", "http:/h", "http:h",
                   "//h", "h", "null", "http://h:65536", "http://h:99999999999", "http://h:8x", "http://h:-1",
                   "http://[::1]", "http://[::1]:80", "http://[0::1]", "http://[::1", "http://::1",
                   "http://[::ffff:127.0.0.1]", "http://[::FFFF:7f00:1]", "http://h:80:80", "http://[::1]x",
                   "1http://h", "http+x://h", "http://h h", "http://h%41"]
        hosts = ["h", "H", "h:80", "h:", "h:81", "[::1]", "[::1]:80", "[0:0::1]", "[::ffff:7f00:1]", "h.",
                 "h:0080"]
        checked = 0
        for origin in origins:
            for host in hosts:
                expected = reference_same_origin(origin, host, False)
                resp, body = self.post(origin, host=host)
                with self.subTest(origin=origin, host=host):
                    self.assertEqual(resp.status, 200 if expected else 403, body)
                checked += 1
        self.assertEqual(checked, len(origins) * len(hosts))


class OriginOverTls(unittest.TestCase):
    def test_the_tls_listener_is_https(self):
        cert, key = make_certificate()
        d = Daemon("--tls-cert", cert, "--tls-key", key, scheme="https")
        try:
            ctx = ssl.create_default_context(cafile=cert)

            def post(origin, host=None):
                conn = http.client.HTTPSConnection(d.host, d.port, context=ctx, timeout=60)
                headers = {"Origin": origin, "Content-Type": "text/plain"}
                if host:
                    headers["Host"] = host
                conn.request("POST", V2, V2_BODY, headers)
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                return resp.status, body

            self.assertEqual(post(f"https://127.0.0.1:{d.port}")[0], 200)
            self.assertEqual(post("https://tiled.example", host="tiled.example")[0], 200)  # 443 both
            self.assertEqual(post("https://tiled.example:443", host="tiled.example")[0], 200)
            status, body = post(f"http://127.0.0.1:{d.port}")
            self.assertEqual(status, 403, body)
            self.assertIn(f"(https://127.0.0.1:{d.port})", json.loads(body)["error"])
            self.assertEqual(post("http://tiled.example:443", host="tiled.example:443")[0], 403)
        finally:
            self.assertEqual(d.stop(), 0)
            os.unlink(cert)
            os.unlink(key)


class CorsHeaders(DaemonCase):
    daemon_args = ("--cors-origins", f"{LISTED}, http://localhost:3000")

    def test_vary_origin_on_every_answer(self):
        for method, path, headers, status in (
                ("GET", "/v2/health/live", {}, 200),
                ("GET", "/metrics", {}, 200),
                ("POST", V2, {"Content-Type": "application/json"}, 200),
                ("GET", "/nope", {}, 404),
                ("GET", "/v2/health/live", {"Origin": LISTED}, 200),
                ("POST", V2, {"Origin": "https://evil.example"}, 403),
                ("OPTIONS", V2, {"Origin": LISTED, "Access-Control-Request-Method": "POST"}, 204),
                ("POST", V2, {"Origin": f"http://{self.d.host}:{self.d.port}"}, 200)):
            with self.subTest(method=method, path=path, headers=headers):
                resp, body = self.d.request(method, path, V2_BODY if method == "POST" else None, headers)
                self.assertEqual(resp.status, status, body)
                self.assertIn("origin", listed(resp.getheader("Vary")))  # all Vary lines, joined
        # Its own origin needs no CORS headers; another one gets none either.
        resp, _ = self.d.request("POST", V2, V2_BODY, {"Origin": f"http://{self.d.host}:{self.d.port}"})
        self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))

    def test_listed_origin_may_read_timings_and_headers(self):
        resp, body = self.d.request("POST", V2, V2_BODY, {"Origin": "HTTPS://APP.example:443",
                                                          "Content-Type": "application/json"})
        self.assertEqual(resp.status, 200, body)
        # The origin as the browser sent it: browsers compare it byte for byte.
        self.assertEqual(resp.getheader("Access-Control-Allow-Origin"), "HTTPS://APP.example:443")
        self.assertEqual(resp.getheader("Timing-Allow-Origin"), "HTTPS://APP.example:443")
        exposed = listed(resp.getheader("Access-Control-Expose-Headers"))
        self.assertTrue({"x-request-id", "server-timing", "inference-header-content-length", "x-tensor-dtype",
                         "x-tensor-shape", "www-authenticate", "allow", "retry-after"} <= exposed, exposed)
        resp, body = self.d.request("POST", V2, V2_BODY, {"Origin": "http://localhost:3000"})
        self.assertEqual((resp.status, resp.getheader("Timing-Allow-Origin")), (200, "http://localhost:3000"))

    def test_preflight_is_204_without_a_body_type(self):
        out = raw_exchange(self.d, b"OPTIONS " + V2.encode() + b" HTTP/1.1\r\nHost: h\r\nOrigin: " + LISTED.encode() +
                           b"\r\nAccess-Control-Request-Method: POST\r\n"
                           b"Access-Control-Request-Headers: content-type, inference-header-content-length\r\n"
                           b"Connection: close\r\n\r\n")
        head, _, rest = out.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.assertEqual(lines[0], "HTTP/1.1 204 No Content")
        names = {line.split(":", 1)[0].lower() for line in lines[1:]}
        self.assertNotIn("content-type", names)
        self.assertNotIn("transfer-encoding", names)
        self.assertEqual(rest, b"", "no body")
        self.assertIn("access-control-allow-origin", names)
        self.assertIn("access-control-allow-methods", names)
        # Not listed: 403 with a JSON body, and Vary.
        resp, body = self.d.request("OPTIONS", V2, headers={"Origin": "null", "Access-Control-Request-Method": "POST"})
        self.assertEqual(resp.status, 403, body)
        self.assertIn("'null'", json.loads(body)["error"])

    def test_not_listed_origins_do_no_work(self):
        before = infer_counts(self.d)
        for origin in ("https://evil.example", "https://app.example.evil", "http://app.example", "null",
                       "https://app.example/"):
            with self.subTest(origin=origin):
                resp, body = self.d.request("POST", V2, b"{not json", {"Origin": origin, "Content-Type": "text/plain"})
                self.assertEqual(resp.status, 403, body)
                self.assertIn("--cors-origins does not list it", json.loads(body)["error"])
                self.assertIsNone(resp.getheader("Access-Control-Allow-Origin"))
        self.assertEqual(infer_counts(self.d), before)


class CorsEveryOrigin(DaemonCase):
    daemon_args = ("--cors-origins", "*")

    def test_star_lets_every_page_in_null_too(self):
        for origin in ("https://any.example", "null", "http://[::1]:9"):
            with self.subTest(origin=origin):
                resp, body = self.d.request("POST", V2, V2_BODY, {"Origin": origin, "Content-Type": "text/plain"})
                self.assertEqual(resp.status, 200, body)
                self.assertEqual(resp.getheader("Access-Control-Allow-Origin"), origin)
                self.assertEqual(resp.getheader("Timing-Allow-Origin"), origin)


class CorsOriginsChecked(unittest.TestCase):
    def test_an_entry_that_is_no_origin_stops_the_start(self):
        for bad in ("https://app.example/", "app.example", "null", "https://app.example:99999"):
            with self.subTest(bad=bad):
                r = subprocess.run([os.environ.get("TILED_BIN", "build/tiled"), "serve", "--port", "0",
                                    "--cors-origins", f"https://ok.example, {bad}"],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 1)
                self.assertIn(f"--cors-origins: '{bad}' is not an origin", r.stderr)


if __name__ == "__main__":
    unittest.main()
