"""Mutual TLS (--tls-client-ca) with Triton's own clients from PyPI, unmodified:
tritonclient.http (ssl=True, ssl_options with the client's certificate and key)
on the HTTPS port and tritonclient.grpc (ssl=True, root_certificates,
private_key, certificate_chain) on the gRPC port. A certificate the CA issued is
accepted; one from another CA, or none, is refused at the handshake.

tritonclient.grpc defines the inference.* protobuf messages in protobuf's
default pool, as KServe's SDK does in the same process (the asan-clients
suite): its calls run in a child Python of their own.

Run with the virtual environment scripts/venv.sh makes, from tests/server:
  ../../build/venv/bin/python -m unittest -v test_mtls_clients
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import unittest

import gevent.ssl
import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.dirname(__file__))
from harness.certs import mutual_tls_parties  # noqa: E402
from harness.daemon import Daemon  # noqa: E402

DEADLINE = 60  # seconds; only a hang reaches it

# One gRPC client's calls: ServerLive and a ModelInfer, or the exception's
# status code and message, as a line of JSON.
GRPC_CHILD = r"""
import json, sys
import numpy as np
import tritonclient.grpc as grpcclient
url, ca, cert, key = sys.argv[1:5]
try:
    c = grpcclient.InferenceServerClient(url, ssl=True, root_certificates=ca, private_key=cert and key or None,
                                         certificate_chain=cert or None)
    inp = grpcclient.InferInput("input", [2], "FP32")
    inp.set_data_from_numpy(np.array([1.5, 2.5], dtype=np.float32))
    rep = grpcclient.InferInput("repeats", [1], "INT64")
    rep.set_data_from_numpy(np.array([2], dtype=np.int64))
    out = c.infer("tile", [inp, rep], client_timeout=30).as_numpy("output")
    print(json.dumps({"live": c.is_server_live(client_timeout=30), "output": out.tolist()}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "status": getattr(e, "status", lambda: None)(),
                      "message": str(e)}))
"""


class TritonClientsMutualTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mutual_tls_parties(cls)
        cls.d = Daemon("--grpc-port", "0", "--tls-cert", cls.cert, "--tls-key", cls.key, "--tls-client-ca",
                       cls.pki.ca, scheme="https")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"
        shutil.rmtree(cls.pki.dir, ignore_errors=True)
        shutil.rmtree(cls.other.dir, ignore_errors=True)

    def http_client(self, client):
        options = {"ca_certs": self.pki.ca}
        if client:
            options.update(certfile=client[0], keyfile=client[1])
        return httpclient.InferenceServerClient(f"127.0.0.1:{self.d.port}", ssl=True, ssl_options=options,
                                                ssl_context_factory=gevent.ssl.create_default_context,
                                                connection_timeout=DEADLINE, network_timeout=DEADLINE)

    def grpc_call(self, client):
        cert, key = client or ("", "")
        r = subprocess.run([sys.executable, "-c", GRPC_CHILD, f"127.0.0.1:{self.d.grpc_port}", self.pki.ca, cert,
                            key], capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_http_accepts_a_certificate_from_the_ca(self):
        c = self.http_client(self.good)
        try:
            self.assertTrue(c.is_server_live())
            inp = httpclient.InferInput("input", [2], "FP32")
            inp.set_data_from_numpy(np.array([1.5, 2.5], dtype=np.float32))
            rep = httpclient.InferInput("repeats", [1], "INT64")
            rep.set_data_from_numpy(np.array([2], dtype=np.int64))
            out = c.infer("tile", [inp, rep]).as_numpy("output")
            self.assertEqual(out.tolist(), [1.5, 2.5, 1.5, 2.5])
        finally:
            c.close()

    def test_http_refuses_another_ca_and_none(self):
        for client in (self.bad, None):
            c = self.http_client(client)
            try:
                # geventhttpclient raises the TLS error as it is: ssl.SSLError
                # from the handshake or, over TLS 1.3, where the server judges
                # the certificate after the client's side of the handshake,
                # the connection closed at the first read (an HTTPException).
                with self.assertRaises((OSError, http.client.HTTPException, InferenceServerException), msg=client):
                    c.is_server_live()
            finally:
                c.close()

    def test_grpc_accepts_a_certificate_from_the_ca(self):
        self.assertEqual(self.grpc_call(self.good), {"live": True, "output": [1.5, 2.5, 1.5, 2.5]})

    def test_grpc_refuses_another_ca_and_none(self):
        for client in (self.bad, None):
            got = self.grpc_call(client)
            self.assertEqual(got.get("error"), "InferenceServerException", (client, got))
            self.assertEqual(got["status"], "StatusCode.UNAVAILABLE", (client, got))


if __name__ == "__main__":
    unittest.main()
