"""TLS on both ports (HTTPS and gRPC): the default policy against scanners
we did not write (sslyze's Mozilla "intermediate" check, sslscan,
testssl.sh), old versions and weak suites refused, HTTP/2's own rules on
the gRPC port, session resumption, close_notify, Strict-Transport-Security,
certificate rotation on SIGHUP under load, the messages for bad files,
client-initiated renegotiation refused, mutual TLS (--tls-client-ca) with
curl, openssl and Python's ssl, and `tiled probe` over HTTPS.

Needs openssl, gnutls-cli, sslscan and testssl (Debian: scripts/deps.sh
test) and sslyze in its own venv (scripts/venv-tls.sh; $SSLYZE_PYTHON or
../../build/venv-tls/bin/python). Run from tests/server with
/usr/bin/python3 -m unittest -v test_tls.
"""
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

from harness.certs import Pki, make_certificate, mutual_tls_parties, openssl
from harness.daemon import BIN, Daemon

SSLYZE_PYTHON = os.environ.get("SSLYZE_PYTHON", "../../build/venv-tls/bin/python")
DEADLINE = 60  # seconds; only a hang reaches it


def client_context(ca=None, alpn=None):
    """Verifying (ca) or not; TLS 1.2 and 1.3 unless changed."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca:
        ctx.load_verify_locations(ca)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def old_client_context(version=None, ciphers=None, alpn=None):
    """A client that offers what the policy refuses: one old version, or
    TLS 1.2 with the given (OpenSSL-named) suites. Security level 0 so that
    OpenSSL itself does not refuse to offer them."""
    ctx = client_context(alpn=alpn)
    ctx.set_ciphers((ciphers or "ALL") + ":@SECLEVEL=0")
    v = version or ssl.TLSVersion.TLSv1_2
    ctx.minimum_version = ctx.maximum_version = v
    return ctx


def handshake(port, ctx, session=None):
    """A finished handshake's (version, cipher, alpn, subject CN, reused) or
    the ssl.SSLError that ended it."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    try:
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session)
    except (ssl.SSLError, ConnectionResetError) as e:
        raw.close()
        return e
    try:
        cert = s.getpeercert()
        cn = dict(x[0] for x in cert["subject"]).get("commonName") if cert else None
        return (s.version(), s.cipher()[0], s.selected_alpn_protocol(), cn, s.session_reused)
    finally:
        s.close()


def https_get(port, ctx, path="/v2/health/ready", conn=None):
    c = conn or http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=DEADLINE)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    if conn is None:
        c.close()
    return r, body


def wait_for(cond, what):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def read_until(pipe, pattern, deadline):
    """What `pipe` gives until its text matches `pattern` (or it ends; the deadline is for a hang)."""
    buf, end = b"", time.monotonic() + deadline
    while not re.search(pattern, buf):
        ready, _, _ = select.select([pipe], [], [], max(0.0, end - time.monotonic()))
        chunk = os.read(pipe.fileno(), 65536) if ready else b""
        if not chunk:
            break
        buf += chunk
    return buf


class TlsCase(unittest.TestCase):
    """A TLS daemon on both ports shared by a class; daemon_args add options."""

    daemon_args = ()

    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()
        cls.cert, cls.key = cls.pki.server("first")
        cls.d = Daemon("--grpc-port", "0", "--tls-cert", cls.cert, "--tls-key", cls.key, *cls.daemon_args,
                       scheme="https")
        cls.ports = {"https": cls.d.port, "grpc": cls.d.grpc_port}

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"
        shutil.rmtree(cls.pki.dir, ignore_errors=True)


class DefaultPolicy(TlsCase):
    def test_sslyze_mozilla_intermediate_on_both_ports(self):
        """sslyze's own check of Mozilla's "intermediate" configuration
        passes on each port (the test CA is given as trusted)."""
        for name, port in self.ports.items():
            r = subprocess.run([SSLYZE_PYTHON, "-m", "sslyze", "--mozilla_config=intermediate", "--certinfo_ca_file",
                                self.pki.ca, f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, f"{name}:\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
            self.assertIn(f"127.0.0.1:{port}: OK - Compliant", r.stdout)

    def test_sslscan_accepts_only_tls12_and_13_aead_ecdhe(self):
        for name, port in self.ports.items():
            r = subprocess.run(["sslscan", "--no-colour", f"127.0.0.1:{port}"], capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = [ln.split() for ln in r.stdout.splitlines()]
            proto = {ln[0]: ln[1] for ln in lines if len(ln) == 2 and ln[1] in ("enabled", "disabled")}
            self.assertEqual(proto, {"SSLv2": "disabled", "SSLv3": "disabled", "TLSv1.0": "disabled",
                                     "TLSv1.1": "disabled", "TLSv1.2": "enabled", "TLSv1.3": "enabled"}, name)
            suites = [(ln[1], ln[4]) for ln in lines if ln and ln[0] in ("Accepted", "Preferred")]
            self.assertTrue(suites, r.stdout)
            for version, suite in suites:
                self.assertIn(version, ("TLSv1.2", "TLSv1.3"), (name, suite))
                self.assertTrue("GCM" in suite or "CHACHA20" in suite, (name, suite))
                if version == "TLSv1.2":
                    self.assertTrue(suite.startswith("ECDHE-"), (name, suite))
            self.assertIn("Session renegotiation not supported", r.stdout)

    def test_testssl_finds_nothing_high_or_medium_but_the_test_certificate(self):
        """testssl.sh, narrowed to protocols, suite categories, forward
        secrecy, server order, server defaults (certificate, tickets),
        renegotiation and, on HTTPS, the HTTP headers (HSTS). Its findings
        about the certificate itself (a private CA testssl does not trust,
        no revocation URI) are the test certificate's, not the policy's."""
        for name, port in self.ports.items():
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "testssl.json")
                checks = ["-p", "-s", "-f", "-P", "-S", "-R"] + (["-h"] if name == "https" else [])
                target = f"https://127.0.0.1:{port}/v2/health/live" if name == "https" else f"127.0.0.1:{port}"
                r = subprocess.run(["testssl", "--quiet", "--color", "0", "--warnings", "off", *checks, "--jsonfile",
                                    out, target], capture_output=True, text=True, timeout=600)
                with open(out) as f:
                    findings = json.load(f)
            bad = [(x["id"], x["severity"], x["finding"]) for x in findings
                   if x.get("severity") in ("CRITICAL", "HIGH", "MEDIUM") and not x["id"].startswith("cert_")]
            self.assertEqual(bad, [], f"{name}: {r.stdout[-3000:]}")
            by_id = {x["id"]: x["finding"] for x in findings}
            self.assertEqual(by_id["TLS1"], "not offered", name)
            self.assertIn("offered", by_id["TLS1_3"], name)
            # It judges by whether `openssl s_client` still runs after "R"
            # (on HTTPS, four of them a second apart): an orderly close
            # (close_notify) counted as renegotiation accepted.
            renego = {x["id"]: x for x in findings if x["id"] in ("secure_renego", "secure_client_renego")}
            self.assertEqual(renego["secure_renego"]["finding"], "supported", name)
            self.assertEqual(renego["secure_client_renego"]["severity"], "OK", (name, renego))
            self.assertNotIn("VULNERABLE", renego["secure_client_renego"]["finding"], name)
            if name == "https":
                self.assertIn("63072000", by_id.get("HSTS_time", ""))

    def test_old_versions_are_refused_on_both_ports(self):
        for name, port in self.ports.items():
            for v in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
                r = handshake(port, old_client_context(v))
                self.assertIsInstance(r, (ssl.SSLError, ConnectionResetError), (name, v, r))
            # gnutls-cli as a second client that can still speak them.
            for prio in ("NORMAL:-VERS-ALL:+VERS-TLS1.0", "NORMAL:-VERS-ALL:+VERS-TLS1.1"):
                r = subprocess.run(["gnutls-cli", "--insecure", "-p", str(port), "--priority", prio, "127.0.0.1"],
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                                   timeout=DEADLINE)
                self.assertNotEqual(r.returncode, 0, (name, prio, r.stdout))
                self.assertNotIn("Handshake was completed", r.stdout)

    def test_cbc_rsa_and_sha1_suites_are_refused_on_both_ports(self):
        for name, port in self.ports.items():
            for suite in ("AES128-SHA", "AES256-GCM-SHA384", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384"):
                r = handshake(port, old_client_context(ciphers=suite))
                self.assertIsInstance(r, ssl.SSLError, (name, suite, r))
            ok = handshake(port, old_client_context(ciphers="ECDHE-RSA-AES128-GCM-SHA256"))
            self.assertEqual(ok[:2], ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"), name)

    def test_server_order_decides(self):
        """The client lists AES-256 first; the server's order picks AES-128."""
        for port in self.ports.values():
            ctx = old_client_context(ciphers="ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256")
            self.assertEqual(handshake(port, ctx)[1], "ECDHE-RSA-AES128-GCM-SHA256")

    def test_sessions_resume_on_both_ports(self):
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = client_context(self.pki.ca)
            ctx.minimum_version = ctx.maximum_version = version
            # HTTPS: a request first, so a TLS 1.3 ticket (sent after the
            # handshake) has arrived before the session is taken.
            c = http.client.HTTPSConnection("127.0.0.1", self.ports["https"], context=ctx, timeout=DEADLINE)
            r, _ = https_get(self.ports["https"], ctx, conn=c)
            self.assertEqual(r.status, 200)
            session = c.sock.session
            c.close()
            self.assertTrue(handshake(self.ports["https"], ctx, session)[4], version)
        for flags in ([], ["--priority", "NORMAL:-VERS-ALL:+VERS-TLS1.2"]):
            r = subprocess.run(["gnutls-cli", "--x509cafile", self.pki.ca, "-p", str(self.ports["grpc"]), "--alpn",
                                "h2", "--resume", *flags, "127.0.0.1"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, errors="replace", timeout=DEADLINE)
            self.assertIn("This is a resumed session", r.stdout, (flags, r.stdout, r.stderr))

    def test_client_initiated_renegotiation_is_refused_on_both_ports(self):
        """openssl s_client over TLS 1.2 asks for a renegotiation ("R" on
        its input, which stays open): the server never answers with a
        ServerHello; the gRPC port says no_renegotiation, the HTTPS port
        cuts the connection (server/tls/tls.c says why). s_client then fails by
        itself; a server going along would keep it running until the
        deadline. On the gRPC port the server's first HTTP/2 frames (its
        SETTINGS, one application-data record) are awaited first: arriving
        in the middle of the client's renegotiation, they make s_client
        give up by itself (unexpected_message) before the server's answer."""
        for name, port in self.ports.items():
            p = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2", "-msg",
                                  *(["-alpn", "h2"] if name == "grpc" else [])],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                first = b""
                if name == "grpc":
                    first = read_until(p.stdout, rb"<<< TLS 1.2, RecordHeader \[length 0005\]\s+17 03 03", DEADLINE)
                # s_client reads its input only once the handshake is done.
                p.stdin.write(b"R\n")
                p.stdin.flush()
                out, err = p.communicate(timeout=DEADLINE)
                out = first + out
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            out, err = out.decode(errors="replace"), err.decode(errors="replace")
            self.assertNotEqual(p.returncode, 0, (name, err))
            self.assertIn("RENEGOTIATING", err, name)
            hellos = re.findall(r"^(<<<|>>>) TLS 1.2, Handshake \[length \w+\], (ClientHello|ServerHello)$", out, re.M)
            # The first handshake's, then the renegotiation's ClientHello with no answer.
            self.assertEqual(hellos, [(">>>", "ClientHello"), ("<<<", "ServerHello"), (">>>", "ClientHello")], name)
            if name == "grpc":
                self.assertIn("warning no_renegotiation", out)
                self.assertIn("no renegotiation", err)
            else:
                self.assertNotIn("close_notify", out)
                self.assertIn("unexpected eof", err)
        refused = [json.loads(ln) for ln in self.d.log_lines() if '"event":"tls_renegotiation_refused"' in ln]
        self.assertEqual(sorted(e["transport"] for e in refused), ["grpc", "http"])

    def test_renegotiation_watch_leaves_ordinary_traffic_alone(self):
        """The HTTPS port reads through a watch of the client's record
        headers: requests of every size over TLS 1.2 and 1.3, several on one
        connection, and resumed sessions pass it."""
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = client_context(self.pki.ca)
            ctx.minimum_version = ctx.maximum_version = version
            c = http.client.HTTPSConnection("127.0.0.1", self.ports["https"], context=ctx, timeout=DEADLINE)
            for size in (0, 1, 100, 16384, 16385, 100000):
                c.request("POST", f"/v1/tile?dtype=uint8&shape={size}&repeats=2", body=bytes(range(256)) * (size // 256)
                          + bytes(size % 256), headers={"Content-Type": "application/octet-stream"})
                r = c.getresponse()
                body = r.read()
                self.assertEqual((r.status, len(body)), (200, 2 * size), (version, size))
            session = c.sock.session
            c.close()
            self.assertTrue(handshake(self.ports["https"], ctx, session)[4], version)

    def test_close_notify_ends_both_ports_connections(self):
        """The client reads the server's close as a clean end of stream (no
        SSLEOFError, which is what a close without close_notify gives once
        OpenSSL is told not to ignore it)."""
        ctx = client_context()
        ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", self.ports["https"]), timeout=DEADLINE),
                            suppress_ragged_eofs=False)
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = read_to_eof(s)
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:100])
        s.unwrap().close()  # our close_notify back, after the server's
        # gRPC: bytes that are no HTTP/2 preface make the server close.
        ctx = client_context(alpn=["h2"])
        ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
        s = ctx.wrap_socket(
            socket.create_connection(("127.0.0.1", self.ports["grpc"]), timeout=DEADLINE), suppress_ragged_eofs=False)
        self.assertEqual(s.selected_alpn_protocol(), "h2")
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"x" * 64)
        read_to_eof(s)
        s.unwrap().close()

    def test_hsts_on_https_answers(self):
        r, _ = https_get(self.ports["https"], client_context(self.pki.ca))
        self.assertEqual(r.getheader("Strict-Transport-Security"), "max-age=63072000")
        r, _ = https_get(self.ports["https"], client_context(self.pki.ca), "/nope")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.getheader("Strict-Transport-Security"), "max-age=63072000")


def read_to_eof(s):
    out = b""
    while True:
        chunk = s.recv(65536)  # SSLEOFError here: closed without close_notify
        if not chunk:
            return out
        out += chunk


class CustomPolicy(TlsCase):
    """--tls-priorities NORMAL (TLS 1.0 to 1.3, CBC, RSA key exchange):
    HTTPS takes what it allows, the gRPC port still only what HTTP/2
    allows (RFC 9113 9.2); --hsts-max-age sets the header."""

    daemon_args = ("--tls-priorities", "NORMAL:+VERS-TLS1.0:+VERS-TLS1.1", "--hsts-max-age", "300")

    def test_the_flag_sets_https_policy(self):
        r = handshake(self.ports["https"], old_client_context(ssl.TLSVersion.TLSv1))
        self.assertIsInstance(r, tuple, r)
        self.assertEqual(r[0], "TLSv1")
        r = handshake(self.ports["https"], old_client_context(ciphers="AES128-SHA"))
        self.assertEqual(r[:2], ("TLSv1.2", "AES128-SHA"))

    def test_grpc_port_refuses_what_http2_forbids(self):
        for ctx in (old_client_context(ssl.TLSVersion.TLSv1, alpn=["h2"]),
                    old_client_context(ssl.TLSVersion.TLSv1_1, alpn=["h2"]),
                    old_client_context(ciphers="AES128-SHA", alpn=["h2"]),
                    old_client_context(ciphers="AES128-GCM-SHA256", alpn=["h2"]),  # AEAD, but no forward secrecy
                    old_client_context(ciphers="ECDHE-RSA-AES128-SHA256", alpn=["h2"])):  # forward secret, CBC
            r = handshake(self.ports["grpc"], ctx)
            self.assertIsInstance(r, (ssl.SSLError, ConnectionResetError), r)
        r = handshake(self.ports["grpc"], old_client_context(ciphers="ECDHE-RSA-AES128-GCM-SHA256", alpn=["h2"]))
        self.assertEqual(r[:3], ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256", "h2"))

    def test_hsts_max_age(self):
        r, _ = https_get(self.ports["https"], client_context(self.pki.ca))
        self.assertEqual(r.getheader("Strict-Transport-Security"), "max-age=300")


def tls_exchange(port, ctx, request=None, session=None):
    """A handshake, `request` sent (if any) and the first bytes of the
    answer: those bytes (b"" when the server closed), or the exception that
    ended it. A client certificate is judged in TLS 1.3 after the client's
    side of the handshake ends, so a refusal may come at the read; and a
    request may then meet the closed connection before the client has read
    the server's alert."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as s:
                if request:
                    s.sendall(request)
                return s.recv(65536)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        return e


HTTP_GET = b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # and empty SETTINGS


class MutualTls(unittest.TestCase):
    """--tls-client-ca: both ports require a client certificate issued by
    that CA. One from another CA, or none, fails the handshake (over TLS
    1.3, at the client's first read); SIGHUP re-reads the CA file."""

    @classmethod
    def setUpClass(cls):
        mutual_tls_parties(cls)
        cls.client_ca = cls.pki.path("clients.pem")
        shutil.copyfile(cls.pki.ca, cls.client_ca)
        cls.d = Daemon("--grpc-port", "0", "--tls-cert", cls.cert, "--tls-key", cls.key, "--tls-client-ca",
                       cls.client_ca, scheme="https")
        cls.ports = {"https": cls.d.port, "grpc": cls.d.grpc_port}

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"
        shutil.rmtree(cls.pki.dir, ignore_errors=True)
        shutil.rmtree(cls.other.dir, ignore_errors=True)

    def context(self, client, version, alpn=None):
        ctx = client_context(self.pki.ca, alpn=alpn)
        ctx.minimum_version = ctx.maximum_version = version
        if client:
            ctx.load_cert_chain(*client)
        return ctx

    def outcomes(self, client):
        """{(port name, TLS version): accepted?} for a client certificate (or None)."""
        got = {}
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            r = tls_exchange(self.ports["https"], self.context(client, version), HTTP_GET)
            got[("https", version)] = isinstance(r, bytes) and r.startswith(b"HTTP/1.1 200")
            r = tls_exchange(self.ports["grpc"], self.context(client, version, alpn=["h2"]), H2_PREFACE)
            got[("grpc", version)] = isinstance(r, bytes) and len(r) >= 9 and r[3] == 4  # the server's SETTINGS
        return got

    def test_python_ssl_on_both_ports(self):
        self.assertEqual(set(self.outcomes(self.good).values()), {True})
        self.assertEqual(set(self.outcomes(self.bad).values()), {False})
        self.assertEqual(set(self.outcomes(None).values()), {False})

    def test_grpc_port_says_why_with_an_alert(self):
        for client, alerts in ((None, ("CERTIFICATE_REQUIRED", "DECODE_ERROR")), (self.bad, ("BAD_CERTIFICATE",))):
            for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
                r = tls_exchange(self.ports["grpc"], self.context(client, version, alpn=["h2"]))
                self.assertIsInstance(r, ssl.SSLError, (client, version))
                self.assertTrue(any(a in r.reason for a in alerts), (client, version, r.reason))

    def test_curl(self):
        url = f"https://127.0.0.1:{self.ports['https']}/v2/health/ready"
        for tls in (["--tlsv1.2", "--tls-max", "1.2"], ["--tlsv1.3"]):
            for client, ok in ((self.good, True), (self.bad, False), (None, False)):
                args = ["--cert", client[0], "--key", client[1]] if client else []
                r = subprocess.run(["curl", "-sS", "--cacert", self.pki.ca, *tls, *args, url], capture_output=True,
                                   text=True, timeout=DEADLINE)
                if ok:
                    self.assertEqual((r.returncode, r.stdout), (0, '{"ready":true}'), r.stderr)
                else:
                    self.assertNotEqual(r.returncode, 0, (tls, client))
                    self.assertEqual(r.stdout, "", (tls, client))

    def test_probe_presents_a_client_certificate(self):
        url = f"https://127.0.0.1:{self.ports['https']}/v2/health/ready"
        r = subprocess.run([BIN, "probe", "--cacert", self.pki.ca, "--cert", self.good[0], "--key", self.good[1], url],
                           capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual((r.returncode, r.stdout), (0, "200\n"), r.stderr)
        r = subprocess.run([BIN, "probe", "--cacert", self.pki.ca, url], capture_output=True, text=True,
                           timeout=DEADLINE)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--cert FILE --key FILE", r.stderr)

    def test_sighup_reloads_the_client_ca(self):
        def reload(src):
            shutil.copyfile(src, self.client_ca + ".new")
            os.replace(self.client_ca + ".new", self.client_ca)
            before = len([ln for ln in self.d.log_lines() if '"event":"tls_reload"' in ln])
            self.d.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: len([ln for ln in self.d.log_lines() if '"event":"tls_reload"' in ln]) > before,
                     "the reload's log line")
            last = [json.loads(ln) for ln in self.d.log_lines() if '"event":"tls_reload"' in ln][-1]
            self.assertEqual(last["level"], "info", last)

        sessions = []  # TLS sessions made with a certificate from the first CA
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = self.context(self.good, version)
            # A request first, so that a TLS 1.3 ticket (sent after the
            # handshake) has arrived before the session is taken.
            c = http.client.HTTPSConnection("127.0.0.1", self.ports["https"], context=ctx, timeout=DEADLINE)
            self.assertEqual(https_get(self.ports["https"], ctx, conn=c)[0].status, 200)
            sessions.append((ctx, c.sock.session))
            c.close()
            r = tls_exchange(self.ports["https"], ctx, HTTP_GET, session=sessions[-1][1])
            self.assertTrue(isinstance(r, bytes) and r.startswith(b"HTTP/1.1 200"), (version, r))
        try:
            reload(self.other.ca)
            self.assertEqual(set(self.outcomes(self.bad).values()), {True})
            self.assertEqual(set(self.outcomes(self.good).values()), {False})
            # Nor does a session made before resume: a resumed session
            # shows no certificate, and its CA is no longer trusted.
            for ctx, session in sessions:
                r = tls_exchange(self.ports["https"], ctx, HTTP_GET, session=session)
                self.assertFalse(isinstance(r, bytes) and r.startswith(b"HTTP/1.1 200"), (ctx.maximum_version, r))
            # A file that is no certificate keeps the CAs in use, and says why.
            with open(self.client_ca, "w") as f:
                f.write("not a certificate\n")
            self.d.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: any('"level":"error"' in ln and "--tls-client-ca" in ln for ln in self.d.log_lines()),
                     "the failed reload's log line")
            self.assertEqual(set(self.outcomes(self.bad).values()), {True})
        finally:
            reload(self.pki.ca)
        self.assertEqual(set(self.outcomes(self.good).values()), {True})


class HstsOff(unittest.TestCase):
    def test_zero_turns_it_off_and_plain_http_never_has_it(self):
        pki = Pki()
        cert, key = pki.server("first")
        d = Daemon("--tls-cert", cert, "--tls-key", key, "--hsts-max-age", "0", scheme="https")
        try:
            r, _ = https_get(d.port, client_context(pki.ca))
            self.assertEqual(r.status, 200)
            self.assertIsNone(r.getheader("Strict-Transport-Security"))
        finally:
            self.assertEqual(d.stop(), 0)
        d = Daemon()
        try:
            r, _ = d.request("GET", "/v2/health/live")
            self.assertIsNone(r.getheader("Strict-Transport-Security"))
        finally:
            self.assertEqual(d.stop(), 0)


class Rotation(TlsCase):
    daemon_args = ("--log-level", "debug")  # tls_retired: old credentials freed

    def replace(self, cert_src, key_src):
        """Both files replaced as a deploy tool would (rename over)."""
        for src, dst in ((cert_src, self.cert), (key_src, self.key)):
            shutil.copyfile(src, dst + ".new")
            os.replace(dst + ".new", dst)

    def log_events(self, event):
        return [json.loads(ln) for ln in self.d.log_lines() if f'"event":"{event}"' in ln]

    def test_sighup_under_load(self):
        ctx = client_context(self.pki.ca)
        h2ctx = client_context(self.pki.ca, alpn=["h2"])
        kept = http.client.HTTPSConnection("127.0.0.1", self.ports["https"], context=ctx, timeout=DEADLINE)
        self.assertEqual(https_get(self.ports["https"], ctx, conn=kept)[0].status, 200)
        seen, failures, stop = [], [], threading.Event()

        def load():
            mine = []  # this thread's handshakes in order: (port name, subject CN)
            seen.append(mine)
            while not stop.is_set():
                try:
                    r, _ = https_get(self.ports["https"], ctx)
                    if r.status != 200:
                        failures.append(r.status)
                    for name, port, c in (("https", self.ports["https"], ctx), ("grpc", self.ports["grpc"], h2ctx)):
                        hs = handshake(port, c)
                        if not isinstance(hs, tuple):
                            failures.append((name, repr(hs)))
                        else:
                            mine.append((name, hs[3]))
                except (OSError, http.client.HTTPException) as e:
                    failures.append(repr(e))

        threads = [threading.Thread(target=load) for _ in range(2)]
        for t in threads:
            t.start()
        def all_seen():
            return [h for mine in seen for h in mine]

        try:
            wait_for(lambda: ("grpc", "first") in all_seen(), "handshakes with the first certificate")
            new_cert, new_key = self.pki.server("second", kind="ec")
            self.replace(new_cert, new_key)
            self.d.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: ("https", "second") in all_seen() and ("grpc", "second") in all_seen(),
                     "new handshakes with the new certificate")
            n = len(all_seen())
            wait_for(lambda: len(all_seen()) > n + 20, "more handshakes after the swap")
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(failures, [])
        for mine in seen:  # once a client has seen the new certificate, it never gets the old one again
            cns = [cn for _, cn in mine]
            self.assertEqual(set(cns[cns.index("second"):]), {"second"}, cns)
        # The connection opened before the swap was not dropped, and keeps
        # the certificate it was made with.
        self.assertEqual(https_get(self.ports["https"], ctx, conn=kept)[0].status, 200)
        self.assertEqual(dict(x[0] for x in kept.sock.getpeercert()["subject"])["commonName"], "first")
        self.assertIn("CN=second", [e["subject"] for e in self.log_events("tls_reload") if "subject" in e])
        # The old credentials are freed when their last connection ends, not before.
        self.assertEqual(self.log_events("tls_retired"), [])
        kept.close()
        wait_for(lambda: self.log_events("tls_retired"), "the old certificate freed after its last connection")
        self.assertEqual([e["subject"] for e in self.log_events("tls_retired")], ["CN=first"])

        # A bad new file keeps the certificate in use, and the log says why.
        third_cert, third_key = self.pki.server("third")
        cases = [
            (None, "garbage.key", f"--tls-key {self.key}: not a PEM private key"),
            (third_cert, None, f"--tls-key {self.key} does not go with --tls-cert {self.cert}"),
            ("garbage.pem", third_key, f"--tls-cert {self.cert}: not a PEM certificate"),
        ]
        for cert_src, key_src, message in cases:
            garbage = self.pki.path("garbage")
            with open(garbage, "w") as f:
                f.write("-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n")
            self.replace(garbage if cert_src == "garbage.pem" else (cert_src or new_cert),
                         garbage if key_src == "garbage.key" else (key_src or new_key))
            before = len(self.log_events("tls_reload"))
            self.d.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: len(self.log_events("tls_reload")) > before, "the reload's log line")
            last = self.log_events("tls_reload")[-1]
            self.assertEqual(last["level"], "error", last)
            self.assertIn(message, last["error"])
            for port, c in ((self.ports["https"], ctx), (self.ports["grpc"], h2ctx)):
                self.assertEqual(handshake(port, c)[3], "second", message)


class Probe(unittest.TestCase):
    """`tiled probe` over HTTPS (the image's HEALTHCHECK, exec probes):
    verified against --cacert, refused without it (the test certificate is
    self-signed, in no system store) and the message says why, --insecure
    as curl -k; a plain-http probe of the TLS port fails at once and says
    to use https."""

    @classmethod
    def setUpClass(cls):
        cls.cert, cls.key = make_certificate()
        cls.d = Daemon("--tls-cert", cls.cert, "--tls-key", cls.key, scheme="https")
        cls.url = f"https://127.0.0.1:{cls.d.port}/v2/health/ready"

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"
        shutil.rmtree(os.path.dirname(cls.cert), ignore_errors=True)

    def probe(self, *args):
        t0 = time.monotonic()
        r = subprocess.run([BIN, "probe", *args], capture_output=True, text=True, timeout=DEADLINE)
        return r, time.monotonic() - t0

    def test_cacert_verifies(self):
        r, _ = self.probe("--cacert", self.cert, self.url)
        self.assertEqual((r.returncode, r.stdout), (0, "200\n"), r.stderr)

    def test_unverified_certificate_is_refused_with_the_reason(self):
        r, _ = self.probe(self.url)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("the server's certificate does not verify against the system's trust store", r.stderr)
        self.assertIn("The certificate issuer is unknown", r.stderr)
        self.assertIn("--cacert FILE", r.stderr)
        # A name the certificate does not carry (it has IP:127.0.0.1 only).
        r, _ = self.probe("--cacert", self.cert, f"https://localhost:{self.d.port}/v2/health/ready")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("The name in the certificate does not match", r.stderr)

    def test_insecure_skips_verification(self):
        for flag in ("--insecure", "-k"):
            r, _ = self.probe(flag, self.url)
            self.assertEqual((r.returncode, r.stdout), (0, "200\n"), r.stderr)

    def test_plain_http_to_the_tls_port_fails_fast_and_says_why(self):
        r, took = self.probe(f"http://127.0.0.1:{self.d.port}/v2/health/ready")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("without an HTTP answer (does the port serve TLS? then probe https://)", r.stderr)
        self.assertLess(took, 10)

    def test_https_to_a_plain_port_fails_and_says_why(self):
        d = Daemon()
        try:
            r, took = self.probe("--insecure", f"https://127.0.0.1:{d.port}/v2/health/ready")
        finally:
            self.assertEqual(d.stop(), 0)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("no TLS handshake", r.stderr)
        self.assertIn("plain HTTP", r.stderr)
        self.assertLess(took, 10)

    def test_the_images_healthcheck_follows_tls(self):
        """The Dockerfile's HEALTHCHECK, run as the image would (sh -c), with
        this binary: https with TILED_TLS_CERT set, http without."""
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Dockerfile")) as f:
            text = f.read().replace("\\\n", " ")
        script = re.search(r"^HEALTHCHECK .*? CMD (.*)$", text, re.M).group(1)
        self.assertFalse(script.startswith("["), "a shell form: the scheme follows TILED_TLS_CERT")
        script = script.replace("/usr/local/bin/tiled", os.path.abspath(BIN))
        plain = Daemon()
        try:
            for port, env in ((self.d.port, {"TILED_TLS_CERT": self.cert}), (plain.port, {"TILED_TLS_CERT": ""})):
                r = subprocess.run(["sh", "-c", script], env=dict(os.environ, TILED_PORT=str(port), **env),
                                   capture_output=True, text=True, timeout=DEADLINE)
                self.assertEqual((r.returncode, r.stdout), (0, "200\n"), (env, r.stderr))
        finally:
            self.assertEqual(plain.stop(), 0)

    def test_usage_errors(self):
        for args, message in ((("--cacert", self.cert, "--insecure", self.url), "exclude each other"),
                              (("--cacert", self.cert, f"http://127.0.0.1:{self.d.port}/"), "for https:// URLs"),
                              (("--cert", self.cert, self.url), "--cert and --key go together"),
                              (("ftp://x/",), "not an http:// or https://")):
            r, _ = self.probe(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(message, r.stderr)


class BadFilesAtStart(unittest.TestCase):
    """A bad certificate or key stops the start with a message naming the
    file and GnuTLS's reason (not "cannot listen")."""

    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()
        cls.cert, cls.key = cls.pki.server("good")
        cls.other_cert, cls.other_key = cls.pki.server("other")
        cls.garbage = cls.pki.path("garbage.pem")
        with open(cls.garbage, "w") as f:
            f.write("this is not PEM\n")
        cls.pkcs8_enc = cls.pki.path("pkcs8-enc.key")
        openssl("pkcs8", "-topk8", "-in", cls.key, "-out", cls.pkcs8_enc, "-v2", "aes-256-cbc", "-passout",
                "pass:secret")
        cls.legacy_enc = cls.pki.path("legacy-enc.key")
        openssl("rsa", "-in", cls.key, "-out", cls.legacy_enc, "-aes256", "-traditional", "-passout", "pass:secret")
        cls.empty = cls.pki.path("empty.pem")
        open(cls.empty, "w").close()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.pki.dir, ignore_errors=True)

    def start_fails(self, *args):
        r = subprocess.run([BIN, "serve", "--port", "0", "--grpc-port", "0", *args], capture_output=True, text=True,
                           timeout=DEADLINE)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertNotIn("cannot listen", r.stderr)
        return r.stderr

    def test_each_bad_file_is_named_with_the_reason(self):
        missing = self.pki.path("missing.pem")
        cases = [
            ((missing, self.key), f"--tls-cert {missing}: No such file or directory"),
            ((self.cert, missing), f"--tls-key {missing}: No such file or directory"),
            ((self.garbage, self.key), f"--tls-cert {self.garbage}: not a PEM certificate: "),
            ((self.empty, self.key), f"--tls-cert {self.empty}: not a PEM certificate: "),
            ((self.cert, self.garbage), f"--tls-key {self.garbage}: not a PEM private key: "),
            ((self.cert, self.cert), f"--tls-key {self.cert}: not a PEM private key: "),
            ((self.key, self.key), f"--tls-cert {self.key}: not a PEM certificate: "),
            ((self.cert, self.pkcs8_enc), f"--tls-key {self.pkcs8_enc}: the key is protected by a passphrase"),
            ((self.cert, self.legacy_enc), f"--tls-key {self.legacy_enc}: the key is protected by a passphrase"),
            ((self.cert, self.other_key), f"--tls-key {self.other_key} does not go with --tls-cert {self.cert}: "),
        ]
        for (cert, key), message in cases:
            err = self.start_fails("--tls-cert", cert, "--tls-key", key)
            self.assertIn(message, err)
            # GnuTLS's reason follows the message's own words.
            self.assertRegex(err.split(message, 1)[1].splitlines()[0] if message.endswith(": ") else err, r"\S")

    def test_client_ca_file(self):
        missing = self.pki.path("missing.pem")
        for path, message in ((missing, f"--tls-client-ca {missing}: No such file or directory"),
                              (self.garbage, f"--tls-client-ca {self.garbage}: not a PEM certificate: "),
                              (self.empty, f"--tls-client-ca {self.empty}: not a PEM certificate: ")):
            err = self.start_fails("--tls-cert", self.cert, "--tls-key", self.key, "--tls-client-ca", path)
            self.assertIn(message, err)
        err = self.start_fails("--tls-client-ca", self.pki.ca)
        self.assertIn("--tls-cert and --tls-key must be given together (--tls-client-ca needs both)", err)

    def test_bad_priority_strings(self):
        err = self.start_fails("--tls-cert", self.cert, "--tls-key", self.key, "--tls-priorities", "NORMAL:+NOPE")
        self.assertIn("--tls-priorities: ", err)
        self.assertIn("+NOPE", err)
        err = self.start_fails("--tls-cert", self.cert, "--tls-key", self.key, "--tls-priorities",
                               "NORMAL:-VERS-ALL:+VERS-TLS1.0:+VERS-TLS1.1")
        self.assertIn("--tls-priorities leaves the gRPC port neither TLS 1.2 nor 1.3", err)


if __name__ == "__main__":
    unittest.main()
