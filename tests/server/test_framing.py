"""HTTP/1.1 framing at the edge: request smuggling and heads two parties could read two ways.

A table of raw requests (docs/security.md, "HTTP framing", and PortSwigger's CL.TE, TE.CL and TE.TE
obfuscations), each sent on one keep-alive connection followed by a probe request
(`GET /v2/health/live` with its own X-Request-Id). A refused row must get exactly one
answer, its status with tiled's JSON error and `Connection: close`, then the connection
closed, the probe never run (no access line carries its id) and no smuggled path logged.
An accepted row must get its own answer and then the probe's 200, whose X-Request-Id proves
that the first request's body ended where both parties think it does. Every refused
request is in the access log and in tiled_requests_total (route "other").

The same for a handful of the smuggling rows over HTTPS (FramingTLS: the framer judges the
bytes the TLS session decrypted, before anything parses them).

    cd tests/server && TILED_BIN=../../build/tiled /usr/bin/python3 -m unittest -v test_framing
"""
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import unittest

from harness.daemon import WRAP, Daemon, DaemonCase

TIMEOUT = 60 if WRAP else 30  # only a hang reaches it
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"


def post(headers, body=b"", path=b"/v2/health/live", method=b"POST", version=b"HTTP/1.1"):
    return method + b" " + path + b" " + version + b"\r\n" + headers + b"\r\n" + body


H = b"Host: t\r\n"
# A request that reads its body: 5 bytes tiled once, answered 200.
TILE = b"/v1/tile?dtype=uint8&shape=5&repeats=1"
CT = b"Content-Type: application/octet-stream\r\n"


def body_post(headers, body):
    return post(H + CT + headers, body, path=TILE)


CHUNKED_BODY = b"5\r\nhello\r\n0\r\n\r\n"

# (name, raw first request, status, fragment of the error or None for an accepted request)
REFUSED = [
    # ---- CL.TE / TE.CL: both framing headers, in every order and form
    ("cl_te", post(H + b"Content-Length: 50\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
     400, "both Content-Length and Transfer-Encoding"),
    ("te_cl", post(H + b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", b"5c\r\n" + SMUGGLED + b"\r\n0\r\n\r\n"),
     400, "both Content-Length and Transfer-Encoding"),
    ("cl_te_casing", post(H + b"Content-Length: 6\r\nTransfer-encoding: chunked\r\n", b"0\r\n\r\nX"),
     400, "both Content-Length and Transfer-Encoding"),
    ("cl_te_tab", post(H + b"Content-Length: 6\r\nTransfer-Encoding:\tchunked\r\n", b"0\r\n\r\nX"),
     400, "both Content-Length and Transfer-Encoding"),
    ("cl_te_xchunked", post(H + b"Content-Length: 6\r\nTransfer-Encoding: xchunked\r\n", b"0\r\n\r\nX"),
     400, "both Content-Length and Transfer-Encoding"),
    ("cl_te_second_line", post(H + b"Content-Length: 6\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n",
                               b"0\r\n\r\nX"), 400, "both Content-Length and Transfer-Encoding"),
    # ---- TE.TE: obfuscated Transfer-Encoding
    ("te_space_before_colon", post(H + b"Transfer-Encoding : chunked\r\n", CHUNKED_BODY), 400, "and its colon"),
    ("te_tab_before_colon", post(H + b"Transfer-Encoding\t: chunked\r\n", CHUNKED_BODY), 400, "and its colon"),
    ("te_xchunked", post(H + b"Transfer-Encoding: xchunked\r\n", CHUNKED_BODY), 400, "final transfer coding"),
    ("te_chunked_identity", post(H + b"Transfer-Encoding: chunked, identity\r\n", CHUNKED_BODY),
     400, "final transfer coding"),
    ("te_two_lines_chunked_first", post(H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                                        CHUNKED_BODY), 400, "final transfer coding"),
    ("te_two_lines_chunked_twice", post(H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                                        CHUNKED_BODY), 400, "more than once"),
    ("te_gzip_chunked", post(H + b"Transfer-Encoding: gzip, chunked\r\n", CHUNKED_BODY), 501,
     "unsupported transfer coding 'gzip'"),
    ("te_two_lines_gzip", post(H + b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", CHUNKED_BODY), 501,
     "unsupported transfer coding 'gzip'"),
    ("te_trailing_space", post(H + b"Transfer-Encoding: chunked \r\n", CHUNKED_BODY), 400, "malformed Transfer-Encoding"),
    ("te_empty_element", post(H + b"Transfer-Encoding: , chunked\r\n", CHUNKED_BODY), 400, "malformed Transfer-Encoding"),
    ("te_folded", post(H + b"Transfer-Encoding:\r\n chunked\r\n", CHUNKED_BODY), 400, "obs-fold"),
    ("te_in_http10", post(b"Transfer-Encoding: chunked\r\n", CHUNKED_BODY, version=b"HTTP/1.0"), 400, "HTTP/1.0"),
    ("te_vertical_tab", post(H + b"Transfer-Encoding:\x0bchunked\r\n", CHUNKED_BODY), 400, "control byte 0x0b"),
    # ---- Content-Length
    ("cl_plus", post(H + b"Content-Length: +5\r\n", b"hello"), 400, "not a number of bytes"),
    ("cl_list", post(H + b"Content-Length: 5, 5\r\n", b"hello"), 400, "not a number of bytes"),
    ("cl_two_differing", post(H + b"Content-Length: 5\r\nContent-Length: 6\r\n", b"hello!"), 400,
     "2 Content-Length headers"),
    ("cl_two_equal", post(H + b"Content-Length: 5\r\nContent-Length: 5\r\n", b"hello"), 400,
     "2 Content-Length headers"),
    ("cl_malformed", post(H + b"Content-Length: 1x\r\n", b"x"), 400, "not a number of bytes"),
    ("cl_trailing_space", post(H + b"Content-Length: 5 \r\n", b"hello"), 400, "not a number of bytes"),
    ("cl_folded", post(H + b"Content-Length:\r\n 3\r\n", b"abc"), 400, "Content-Length"),
    ("cl_huge", post(H + b"Content-Length: 18446744073709551615\r\n", b"x"), 413, "too large"),
    # ---- head syntax
    ("obs_fold", post(H + b"X-A: 1\r\n 2\r\n"), 400, "obs-fold"),
    ("obs_fold_tab", post(H + b"X-A: 1\r\n\t2\r\n"), 400, "obs-fold"),
    ("space_before_colon", post(H + b"X-A : 1\r\n"), 400, "and its colon"),
    ("nul_in_value", post(H + b"X-A: a\x00b\r\n"), 400, "control byte 0x00"),
    ("cr_in_value", post(H + b"X-A: a\rb\r\n"), 400, "control byte 0x0d"),
    ("nul_then_bare_lf", post(H + b"X-A: a\x00\nTransfer-Encoding: chunked\r\n"), 400, "bare LF"),
    ("nul_in_name", post(H + b"X-\x00A: 1\r\n"), 400, "control byte 0x00"),
    ("no_colon", post(H + b"X-A 1\r\n"), 400, "and its colon"),
    ("bare_lf_lines", b"GET /v2/health/live HTTP/1.1\nHost: t\n\n", 400, "bare LF"),
    ("bare_lf_header", b"GET /v2/health/live HTTP/1.1\r\nHost: t\nX-A: 1\r\n\r\n", 400, "bare LF"),
    ("nul_in_target", b"GET /v2/health/live\x00x HTTP/1.1\r\nHost: t\r\n\r\n", 400, "control byte 0x00"),
    ("cr_in_target", b"GET /v2/health/live\rx HTTP/1.1\r\nHost: t\r\n\r\n", 400, "control byte 0x0d"),
    ("two_spaces", b"GET  /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n", 400, "malformed request line"),
    ("relative_target", b"GET v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n", 400, "request target"),
    ("http_2_0", b"GET /v2/health/live HTTP/2.0\r\nHost: t\r\n\r\n", 505, "HTTP version"),
    ("http_garbage", b"GET /v2/health/live HTTX/1.1\r\nHost: t\r\n\r\n", 400, "version"),
    ("long_request_line", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414, "request line"),
    ("long_head", post(H + b"X-A: " + b"a" * 17000 + b"\r\n"), 431, "request head"),
    ("many_fields", post(H + b"".join(b"X-%d: 1\r\n" % i for i in range(120))), 431, "header lines"),
    # ---- Host rules
    ("two_hosts", post(b"Host: a\r\nHost: b\r\n"), 400, "2 Host headers"),
    ("two_hosts_http10", post(b"Host: a\r\nHost: b\r\n", version=b"HTTP/1.0"), 400, "2 Host headers"),
    ("no_host_http11", post(b""), 400, "Host header is missing"),
    ("invalid_host", post(b"Host: a b\r\n"), 400, "invalid Host"),
    ("invalid_host_slash", post(b"Host: evil.com/x\r\n"), 400, "invalid Host"),
    ("invalid_host_port", post(b"Host: a:8x\r\n"), 400, "invalid Host"),
    # ---- chunked bodies
    ("chunk_size_overflow", body_post(b"Transfer-Encoding: chunked\r\n", b"10000000000000005\r\nhello\r\n0\r\n\r\n"),
     400, "chunk size"),
    ("chunk_size_not_hex", body_post(b"Transfer-Encoding: chunked\r\n", b"5g\r\nhello\r\n0\r\n\r\n"), 400,
     "chunk size line"),
    ("chunk_size_space", body_post(b"Transfer-Encoding: chunked\r\n", b"5 ;a=b\r\nhello\r\n0\r\n\r\n"), 400,
     "chunk size line"),
    ("chunk_ext_huge", body_post(b"Transfer-Encoding: chunked\r\n", b"5;" + b"a" * 40000 + b"\r\nhello\r\n0\r\n\r\n"),
     400, "chunk extensions are bounded"),
    ("chunk_ext_nul", body_post(b"Transfer-Encoding: chunked\r\n", b"5;a\x00\r\nhello\r\n0\r\n\r\n"), 400,
     "control byte 0x00"),
    ("chunk_bare_lf", body_post(b"Transfer-Encoding: chunked\r\n", b"5\nhello\r\n0\r\n\r\n"), 400, "bare LF"),
    ("chunk_data_too_long", body_post(b"Transfer-Encoding: chunked\r\n", b"3\r\nhello\r\n0\r\n\r\n"), 400,
     "longer than its size"),
    ("chunk_trailer_fold", body_post(b"Transfer-Encoding: chunked\r\n", b"0\r\nX-T: 1\r\n 2\r\n\r\n"), 400, "obs-fold"),
    # ---- found by the differential test (test_h1_differential.py): llhttp and h11 refuse these
    ("target_obs_text", b"GET /v2/health/caf\xc3\xa9 HTTP/1.1\r\nHost: t\r\n\r\n", 400, "percent-encode"),
    ("chunk_ext_space", body_post(b"Transfer-Encoding: chunked\r\n", b"5; a=b\r\nhello\r\n0\r\n\r\n"), 400,
     "malformed chunk extension"),
    ("chunk_ext_not_token", body_post(b"Transfer-Encoding: chunked\r\n", b"5;a=b c\r\nhello\r\n0\r\n\r\n"), 400,
     "malformed chunk extension"),
]

# (name, raw first request, its status): framing both parties read the same way.
ACCEPTED = [
    ("plain_get", b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n", 200),
    ("http10_without_host", b"GET /v2/health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200),
    ("absolute_form", b"GET http://t/v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n", 200),
    ("absolute_form_https_port", b"GET HTTPS://t:8443/v2/health/live HTTP/1.1\r\nHost: t:8443\r\n\r\n", 200),
    ("leading_empty_line", b"\r\nGET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n", 200),
    ("cl_leading_zeros", body_post(b"Content-Length: 0005\r\n", b"hello"), 200),
    ("te_chunked_casing", body_post(b"Transfer-encoding: Chunked\r\n", CHUNKED_BODY), 200),
    ("te_tab_value", body_post(b"Transfer-Encoding:\tchunked\r\n", CHUNKED_BODY), 200),
    ("chunk_ext_small", body_post(b"Transfer-Encoding: chunked\r\n", b"5;name=\"v a\"\r\nhello\r\n0;x\r\n\r\n"), 200),
    ("chunk_with_trailer", body_post(b"Transfer-Encoding: chunked\r\n", b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"), 200),
    ("chunk_zero_padded", body_post(b"Transfer-Encoding: chunked\r\n", b"00005\r\nhello\r\n000\r\n\r\n"), 200),
    ("ipv6_host", b"GET /v2/health/live HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 200),
    ("empty_host", b"GET /v2/health/live HTTP/1.1\r\nHost:\r\n\r\n", 200),
    # RFC 9110 2.5: a higher minor version is processed as the highest implemented, 1.1.
    ("http_1_2", b"GET /v2/health/live HTTP/1.2\r\nHost: t\r\n\r\n", 200),
    ("http_1_9_body", body_post(b"Content-Length: 5\r\n", b"hello").replace(b"HTTP/1.1", b"HTTP/1.9", 1), 200),
]


class Responses:
    """Reads HTTP/1.1 responses (bodies with Content-Length) from a socket."""

    def __init__(self, sock):
        self.s, self.buf, self.closed = sock, b"", False

    def _fill(self):
        try:
            chunk = self.s.recv(65536)
        except (ConnectionResetError, ssl.SSLError):  # a TLS close without close_notify: closed too
            chunk = b""
        if not chunk:
            self.closed = True
        self.buf += chunk

    def next(self):
        """(status, headers, body) or None once the server closed."""
        while b"\r\n\r\n" not in self.buf:
            if self.closed:
                return None
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n and not self.closed:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def rest(self):
        """Everything until the server closes."""
        while not self.closed:
            self._fill()
        return self.buf


class RawExchange:
    """A row sent raw on one connection, then the probe; what came back checked."""

    def connect(self):
        return socket.create_connection((self.d.host, self.d.port), timeout=TIMEOUT)

    def exchange(self, name, raw):
        probe = f"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Request-Id: probe-{name}\r\n\r\n".encode()
        s = self.connect()
        try:
            s.sendall(raw + probe)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused early; what was answered is still read
        return s, Responses(s)

    def access(self):
        """Every access line of the requests answered so far: a marker request is sent last and
        its line waited for (lines are written in the order their requests ended, together, up to
        --log-flush-ms later), so a line missing now was never to come."""
        self.markers = getattr(self, "markers", 0) + 1
        marker = f"marker-{os.getpid()}-{id(self)}-{self.markers}"
        s = self.connect()
        try:
            s.sendall(f"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Request-Id: {marker}\r\n\r\n".encode())
            self.assertEqual(Responses(s).next()[0], 200)
        finally:
            s.close()
        self.assertTrue(self.d.access_lines(lambda a: a["request_id"] == marker), "the marker's access line")
        return self.d.access_lines(count=0)

    def check_refused(self, name, raw, status, fragment):
        s, r = self.exchange(name, raw)
        try:
            first = r.next()
            self.assertIsNotNone(first, f"{name}: no answer")
            got, headers, body = first
            self.assertEqual(got, status, (name, body))
            self.assertEqual(headers.get("content-type"), "application/json", name)
            self.assertIn(fragment, json.loads(body)["error"], name)
            self.assertEqual(headers.get("connection", "").lower(), "close", name)
            rest = r.rest()
        finally:
            s.close()
        self.assertTrue(r.closed)
        self.assertNotIn(b"HTTP/1.1", rest, f"{name}: a second answer on a refused connection")
        self.assertNotIn(b"live", rest, name)
        logged = self.access()
        self.assertFalse([a for a in logged if a["request_id"] == f"probe-{name}"],
                         f"{name}: the probe after a refused request ran")
        self.assertFalse([a for a in logged if a["path"] == "/smuggled"], f"{name}: a smuggled request ran")

    def check_accepted(self, name, raw, status):
        s, r = self.exchange(name, raw)
        try:
            first, probe = r.next(), r.next()
        finally:
            s.close()
        self.assertIsNotNone(first, name)
        self.assertEqual(first[0], status, (name, first[2]))
        self.assertIsNotNone(probe, f"{name}: no answer to the probe")
        self.assertEqual(probe[0], 200, (name, probe[2]))
        self.assertEqual(probe[1].get("x-request-id"), f"probe-{name}", name)
        self.assertEqual(json.loads(probe[2]), {"live": True}, name)


class Framing(RawExchange, DaemonCase):

    def test_both_framing_headers_never_run_a_second_request(self):
        """The issue's request: CL 50 with a chunked body holding a smuggled GET, sent in one write
        and trickled byte by byte (a head split across reads is judged whole)."""
        raw = post(H + b"Content-Length: 50\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n" + SMUGGLED)
        self.check_refused("issue_clte", raw, 400, "both Content-Length")
        s = self.connect()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head_end = raw.index(b"\r\n\r\n") + 4
        for i in range(head_end):  # the head a byte at a time: refused once it is whole
            s.sendall(raw[i:i + 1])
        r = Responses(s)
        got = r.next()
        self.assertEqual(got[0], 400)
        try:  # then the body with the smuggled request; the server has closed, or drops it
            s.sendall(raw[head_end:])
        except (ConnectionResetError, BrokenPipeError):
            pass
        rest = r.rest()
        s.close()
        self.assertNotIn(b"HTTP/1.1", rest)
        self.assertFalse([a for a in self.access() if a["path"] == "/smuggled"])

    def test_pipelined_good_request_before_a_refused_one_is_served(self):
        """A good request earlier on the connection is answered; the refused one after it ends it."""
        good = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Request-Id: before-bad\r\n\r\n"
        s, r = self.exchange("pipelined", good + post(H + b"Transfer-Encoding : chunked\r\n", CHUNKED_BODY))
        first, second = r.next(), r.next()
        rest = r.rest()
        s.close()
        self.assertEqual((first[0], first[1]["x-request-id"]), (200, "before-bad"))
        self.assertEqual(second[0], 400)
        self.assertNotIn(b"HTTP/1.1", rest)

    def test_no_request_is_read_after_a_reply_that_announced_the_close(self):
        """A request pipelined behind one whose reply says Connection: close is neither answered nor
        run (the transport once served it, after the close, when the close came from the request's
        own Connection field), and "close" counts in any Connection line, over HTTP/1.0 too."""
        live = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"
        rows = {
            "close": live + b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            "http10": b"GET /v2/health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                      b"GET /v2/health/ready HTTP/1.0\r\n\r\n",
            "second_line": live + b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n"
                                  b"Connection: close\r\n\r\n",
            "http10_both": live + b"GET /v2/health/ready HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
        }
        for name, raw in rows.items():
            s, r = self.exchange(f"after-close-{name}", raw)
            first, second = r.next(), r.next()
            rest = r.rest()
            s.close()
            self.assertEqual(first[0], 200, name)
            self.assertEqual((second[0], second[1].get("connection", "").lower()), (200, "close"), name)
            self.assertNotIn(b"HTTP/1.1", rest, f"{name}: an answer after the close")
        self.assertFalse([a for a in self.access() if a["request_id"].startswith("probe-after-close")],
                         "a request after the close ran")

    def test_refused_requests_are_logged_and_counted(self):
        def counted(code):
            _, text = self.d.request("GET", "/metrics")
            m = re.search(r'tiled_requests_total\{transport="http",route="other",format="none",code="%s"\} (\d+)'
                          % code, text.decode())
            return int(m.group(1)) if m else 0
        before = {c: counted(c) for c in ("400", "414", "431", "501", "505")}
        rows = {"cl_te": "400", "long_request_line": "414", "many_fields": "431", "te_gzip_chunked": "501",
                "http_2_0": "505"}
        for name, code in rows.items():
            raw, status, fragment = next((r, st, f) for n, r, st, f in REFUSED if n == name)
            self.check_refused(f"count-{name}", raw, status, fragment)
        for name, code in rows.items():
            self.assertEqual(counted(code), before[code] + 1, (name, code))
        lines = self.d.access_lines(lambda a: a["status"] == 414)
        self.assertTrue(lines and lines[-1]["method"] == "GET" and lines[-1]["path"].startswith("/aaaa"), lines[-1:])
        lines = self.d.access_lines(lambda a: a["status"] == 505)
        self.assertEqual((lines[-1]["method"], lines[-1]["path"]), ("GET", "/v2/health/live"))


class FramingTLS(RawExchange, unittest.TestCase):
    """Smuggling rows over HTTPS (--tls-cert/--tls-key): refused alike, the probe never run."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tiled-framing-tls-")
        cls.cert, key = os.path.join(cls.dir, "cert.pem"), os.path.join(cls.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cls.cert, "-days", "30", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        cls.d = Daemon("--tls-cert", cls.cert, "--tls-key", key, scheme="https")

    @classmethod
    def tearDownClass(cls):
        code = cls.d.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, "daemon exit status"

    def connect(self):
        ctx = ssl.create_default_context(cafile=self.cert)
        raw = socket.create_connection((self.d.host, self.d.port), timeout=TIMEOUT)
        return ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    def test_trickled_clte_over_tls(self):
        """The CL.TE request in one-byte TLS records: judged whole, refused, nothing smuggled."""
        raw = post(H + b"Content-Length: 50\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n" + SMUGGLED)
        s = self.connect()
        try:
            for i in range(len(raw)):
                s.sendall(raw[i:i + 1])
        except OSError:  # refused at the head's end and closed: the rest of the body is not read
            pass
        r = Responses(s)
        got = r.next()
        rest = r.rest()
        s.close()
        self.assertEqual(got[0], 400)
        self.assertNotIn(b"HTTP/1.1", rest)
        self.assertFalse([a for a in self.access() if a["path"] == "/smuggled"])


def _limits():
    """The framer's limits, read from its header so the tests follow it."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../server/http/h1wire.h")) as f:
        text = f.read()
    return {k: int(re.search(r"#define TILED_H1_%s (\d+)" % k, text).group(1))
            for k in ("HEAD_MAX", "FIELDS_MAX", "TRAILER_MAX")}


LIM = _limits()
ORIGIN = b"http://o.example"


def at_limits(head=0, fields=0, trailer=0):
    """A chunked raw /v1/tile request (3 query arguments, an Origin the daemon allows, a 64-byte
    request id, so the reply's head is as long as a reply of tiled's gets) whose head is exactly
    HEAD_MAX bytes, whose trailer section (from the CRLF ending the last chunk's data, as the
    framer counts it) is exactly TRAILER_MAX bytes, and whose header lines, query arguments and
    trailer lines together are exactly FIELDS_MAX; each made one larger by its argument."""
    path = b"/v1/tile?dtype=uint8&shape=5&repeats=1"
    base = (b"POST " + path + b" HTTP/1.1\r\nHost: t\r\nOrigin: " + ORIGIN + b"\r\nX-Request-Id: " + b"r" * 64 +
            b"\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n")
    n_trailer = 4
    n_fields = LIM["FIELDS_MAX"] + fields - 3 - n_trailer  # header lines, the 5 above among them
    lines = [b"X-%d: " % i for i in range(n_fields - 5)]
    pad = LIM["HEAD_MAX"] + head - (len(base) + sum(len(x) + 2 for x in lines) + 2)
    lines = [x + b"a" * (pad // len(lines) + (i < pad % len(lines))) for i, x in enumerate(lines)]
    hd = base + b"".join(x + b"\r\n" for x in lines) + b"\r\n"
    tl = [b"T-%d:" % i for i in range(n_trailer)]
    pad = LIM["TRAILER_MAX"] + trailer - (5 + sum(len(x) + 2 for x in tl) + 2)
    tl = [x + b"b" * (pad // len(tl) + (i < pad % len(tl))) for i, x in enumerate(tl)]
    unit = b"\r\n0\r\n" + b"".join(x + b"\r\n" for x in tl) + b"\r\n"
    assert len(hd) == LIM["HEAD_MAX"] + head and len(unit) == LIM["TRAILER_MAX"] + trailer
    assert hd.count(b"\r\n") - 2 + 3 + len(tl) == LIM["FIELDS_MAX"] + fields
    return hd + b"5\r\nhello" + unit


def health_head(size):
    """GET /v2/health/live whose head is `size` bytes in FIELDS_MAX header lines."""
    base = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n"
    lines = [b"X-%d: " % i for i in range(LIM["FIELDS_MAX"] - 1)]
    pad = size - (len(base) + sum(len(x) + 2 for x in lines) + 2)
    lines = [x + b"a" * (pad // len(lines) + (i < pad % len(lines))) for i, x in enumerate(lines)]
    raw = base + b"".join(x + b"\r\n" for x in lines) + b"\r\n"
    assert len(raw) == size
    return raw


class AtTheLimits:
    """A request the framer accepts at its every limit at once (h1wire.h) is answered (200, and the
    probe after it on the same connection), and one byte or one line more gets tiled's JSON 431."""

    def test_head_trailer_and_lines_at_their_limits_are_served(self):
        s, r = self.exchange("limits", at_limits())
        try:
            first, probe = r.next(), r.next()
        finally:
            s.close()
        self.assertIsNotNone(first)
        self.assertEqual((first[0], first[2]), (200, b"hello"))
        self.assertEqual(first[1].get("access-control-allow-origin"), ORIGIN.decode())
        self.assertEqual(first[1].get("x-request-id"), "r" * 64)
        self.assertIsNotNone(probe, "no answer to the probe")
        self.assertEqual((probe[0], probe[1].get("x-request-id")), (200, "probe-limits"))

    def test_a_head_of_head_max_bytes_is_served(self):
        self.check_accepted("head_max", health_head(LIM["HEAD_MAX"]), 200)

    def test_a_head_one_byte_over_is_tileds_431(self):
        self.check_refused("head_max_1", health_head(LIM["HEAD_MAX"] + 1), 431, "request head is over")
        self.check_refused("limits_head_1", at_limits(head=1), 431, "request head is over")

    def test_a_trailer_one_byte_over_is_tileds_431(self):
        self.check_refused("limits_trailer_1", at_limits(trailer=1), 431, "trailer section is over")

    def test_one_line_over_is_tileds_431(self):
        self.check_refused("limits_fields_1", at_limits(fields=1), 431, "trailer lines together")


class Limits(AtTheLimits, RawExchange, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--cors-origins", ORIGIN.decode())

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"


class LimitsTLS(AtTheLimits, RawExchange, unittest.TestCase):
    """The same over HTTPS: the pool is the same, the bytes come from gnutls_record_recv()."""

    connect = FramingTLS.connect

    @classmethod
    def tearDownClass(cls):
        code = cls.d.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, "daemon exit status"

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tiled-limits-tls-")
        cls.cert, key = os.path.join(cls.dir, "cert.pem"), os.path.join(cls.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cls.cert, "-days", "30", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        cls.d = Daemon("--tls-cert", cls.cert, "--tls-key", key, "--cors-origins", ORIGIN.decode(), scheme="https")


TLS_ROWS = ["cl_te", "te_cl", "te_space_before_colon", "te_xchunked", "te_two_lines_gzip", "te_folded", "cl_folded",
            "nul_in_value", "nul_then_bare_lf", "chunk_size_overflow", "chunk_ext_space"]
TLS_ACCEPTED = ["chunk_with_trailer", "cl_leading_zeros"]


def _refused(name, raw, status, fragment):
    return lambda self: self.check_refused(name, raw, status, fragment)


def _accepted(name, raw, status):
    return lambda self: self.check_accepted(name, raw, status)


for _n, _raw, _st, _frag in REFUSED:
    assert not hasattr(Framing, f"test_refused_{_n}"), _n
    setattr(Framing, f"test_refused_{_n}", _refused(_n, _raw, _st, _frag))
for _n, _raw, _st in ACCEPTED:
    assert not hasattr(Framing, f"test_accepted_{_n}"), _n
    setattr(Framing, f"test_accepted_{_n}", _accepted(_n, _raw, _st))
for _n, _raw, _st, _frag in REFUSED:
    if _n in TLS_ROWS:
        setattr(FramingTLS, f"test_refused_{_n}", _refused(_n, _raw, _st, _frag))
for _n, _raw, _st in ACCEPTED:
    if _n in TLS_ACCEPTED:
        setattr(FramingTLS, f"test_accepted_{_n}", _accepted(_n, _raw, _st))
assert len([t for t in dir(FramingTLS) if t.startswith("test_")]) == len(TLS_ROWS) + len(TLS_ACCEPTED) + 1


if __name__ == "__main__":
    unittest.main()
