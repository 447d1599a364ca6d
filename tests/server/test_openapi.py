"""api/openapi.json against the live daemon.

The document must be valid OpenAPI 3.0.3, be what GET /openapi.json serves,
survive schemathesis' generated requests (every answer documented, with the
documented status, media type, headers and body schema), and describe the
answers to known-good requests in every format, which generated data rarely
reaches. Run with the virtual environment scripts/venv.sh makes:
  cd tests/server && ../../build/venv/bin/python -m unittest test_openapi -v
"""
import gzip
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

import numpy as np
import requests
import schemathesis
from openapi_spec_validator import validate
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DOC = os.path.join(ROOT, "api", "openapi.json")
os.environ.setdefault("TILED_BIN", os.path.join(ROOT, "build", "tiled"))
sys.path.insert(0, HERE)
from harness.daemon import Daemon  # noqa: E402

# Small streaming thresholds so generated and known requests exercise
# streamed bodies, and small output limits so no generated repeats can make
# the daemon build a huge answer (it answers 413 instead). Shared memory on,
# so its endpoints answer as they do for the clients that use them.
DAEMON_ARGS = ["--stream-threshold", "256K", "--stream-chunk", "64K", "--max-output", "16M", "--max-stream", "16M",
               "--shared-memory", "system"]
ROUTE_TABLE = os.path.join(ROOT, "server", "handlers", "router.c")

# The endpoints behind each prefix route of server/handlers/router.c, as Triton's HTTP
# server matches them (http_server.cc: model_regex_ without generate and
# trace, systemsharedmemory_regex_, cudasharedmemory_regex_). A new prefix
# route must say here what it serves.
SHM_ENDPOINTS = ["/status", "/region/{region_name}/status", "/register", "/region/{region_name}/register",
                 "/unregister", "/region/{region_name}/unregister"]
PREFIX_ENDPOINTS = {
    "/v2/models/": ["/v2/models/stats", "/v2/models/{model}/versions/1/infer"] + [
        "/v2/models/{model}" + version + action for version in ("", "/versions/{version}")
        for action in ("", "/ready", "/config", "/stats", "/infer")],
    "/v2/systemsharedmemory/": ["/v2/systemsharedmemory" + e for e in SHM_ENDPOINTS],
    "/v2/cudasharedmemory/": ["/v2/cudasharedmemory" + e for e in SHM_ENDPOINTS],
}


def http_routes():
    """(method, path, is_prefix) of every HTTP route in server/handlers/router.c's table but
    `OPTIONS *`: its target is the server, not a path, which OpenAPI cannot list (a path
    begins with '/'); the document's description says how it is answered."""
    with open(ROUTE_TABLE) as f:
        text = f.read()
    entries = re.findall(r'\{\.method = "([^"]+)", \.path = "([^"]+)"([^}]*)\}', text)
    assert entries, "no route found in " + ROUTE_TABLE
    return [(m, p, ".prefix = true" in rest) for m, p, rest in entries
            if ".grpc = true" not in rest and p != "*"]

# schemathesis: examples per operation and the seed (the run is reproducible).
MAX_EXAMPLES = int(os.environ.get("TILED_OPENAPI_EXAMPLES", "100"))
SEED = 20240601
CONFORMANCE = [status_code_conformance, content_type_conformance, response_headers_conformance,
               response_schema_conformance]

DTYPE_SAMPLES = {
    "bool": [True, False],
    "int8": [-128, 127], "int16": [-32768, 32767], "int32": [-(2 ** 31), 2 ** 31 - 1],
    "int64": [-(2 ** 63), 2 ** 63 - 1], "uint8": [0, 255], "uint16": [0, 65535], "uint32": [0, 2 ** 32 - 1],
    "uint64": [0, 2 ** 64 - 1],
    "float16": [1.5, "-Infinity"], "bfloat16": [-2.0, "NaN"], "float32": [3.25, "Infinity"],
    "float64": [1e308, "NaN"],
    "complex64": [[1.0, -2.0], ["NaN", 0.5]], "complex128": [[0.0, 1e300], [3.0, "-Infinity"]],
    "str": ["", "h\u00e9llo \u65e5\u672c"],
}
KSERVE = {"bool": "BOOL", "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8",
          "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "float16": "FP16", "bfloat16": "BF16",
          "float32": "FP32", "float64": "FP64", "complex64": "COMPLEX64", "complex128": "COMPLEX128",
          "str": "BYTES"}


def npy_bytes(a, fortran=False):
    buf = io.BytesIO()
    np.save(buf, np.asfortranarray(a) if fortran else a)
    return buf.getvalue()


def strings_wire(items):
    return b"".join(struct.pack("<I", len(s)) + s for s in items)


ST = os.path.join(os.path.dirname(sys.executable), "st")


def st_help(top=False):
    out = subprocess.run([ST] + ([] if top else ["run"]) + ["--help"], capture_output=True, text=True, timeout=120)
    return out.stdout


class OpenAPIDocument(unittest.TestCase):
    def test_document_is_valid_openapi(self):
        with open(DOC) as f:
            doc = json.load(f)
        validate(doc)
        self.assertEqual(doc["openapi"], "3.0.3")

    def test_document_is_pretty_printed(self):
        with open(DOC) as f:
            text = f.read()
        self.assertEqual(text, json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n")


class OpenAPIRoutes(unittest.TestCase):
    """The document lists what the route table serves, and nothing else."""

    def setUp(self):
        with open(DOC) as f:
            self.paths = json.load(f)["paths"]

    def test_every_route_is_documented(self):
        for method, path, prefix in http_routes():
            with self.subTest(path=path):
                if not prefix:
                    self.assertTrue(method.lower() in self.paths.get(path, {}), f"{method} {path} is not documented")
                    continue
                self.assertIn(path, PREFIX_ENDPOINTS, "a new prefix route: list its endpoints in PREFIX_ENDPOINTS")
                for endpoint in PREFIX_ENDPOINTS[path]:
                    self.assertTrue(endpoint in self.paths, f"{endpoint} (under {path}) is not documented")

    def test_every_documented_path_is_routed(self):
        routes = http_routes()
        exact = {p for _, p, prefix in routes if not prefix}
        served = exact | {e for _, p, prefix in routes if prefix for e in PREFIX_ENDPOINTS[p]}
        for path in self.paths:
            self.assertTrue(path in served, f"{path} is documented but not served")


class LiveDaemon:
    """A daemon for the class, and requests whose answers are checked against the document."""

    daemon_args = DAEMON_ARGS

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(*cls.daemon_args)
        cls.base = f"http://{cls.d.host}:{cls.d.port}"
        cls.schema = schemathesis.openapi.from_path(DOC)
        cls.session = requests.Session()

    @classmethod
    def tearDownClass(cls):
        cls.session.close()
        assert cls.d.stop() == 0, "daemon exit status"

    def call(self, path, method, status, *, path_parameters=None, query=None, params=None, headers=None,
             body=None, media_type=None, send_method=None):
        """Sends one request and checks the answer against the document's `method path` operation.

        `query` takes lists for the comma-separated parameters; `params` is sent as given."""
        url = self.base + path.format(**(path_parameters or {}))
        sent = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in (query or {}).items()}
        sent.update(params or {})
        hdrs = dict(headers or {})
        if media_type:
            hdrs.setdefault("Content-Type", media_type)
        data = json.dumps(body).encode() if media_type == "application/json" and not isinstance(body, bytes) else body
        resp = self.session.request(send_method or method, url, params=sent, headers=hdrs, data=data, timeout=120)
        self.assertEqual(resp.status_code, status, f"{send_method or method} {resp.url}: {resp.content[:300]!r}")
        case = self.schema[path][method].Case(method=send_method or method, path_parameters=path_parameters,
                                             query=query, headers=headers)
        case.validate_response(resp, checks=CONFORMANCE + ([not_a_server_error] if status < 500 else []))
        return resp

    def tile(self, status=200, **case):
        return self.call("/v1/tile", "POST", status, **case)

    def infer(self, status=200, version=None, **case):
        if version is None:
            return self.call("/v2/models/{model}/infer", "POST", status, path_parameters={"model": "tile"}, **case)
        if version == 1:  # version 1 takes other inputs, so it has its own path
            return self.call("/v2/models/{model}/versions/1/infer", "POST", status,
                             path_parameters={"model": "tile"}, **case)
        return self.call("/v2/models/{model}/versions/{version}/infer", "POST", status,
                         path_parameters={"model": "tile", "version": version}, **case)


class OpenAPILive(LiveDaemon, unittest.TestCase):
    """The document against the daemon's answers."""

    # ---- the served document ------------------------------------------------
    def test_served_document_is_the_file(self):
        resp, body = self.d.request("GET", "/openapi.json")
        self.assertEqual(resp.status, 200, body[:200])
        self.assertEqual(resp.getheader("Content-Type"), "application/json")
        with open(DOC, "rb") as f:
            self.assertEqual(body, f.read(), "GET /openapi.json differs from api/openapi.json (rebuild?)")
        self.assertIsNone(resp.getheader("Content-Encoding"))
        self.assertEqual(resp.getheader("Vary"), "Accept-Encoding")

    def test_served_document_compressed_for_a_client_that_asks(self):
        """What a browser or an API tool sends (requests offers gzip and deflate): the document is
        compressed, decoded by the client to the file's bytes; HEAD announces the same."""
        with open(DOC, "rb") as f:
            doc = f.read()
        for offer, coding in [("gzip, deflate, br", "gzip"), ("deflate", "deflate")]:
            resp = self.session.get(self.base + "/openapi.json", headers={"Accept-Encoding": offer}, timeout=60)
            self.assertEqual(resp.status_code, 200)
            self.assertEqual(resp.headers.get("Content-Encoding"), coding)
            self.assertEqual(resp.content, doc)  # requests decodes it
            self.assertLess(int(resp.headers["Content-Length"]), len(doc) // 4)
            head = self.session.head(self.base + "/openapi.json", headers={"Accept-Encoding": offer}, timeout=60)
            self.assertEqual(head.headers.get("Content-Encoding"), coding)
            self.assertEqual(head.headers.get("Content-Length"), resp.headers["Content-Length"])

    # ---- generated requests -------------------------------------------------
    def test_schemathesis_run(self):
        """`schemathesis run <url>/openapi.json --checks all` with the repository's schemathesis.toml
        (what it counts as an answer, and why), seeded, against the served document."""
        help_text = st_help()
        seed_flag = "--hypothesis-seed" if "--hypothesis-seed" in help_text else "--seed"
        args = ["--config-file", os.path.join(ROOT, "schemathesis.toml"), "run", f"{self.base}/openapi.json",
                "--checks", "all", "--max-examples", str(MAX_EXAMPLES), seed_flag, str(SEED), "--no-color"]
        # One worker: hypothesis is not thread-safe on every Python (ast errors in 3.11).
        for flag, value in (("--workers", "1"), ("--generation-database", "none"), ("--request-timeout", "30")):
            if flag in help_text:
                args += [flag, value]
        work = tempfile.mkdtemp(prefix="tiled-schemathesis-")  # it keeps state in its cwd
        try:
            run = subprocess.run([ST] + args, cwd=work, capture_output=True, text=True, timeout=600)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        shown = ["schemathesis.toml" if a.endswith(".toml") else a for a in args]
        print("\n$ st " + " ".join(shown) + "\n" + run.stdout[-1500:])
        self.assertEqual(run.returncode, 0, "schemathesis failed:\n" + run.stdout[-30000:] + run.stderr[-5000:])
        self.assertIn(" passed", run.stdout)

    def test_schema_valid_requests_once_refused_are_answered(self):
        """What schemathesis' positive check found refused before the document and the daemon agreed."""
        # Inference-Header-Content-Length is documented for binary bodies only; a JSON v2 request
        # without it is read whole.
        body = {"inputs": [{"name": "input", "shape": [2], "datatype": "INT32", "data": [7, 8]},
                           {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [3]}]}
        self.assertEqual(self.infer(body=body, media_type="application/json").json()["outputs"][0]["data"],
                         [7, 8] * 3)
        # Version 1 has its own path, whose inputs are input, tiles and axis; repeats is not among them.
        doc = json.load(open(DOC))
        v1_names = doc["components"]["schemas"]["InferInputV1"]["properties"]["name"]["enum"]
        self.assertNotIn("repeats", v1_names)
        self.assertNotIn("application/octet-stream",
                         doc["paths"]["/v2/models/{model}/infer"]["post"]["requestBody"]["content"])

    # ---- known requests, in every format -------------------------------------
    def test_v1_json_every_dtype(self):
        for dtype, data in DTYPE_SAMPLES.items():
            with self.subTest(dtype=dtype):
                r = self.tile(body={"input": {"dtype": dtype, "data": data}, "repeats": [2]},
                              media_type="application/json")
                out = r.json()["output"]
                self.assertEqual((out["dtype"], out["shape"], len(out["data"])), (dtype, [4], 4))

    def test_v1_json_forms(self):
        for body in (
            {"input": {"dtype": "f4", "shape": [2, 2], "data": [1, 2, 3, 4]}, "repeats": [1, 2], "semantics": "ONNX"},
            {"semantics": "onnx1", "tiles": 3, "axis": -1, "input": {"data": [[1, 2]], "dtype": "FP16"}},
            {"input": {"dtype": "int32", "data": 7}, "repeats": []},
            {"input": {"dtype": "uint8", "data": [[1], [2]]}, "repeats": [3], "semantics": "numpy"},
            {"input": {"dtype": "int64", "data": [[1, 2]]}, "repeats": [2, 1, 2], "semantics": "openvino"},
            {"input": {"dtype": "int16", "shape": [1, 2], "data": [1, 2]}, "repeats": [2, 2], "semantics": "directml"},
            {"input": {"dtype": "float32", "shape": [0, 3], "data": []}, "repeats": [5, 0]},
        ):
            with self.subTest(body=body):
                self.tile(body=body, media_type="application/json")

    def test_v1_accept_negotiation(self):
        body = {"input": {"dtype": "float32", "data": [1, 2]}, "repeats": [2]}
        for accept, media in (("application/octet-stream", "application/octet-stream"),
                              ("application/x-npy;q=0.9, application/json;q=0.5", "application/x-npy"),
                              ("*/*", "application/json"), ("text/html, application/*", "application/json")):
            with self.subTest(accept=accept):
                r = self.tile(body=body, media_type="application/json", headers={"Accept": accept})
                self.assertEqual(r.headers["Content-Type"], media)
        r = self.tile(body=body, media_type="application/json", headers={"Accept": "application/octet-stream"})
        self.assertEqual((r.headers["X-Tensor-Dtype"], r.headers["X-Tensor-Shape"]), ("float32", "[4]"))
        self.assertEqual(np.frombuffer(r.content, "<f4").tolist(), [1, 2, 1, 2])
        self.tile(406, body=body, media_type="application/json", headers={"Accept": "text/html"})

    def test_v1_raw(self):
        r = self.tile(body=b"\x01\x02\x03", media_type="application/octet-stream",
                      query={"dtype": "uint8", "shape": [3], "repeats": [2]})
        self.assertEqual(r.content, b"\x01\x02\x03" * 2)
        self.assertEqual(r.headers["X-Tensor-Shape"], "[6]")
        self.tile(body=struct.pack("<d", 2.5), media_type="application/octet-stream",
                  headers={"Accept": "application/json"}, params={"dtype": "float64", "shape": "", "repeats": ""})
        r = self.tile(body=strings_wire([b"ab", b"\xff"]), media_type="application/octet-stream",
                      query={"dtype": "str", "shape": [2], "repeats": [2]})
        self.assertEqual(r.headers["X-Tensor-Dtype"], "str")
        self.tile(body=struct.pack("<3e", 1, 2, 3), media_type="application/octet-stream",
                  query={"dtype": "float16", "shape": [1, 3], "tiles": 2, "axis": 0, "semantics": "onnx1"},
                  headers={"Accept": "application/x-npy"})
        # Not UTF-8, so no JSON form; bfloat16 has no .npy form.
        self.tile(406, body=strings_wire([b"\xff"]), media_type="application/octet-stream",
                  query={"dtype": "str", "shape": [1], "repeats": [1]}, headers={"Accept": "application/json"})
        self.tile(406, body=b"\x00\x40", media_type="application/octet-stream",
                  query={"dtype": "bfloat16", "shape": [1], "repeats": [1]}, headers={"Accept": "application/x-npy"})
        self.tile(400, body=b"\x01\x02", media_type="application/octet-stream",
                  query={"dtype": "uint8", "shape": [3], "repeats": [2]})

    def test_v1_npy(self):
        arrays = [np.arange(6, dtype="<i2").reshape(2, 3), np.arange(6, dtype=">f8").reshape(3, 2),
                  np.array([[1 + 2j, 3 - 4j]], dtype="complex128"), np.array(["a", "\u00e9t\u00e9"]),
                  np.array([b"xy", b""], dtype="S2"), np.array(True)]
        for a in arrays:
            for accept in ("application/x-npy", "application/json", "application/octet-stream"):
                with self.subTest(dtype=str(a.dtype), accept=accept):
                    self.tile(body=npy_bytes(a, fortran=a.ndim == 2), media_type="application/x-npy",
                              params={"repeats": ",".join(["2"] * a.ndim)}, headers={"Accept": accept})
        r = self.tile(body=npy_bytes(np.arange(4, dtype="u1")), media_type="application/x-npy",
                      query={"repeats": [2], "semantics": "numpy"})
        self.assertEqual(np.load(io.BytesIO(r.content)).tolist(), [0, 1, 2, 3] * 2)
        self.tile(400, body=b"not npy", media_type="application/x-npy", query={"repeats": [2]})
        self.tile(400, body=npy_bytes(np.arange(2)), media_type="application/x-npy",
                  query={"repeats": [2], "dtype": "int8"})

    def test_v1_streamed(self):
        # Above --stream-threshold: streamed, with padded metrics in JSON.
        for accept in ("application/json", "application/octet-stream", "application/x-npy"):
            for te in ("", "trailers"):
                with self.subTest(accept=accept, te=te):
                    r = self.tile(body={"input": {"dtype": "int8", "data": [1, -1]}, "repeats": [200000]},
                                  media_type="application/json", headers={"Accept": accept, "TE": te})
                    if accept == "application/json":
                        self.assertEqual(len(r.json()["output"]["data"]), 400000)

    def test_v1_content_encoding(self):
        doc = json.dumps({"input": {"dtype": "int8", "data": [1, 2]}, "repeats": [3]}).encode()
        for coding, packed in (("gzip", gzip.compress(doc)), ("deflate", zlib.compress(doc)),
                               ("identity", doc)):
            with self.subTest(coding=coding):
                self.tile(body=packed, media_type="application/json", headers={"Content-Encoding": coding})
        r = self.tile(415, body=doc, media_type="application/json", headers={"Content-Encoding": "br"})
        self.assertEqual(r.headers["Accept-Encoding"], "gzip, deflate")
        self.tile(400, body=doc, media_type="application/json", headers={"Content-Encoding": "gzip"})
        for ae in ("gzip", "deflate", "identity", "gzip;q=0, deflate;q=0"):
            with self.subTest(accept_encoding=ae):
                r = self.tile(body=json.loads(doc), media_type="application/json", headers={"Accept-Encoding": ae})
                self.assertEqual(r.json()["output"]["data"], [1, 2] * 3)

    def test_v1_errors(self):
        self.tile(400, body={"input": {"dtype": "int8", "data": [1]}, "repeats": [1], "extra": 1},
                  media_type="application/json")
        # A JSON request's query joins its body, so a malformed one is refused.
        self.tile(400, body={"input": {"dtype": "int8", "data": [1]}, "repeats": [1]}, media_type="application/json",
                  params={"repeats": "x"})
        self.tile(400, body={"input": {"dtype": "float32", "data": [1]}, "repeats": [-1]},
                  media_type="application/json")
        self.tile(413, body={"input": {"dtype": "float64", "data": [1]}, "repeats": [1 << 40]},
                  media_type="application/json")
        self.tile(415, body=b"{}", media_type="application/octet-stream", headers={"Content-Type": "text/plain"})
        r = self.tile(405, send_method="GET")
        self.assertEqual(r.headers["Allow"], "POST")

    def test_another_origin_is_403(self):
        """A page on another origin (browsers send Origin): the documented 403, on
        every route, whatever the body."""
        evil = {"Origin": "https://evil.example"}
        r = self.tile(403, body=b"{not json", media_type="application/json", headers=evil)
        self.assertIn("origin 'https://evil.example'", r.json()["error"])
        self.infer(403, body=b"x", media_type="text/plain", headers=evil)
        self.call("/v2/health/live", "GET", 403, headers=evil)
        self.call("/metrics", "GET", 403, headers={"Origin": "null"})
        # The page's own origin is served.
        self.call("/v2/health/live", "GET", 200, headers={"Origin": self.base})

    def test_request_id(self):
        r = self.tile(body={"input": {"dtype": "int8", "data": [1]}, "repeats": [1]}, media_type="application/json",
                      headers={"X-Request-Id": "abc-123"})
        self.assertEqual(r.headers["X-Request-Id"], "abc-123")
        r = self.call("/v2/health/live", "GET", 200, headers={"X-Request-Id": "has space"})
        self.assertNotEqual(r.headers["X-Request-Id"], "has space")

    # ---- v2 ----------------------------------------------------------------
    def test_v2_metadata(self):
        for path in ("/v2", "/v2/", "/v2/health/live", "/v2/health/ready", "/v2/models/stats", "/metrics",
                     "/openapi.json"):
            with self.subTest(path=path):
                self.call(path, "GET", 200)
        for action in ("", "/ready", "/config", "/stats"):
            with self.subTest(action=action):
                self.call("/v2/models/{model}" + action, "GET", 200, path_parameters={"model": "tile"})
                self.call("/v2/models/{model}" + action, "GET", 404, path_parameters={"model": "other"})
                for version in (13, 6, 1):
                    self.call("/v2/models/{model}/versions/{version}" + action, "GET", 200,
                              path_parameters={"model": "tile", "version": version})
                self.call("/v2/models/{model}/versions/{version}" + action, "GET", 404,
                          path_parameters={"model": "tile", "version": 2})
        r = self.call("/v2/models/{model}/config", "GET", 200, path_parameters={"model": "tile"})
        self.assertEqual(r.json()["version_policy"], {"specific": {"versions": [13]}})

    def test_conditional_answers(self):
        """A fixed document's 200, its 304 to If-None-Match and its 412 to a failing If-Match, each
        as the document describes it (test_caching.py asserts them in full)."""
        for path, params in (("/openapi.json", {}), ("/v2", {}), ("/v2/models/{model}", {"model": "tile"}),
                             ("/v2/models/{model}/versions/{version}/config", {"model": "tile", "version": 6})):
            with self.subTest(path=path):
                tag = self.call(path, "GET", 200, path_parameters=params).headers["ETag"]
                self.call(path, "GET", 304, path_parameters=params, headers={"If-None-Match": tag})
                self.call(path, "GET", 200, path_parameters=params, headers={"If-Match": tag})
                self.call(path, "GET", 412, path_parameters=params, headers={"If-Match": '"x"'})

    def test_v2_infer_every_datatype(self):
        for dtype, data in DTYPE_SAMPLES.items():
            flat = [x for pair in data for x in pair] if dtype.startswith("complex") else data
            body = {"id": dtype, "inputs": [
                {"name": "input", "shape": [2], "datatype": KSERVE[dtype], "data": flat},
                {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}
            with self.subTest(dtype=dtype):
                r = self.infer(body=body, media_type="application/json")
                self.assertEqual(r.json()["outputs"][0]["shape"], [4])
                self.infer(body=dict(body, outputs=[{"name": "output", "parameters": {"binary_data": True}}]),
                           media_type="application/json")

    def test_v2_infer_binary(self):
        hdr = json.dumps({"inputs": [
            {"name": "input", "shape": [3], "datatype": "UINT8", "parameters": {"binary_data_size": 3}},
            {"name": "repeats", "shape": [1], "datatype": "INT64", "parameters": {"binary_data_size": 8}}],
            "parameters": {"binary_data_output": True}}).encode()
        r = self.infer(body=hdr + b"\x01\x02\x03" + struct.pack("<q", 2), media_type="application/octet-stream",
                       headers={"Inference-Header-Content-Length": str(len(hdr))})
        n = int(r.headers["Inference-Header-Content-Length"])
        self.assertEqual(r.content[n:], b"\x01\x02\x03" * 2)
        self.infer(400, body=hdr + b"\x01", media_type="application/octet-stream",
                   headers={"Inference-Header-Content-Length": str(len(hdr))})
        # BYTES that are not UTF-8 have no JSON form.
        hdr = json.dumps({"inputs": [
            {"name": "input", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 5}},
            {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}).encode()
        self.infer(406, body=hdr + strings_wire([b"\xff"]), media_type="application/octet-stream",
                   headers={"Inference-Header-Content-Length": str(len(hdr))})

    def test_v2_infer_versions_and_errors(self):
        v1 = {"inputs": [{"name": "input", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]},
                         {"name": "tiles", "shape": [1], "datatype": "INT32", "data": [3]},
                         {"name": "axis", "shape": [1], "datatype": "INT64", "data": [-1]}]}
        self.infer(version=1, body=v1, media_type="application/json")
        self.infer(400, version=13, body=v1, media_type="application/json")
        ok = {"inputs": [{"name": "input", "shape": [1], "datatype": "BF16", "data": [1]},
                         {"name": "repeats", "shape": [1], "datatype": "UINT8", "data": [2]}],
              "parameters": {"semantics": "numpy", "other": 1}}
        self.infer(version=13, body=ok, media_type="application/json", headers={"Accept-Encoding": "gzip"})
        self.infer(400, version=6, body=ok, media_type="application/json")
        self.infer(404, version=7, body=ok, media_type="application/json")
        self.infer(400, body={"inputs": []}, media_type="application/json")
        self.infer(413, body={"inputs": [{"name": "input", "shape": [1], "datatype": "FP64", "data": [1]},
                                         {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [1 << 40]}]},
                   media_type="application/json")
        self.infer(415, body=ok, media_type="application/json", headers={"Content-Encoding": "compress"})
        r = self.infer(405, send_method="GET")
        self.assertEqual(r.headers["Allow"], "POST")


    # ---- shared memory --------------------------------------------------------
    def shm(self, path, method, status, name=None, **case):
        params = {"region_name": name} if name else None
        return self.call(path, method, status, path_parameters=params, **case)

    def test_every_documented_operation_reaches_its_handler(self):
        """Each documented path and method is answered with a documented status, never the
        router's or a handler's "no such endpoint"."""
        with open(DOC) as f:
            paths = json.load(f)["paths"]
        values = {"model": "tile", "version": 13, "region_name": "nosuch"}
        for path, ops in paths.items():
            for method, operation in ops.items():
                with self.subTest(method=method, path=path):
                    url = self.base + path.format(**values)
                    resp = self.session.request(method.upper(), url, data=b"{}" if method == "post" else None,
                                                timeout=60)
                    if resp.status_code == 404:
                        self.assertNotIn("no such endpoint", resp.json()["error"])
                    self.assertIn(str(resp.status_code), operation["responses"], resp.text[:200])

    def test_system_shared_memory(self):
        key = f"/tiled-openapi-{os.getpid()}"
        a = np.arange(3, dtype=np.int32)
        with open("/dev/shm" + key, "wb") as f:
            f.write(a.tobytes() + bytes(52) + bytes(64))
        try:
            self.shm("/v2/systemsharedmemory/region/{region_name}/register", "POST", 200, "in",
                     body={"key": key, "byte_size": 12}, media_type="application/json")
            self.shm("/v2/systemsharedmemory/region/{region_name}/register", "POST", 200, "out",
                     body={"key": key, "offset": 64, "byte_size": 64, "ignored": True}, media_type="application/json")
            listed = self.shm("/v2/systemsharedmemory/status", "GET", 200).json()
            self.assertEqual(sorted((r["name"], r["offset"], r["byte_size"]) for r in listed),
                             [("in", 0, 12), ("out", 64, 64)])
            one = self.shm("/v2/systemsharedmemory/region/{region_name}/status", "GET", 200, "out").json()
            self.assertEqual(one, [{"name": "out", "key": key, "offset": 64, "byte_size": 64}])
            # An infer request reading its input from one region and writing its output into the other.
            body = {"inputs": [
                {"name": "input", "shape": [3], "datatype": "INT32",
                 "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 12}},
                {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}],
                "outputs": [{"name": "output", "parameters": {"shared_memory_region": "out",
                                                              "shared_memory_byte_size": 64}}]}
            out = self.infer(body=body, media_type="application/json").json()["outputs"][0]
            self.assertEqual(out, {"name": "output", "datatype": "INT32", "shape": [6]})
            with open("/dev/shm" + key, "rb") as f:
                f.seek(64)
                self.assertEqual(np.frombuffer(f.read(24), np.int32).tolist(), np.tile(a, 2).tolist())
            for body in ({"key": key, "byte_size": 12}, {"byte_size": 1}, {"key": key}, [key],
                         {"key": key, "offset": -1, "byte_size": 1}, {"key": "/tiled-openapi-none", "byte_size": 1}):
                with self.subTest(body=body):  # "in" is taken, or the body is wrong
                    self.shm("/v2/systemsharedmemory/region/{region_name}/register", "POST", 400, "in",
                             body=body, media_type="application/json")
            self.shm("/v2/systemsharedmemory/register", "POST", 400, body={"key": key, "byte_size": 1},
                     media_type="application/json")
            self.shm("/v2/systemsharedmemory/region/{region_name}/status", "GET", 404, "nosuch")
            r = self.shm("/v2/systemsharedmemory/region/{region_name}/register", "POST", 405, "x", send_method="GET")
            self.assertEqual(r.headers["Allow"], "POST")
            r = self.shm("/v2/systemsharedmemory/status", "GET", 405, send_method="POST")
            self.assertEqual(r.headers["Allow"], "GET, HEAD")  # a GET route serves HEAD too
            self.shm("/v2/systemsharedmemory/region/{region_name}/unregister", "POST", 200, "in")
            self.shm("/v2/systemsharedmemory/region/{region_name}/unregister", "POST", 200, "in")  # unknown: no error
            self.shm("/v2/systemsharedmemory/unregister", "POST", 200)
            self.assertEqual(self.shm("/v2/systemsharedmemory/status", "GET", 200).json(), [])
        finally:
            self.session.post(self.base + "/v2/systemsharedmemory/unregister", timeout=60)
            os.unlink("/dev/shm" + key)

    def test_cuda_shared_memory(self):
        self.assertEqual(self.shm("/v2/cudasharedmemory/status", "GET", 200).json(), [])
        self.shm("/v2/cudasharedmemory/region/{region_name}/status", "GET", 404, "r")
        self.shm("/v2/cudasharedmemory/region/{region_name}/register", "POST", 501, "r",
                 body={"raw_handle": {"b64": "AA=="}, "device_id": 0, "byte_size": 4}, media_type="application/json")
        self.shm("/v2/cudasharedmemory/register", "POST", 501)
        self.shm("/v2/cudasharedmemory/region/{region_name}/unregister", "POST", 200, "r")
        self.shm("/v2/cudasharedmemory/unregister", "POST", 200)


class OpenAPIAuth(LiveDaemon, unittest.TestCase):
    """The 401 answers, and the health routes left open, with --api-key-file."""

    @classmethod
    def setUpClass(cls):
        fd, cls.keyfile = tempfile.mkstemp(prefix="tiled-openapi-keys-")
        with os.fdopen(fd, "w") as f:
            f.write("k-openapi-test\n")
        cls.daemon_args = ["--api-key-file", cls.keyfile]
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        os.unlink(cls.keyfile)
        super().tearDownClass()

    def test_keys(self):
        body = {"input": {"dtype": "int8", "data": [1]}, "repeats": [2]}
        r = self.tile(401, body=body, media_type="application/json")
        self.assertEqual(r.headers["WWW-Authenticate"], 'Bearer realm="tiled"')
        self.tile(body=body, media_type="application/json", headers={"Authorization": "Bearer k-openapi-test"})
        self.call("/v2/models/{model}/stats", "GET", 401, path_parameters={"model": "tile"})
        self.call("/metrics", "GET", 401, headers={"Authorization": "Bearer wrong"})
        self.call("/v2/health/live", "GET", 200)
        self.call("/v2/health/ready", "GET", 200)
        self.call("/v2/systemsharedmemory/status", "GET", 401)

    def test_shared_memory_off(self):
        """This daemon runs without --shared-memory: nothing to list, register or unregister."""
        auth = {"Authorization": "Bearer k-openapi-test"}
        self.assertEqual(self.call("/v2/systemsharedmemory/status", "GET", 200, headers=auth).json(), [])
        self.call("/v2/systemsharedmemory/region/{region_name}/register", "POST", 501,
                  path_parameters={"region_name": "r"}, headers=auth, body={"key": "/k", "byte_size": 1},
                  media_type="application/json")
        self.call("/v2/systemsharedmemory/unregister", "POST", 501, headers=auth)
        self.call("/v2/cudasharedmemory/unregister", "POST", 200, headers=auth)


class KnownServerBugs(LiveDaemon, unittest.TestCase):
    """Server behaviour that contradicts the document or HTTP; each test states
    the expected behaviour and fails until the server is fixed (then drop the
    expectedFailure)."""

    def raw(self, method, path, body=None, headers=None):
        return self.d.request(method, path, body=body, headers=headers or {})

    def assert_json_error(self, body):
        json.loads(body.decode("utf-8"))  # RFC 8259: JSON text is UTF-8

    def test_head_on_get_resources(self):
        """RFC 9110 9.1: a server MUST support HEAD wherever it supports GET; tiled answers 405."""
        for path in ("/v2/health/live", "/v2/models/tile", "/metrics"):
            resp, _ = self.raw("HEAD", path)
            self.assertEqual(resp.status, 200, path)

    def test_error_messages_are_utf8(self):
        """Error bodies quote request text byte-wise: a raw byte from the path or a header, or a
        quote cut after 40 bytes in the middle of a UTF-8 sequence, makes the body invalid JSON."""
        for method, path, headers, status in (
                ("GET", "/v2/models/%FF", {}, 404),
                ("POST", "/v1/tile", {"Content-Type": "application/json", "Content-Encoding": "\x84"}, 415),
                ("POST", "/v1/tile", {"Content-Type": "text/\xe9"}, 415)):
            with self.subTest(path=path, headers=headers):
                resp, body = self.raw(method, path, b"{}" if method == "POST" else None, headers)
                self.assertEqual(resp.status, status)
                self.assert_json_error(body)

    def test_error_quote_cut_inside_a_character(self):
        resp, body = self.raw("POST", "/v1/tile?dtype=a" + "%C3%A9" * 30 + "&shape=1&repeats=1", b"x",
                              {"Content-Type": "application/octet-stream"})
        self.assertEqual(resp.status, 400)
        self.assert_json_error(body)

    def test_error_quote_cut_inside_a_character_json(self):
        doc = '{"inputs":[{"name":"a' + "\u00e9" * 40 + '","shape":[1],"datatype":"INT8","data":[1]}]}'
        resp, body = self.raw("POST", "/v2/models/tile/infer", doc.encode())
        self.assertEqual(resp.status, 400)
        self.assert_json_error(body)

    def test_long_tensor_shape_header(self):
        """X-Tensor-Shape was cut at 159 characters (the reply header buffer), losing the closing ']'.
        Shapes now keep numpy's bound (element size times the non-zero dims within 2^63 - 1 bytes),
        so the longest at rank 64 is about 150 characters: that one, whole."""
        shape = [0] + [1000000] * 3 + [1] * 60
        resp = self.tile(body=b"", media_type="application/octet-stream",
                         query={"dtype": "uint8", "shape": shape, "repeats": [1] * 64})
        self.assertEqual(json.loads(resp.headers["X-Tensor-Shape"]), shape)

    def test_long_path_is_not_truncated(self):
        """The request path is cut at 255 bytes before /v2/models/ routing, so a longer, invalid
        path can be answered as the valid endpoint its first 255 bytes spell."""
        p, tail = "/v2/models/tile/versions/", "13/ready"
        path = p + "0" * (255 - len(p) - len(tail)) + tail + "/no/such/endpoint"
        resp, _ = self.raw("GET", path)
        self.assertEqual(resp.status, 404)

    def test_long_accept_header(self):
        """Accept is cut at 255 bytes, so a type listed after that is not seen: 406 instead of 200."""
        self.tile(body={"input": {"dtype": "int8", "data": [1]}, "repeats": [2]}, media_type="application/json",
                  headers={"Accept": "text/html, " * 30 + "application/json"})

    def test_query_parameters_on_a_json_request_join_the_body(self):
        """A JSON request's query is read with its body: what both give must agree."""
        body = {"input": {"dtype": "float32", "shape": [2, 2], "data": [1, 2, 3, 4]}, "repeats": [1, 2]}
        r = self.tile(400, body=body, media_type="application/json",
                      params={"shape": "0", "repeats": "-9", "dtype": "bool", "semantics": "onnx", "tiles": "3"})
        self.assertIn("'repeats' is given in the query and in the JSON body", r.json()["error"])
        r = self.tile(body=body, media_type="application/json", params={"repeats": "1,2", "semantics": "onnx"})
        self.assertEqual(r.json()["output"]["data"], [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0])

    def test_inference_header_length_minus_one(self):
        """-1, the internal 'absent' value, and an empty value are taken as no header instead of 400."""
        body = {"inputs": [{"name": "input", "shape": [1], "datatype": "INT8", "data": [1]},
                           {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}
        for value in ("-1", ""):
            with self.subTest(value=value):
                self.infer(400, body=body, media_type="application/json",
                           headers={"Inference-Header-Content-Length": value})

    def test_missing_host_answered_once(self):
        """An HTTP/1.1 request without Host is answered once: one status line and one header block
        (libmicrohttpd 0.9.75, which served HTTP before, wrote them twice, the first block claiming
        the body's length)."""
        with socket.create_connection((self.d.host, self.d.port), timeout=10) as s:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        self.assertTrue(data.startswith(b"HTTP/1.1 400 "), data[:100])
        self.assertEqual(data.count(b"HTTP/1.1 "), 1, data)

    def test_content_encoding_masks_404_and_405(self):
        """Under /v2/models/ the Content-Encoding check runs before model, version and method are
        resolved: an unsupported coding gets 415 where the resource or method is not there."""
        resp, _ = self.raw("PUT", "/v2/models/tile", b"x", {"Content-Encoding": "br"})
        self.assertEqual(resp.status, 405)
        resp, _ = self.raw("GET", "/v2/models/nosuch", None, {"Content-Encoding": "br"})
        self.assertEqual(resp.status, 404)

if __name__ == "__main__":
    unittest.main()
