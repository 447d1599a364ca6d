"""TLS certificates the tests generate with openssl: a self-signed one, or a
CA of their own that issues server and client certificates."""
import os
import subprocess
import tempfile


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certificate():
    """A self-signed certificate for 127.0.0.1: (cert path, key path)."""
    tmp = tempfile.mkdtemp()
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj",
            "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
    return cert, key


class Pki:
    """A test CA (in a temporary folder, `dir`) and the certificates it
    signs: servers for 127.0.0.1 and localhost, and clients (mutual TLS)."""

    def __init__(self, name="tiled test CA"):
        self.dir = tempfile.mkdtemp(prefix="tiled-tls-")
        self.ca_key, self.ca = self.path("ca.key"), self.path("ca.pem")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", self.ca_key, "-out", self.ca,
                "-days", "200", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def path(self, name):
        return os.path.join(self.dir, name)

    def _issue(self, cn, kind, extensions):
        key, csr, cert, ext = (self.path(f"{cn}.{x}") for x in ("key", "csr", "pem", "ext"))
        if kind == "rsa":
            openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key)
        else:
            openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
        openssl("req", "-new", "-key", key, "-out", csr, "-subj", f"/CN={cn}")
        with open(ext, "w") as f:
            f.write(extensions)
        openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key, "-CAcreateserial", "-out", cert,
                "-days", "200", "-sha256", "-extfile", ext)
        return cert, key

    def server(self, cn, kind="rsa"):
        """(cert path, key path) of a server leaf for 127.0.0.1 with subject CN=cn."""
        return self._issue(cn, kind, "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
                                     "keyUsage=critical,digitalSignature,keyEncipherment\n")

    def client(self, cn, kind="rsa"):
        """(cert path, key path) of a TLS client certificate with subject CN=cn."""
        return self._issue(cn, kind, "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")


def mutual_tls_parties(case):
    """Sets on a test class what a mutual-TLS test needs: case.pki (the CA the daemon
    trusts) and case.other (another CA), case.cert and case.key (the daemon's), and
    case.good and case.bad ((certificate, key) of a client of each CA)."""
    case.pki, case.other = Pki(), Pki("another CA")
    case.cert, case.key = case.pki.server("server")
    case.good = case.pki.client("alice")
    case.bad = case.other.client("mallory")
