"""Open Inference Protocol (KServe v2) conformance tests for the daemon.

The expectations come from the protocol documents: the v2 REST API
(health, metadata, inference, JSON error objects), Triton's binary tensor
data extension (Inference-Header-Content-Length, binary_data_size,
binary_data / binary_data_output, length-prefixed BYTES), Triton's
model-configuration and statistics extensions, and gzip/deflate body
compression. Every answer is checked against numpy.tile.

Run from tests/server with Debian's python3 (it has numpy):
    TILED_BIN=../../build/tiled /usr/bin/python3 -m unittest test_v2_protocol -v
"""
import gzip
import http.client
import json
import re
import signal
import struct
import time
import unittest
import zlib

import numpy as np

from harness.daemon import Daemon
from harness.tensors import same, sample

MODEL = "tile"
VERSIONS = ["13", "6", "1"]
DEFAULT_VERSION = "13"

# ---------------------------------------------------------------------------
# Datatypes: v2 name -> numpy dtype used to hold the test tensor.
# BF16 tensors are held as float32 whose low 16 bits are zero; BYTES tensors
# as object arrays of Python bytes.
# ---------------------------------------------------------------------------
NUMPY_OF = {
    "BOOL": np.dtype(bool),
    "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"), "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
    "BF16": np.dtype("<f4"),
    "COMPLEX64": np.dtype("<c8"), "COMPLEX128": np.dtype("<c16"),
    "BYTES": np.dtype(object),
}
ALL_DATATYPES = list(NUMPY_OF)
INTEGER_DATATYPES = ["INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32", "UINT16", "UINT8"]
FLOAT_DATATYPES = ["FP16", "FP32", "FP64"]


def bf16_round(a):
    """float32 -> nearest-even bfloat16, returned as float32 (low 16 bits zero)."""
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return (u.astype("<u4") << 16).view("<f4")


def make_tensor(datatype, shape, rng):
    """A random tensor of a v2 datatype that survives JSON exactly."""
    shape = tuple(shape)
    n = int(np.prod(shape)) if shape else 1
    if datatype == "BYTES":
        pool = [b"", b"a", "h\u00e9llo".encode(), "\u65e5\u672c".encode(), b"x" * 300,
                b"tab\tnl\n\"q\"\\", b"\x01\x1f ctl"]
        return np.array([pool[i] for i in rng.integers(0, len(pool), n)], dtype=object).reshape(shape)
    if datatype == "BF16":
        return bf16_round(sample("float32", shape, rng))
    return sample(NUMPY_OF[datatype].name, shape, rng).astype(NUMPY_OF[datatype])


# ---- binary wire format (little endian, row major; BYTES length-prefixed) --
def to_binary(a, datatype):
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(s)) + s for s in a.flatten())
    if datatype == "BF16":
        return (np.ascontiguousarray(a, "<f4").view("<u4") >> 16).astype("<u2").tobytes()
    return np.ascontiguousarray(a, NUMPY_OF[datatype]).tobytes()


def from_binary(raw, datatype, shape):
    if datatype == "BYTES":
        items, off = [], 0
        while off < len(raw):
            (n,) = struct.unpack_from("<I", raw, off)
            items.append(bytes(raw[off + 4:off + 4 + n]))
            off += 4 + n
        if off != len(raw):
            raise AssertionError("BYTES output has a truncated element")
        return np.array(items, dtype=object).reshape(shape)
    if datatype == "BF16":
        u = np.frombuffer(raw, "<u2").astype("<u4") << 16
        return u.view("<f4").reshape(shape)
    return np.frombuffer(raw, NUMPY_OF[datatype]).reshape(shape)


# ---- JSON wire format -------------------------------------------------------
def json_element(x, datatype):
    if datatype == "BOOL":
        return bool(x)
    if datatype.startswith(("INT", "UINT")):
        return int(x)
    if datatype == "BYTES":
        return x.decode("utf-8")
    if datatype.startswith("COMPLEX"):
        return [float(x.real), float(x.imag)]
    return float(x)


def to_json(a, datatype, nested=False):
    """Flat row-major list, or nested one list per dimension.

    COMPLEX elements are interleaved (re, im) numbers, so in the nested form
    the innermost list of a COMPLEX tensor holds 2 * shape[-1] numbers.
    """
    if nested and a.ndim > 1:
        return [to_json(a[i], datatype, nested=True) for i in range(a.shape[0])]
    flat = []
    for x in a.flatten():
        v = json_element(x, datatype)
        if isinstance(v, list):
            flat.extend(v)
        else:
            flat.append(v)
    return flat


def bf16_nearest(x):
    """float64 -> nearest-even bfloat16 (as float32), without double rounding."""
    x = np.asarray(x, np.float64).ravel()
    t = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
    cand = np.stack([np.maximum(t - 1, t & 0x8000), t, t + 1])      # same-sign neighbours
    vals = (cand.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    err = np.abs(vals - x)
    best = err.min(axis=0)
    # among the nearest candidates prefer the even bit pattern
    pick = np.where((err == best) & (cand % 2 == 0), 0, 1) + np.where(err == best, 0, 2)
    choice = cand[pick.argmin(axis=0), np.arange(x.size)]
    return (choice.astype(np.uint32) << 16).view(np.float32)


def from_json(data, datatype, shape):
    if datatype == "BF16":
        return bf16_nearest(np.array(data, dtype=np.float64)).reshape(shape)
    if datatype == "BYTES":
        return np.array([s.encode("utf-8") for s in data], dtype=object).reshape(shape)
    if datatype.startswith("COMPLEX"):
        part = "<f4" if datatype == "COMPLEX64" else "<f8"
        return np.array(data, dtype=part).view(NUMPY_OF[datatype]).reshape(shape)
    return np.array(data, dtype=NUMPY_OF[datatype]).reshape(shape)


def tensors_equal(got, want, datatype):
    """Bit-exact comparison; BF16 by the upper 16 bits of each float32."""
    if tuple(got.shape) != tuple(want.shape):
        return False
    if datatype == "BYTES":
        return got.flatten().tolist() == want.flatten().tolist()
    if datatype == "BF16":
        g = np.ascontiguousarray(got, "<f4").view("<u4") >> 16
        w = np.ascontiguousarray(want, "<f4").view("<u4") >> 16
        return np.array_equal(g, w)
    return same(np.ascontiguousarray(got, NUMPY_OF[datatype]), np.ascontiguousarray(want, NUMPY_OF[datatype]))


# ---- requests ---------------------------------------------------------------
class In:
    """One request input: JSON `data` (flat or nested) or binary."""

    def __init__(self, name, datatype, array, binary=False, nested=False, shape=None, params=None):
        self.name, self.datatype, self.binary, self.nested = name, datatype, binary, nested
        self.array = array if isinstance(array, np.ndarray) else np.array(array, dtype=NUMPY_OF[datatype])
        self.shape = list(self.array.shape) if shape is None else shape
        self.params = params

    def json(self):
        obj = {"name": self.name, "shape": self.shape, "datatype": self.datatype}
        params = dict(self.params or {})
        if self.binary:
            params["binary_data_size"] = len(self.raw())
        else:
            obj["data"] = to_json(self.array, self.datatype, self.nested)
        if params:
            obj["parameters"] = params
        return obj

    def raw(self):
        return to_binary(self.array, self.datatype) if self.binary else b""


def infer_body(inputs, outputs=None, parameters=None, request_id=None, extra=None):
    """(body, headers) for an infer request; binary inputs follow the JSON in order."""
    doc = {}
    if request_id is not None:
        doc["id"] = request_id
    if parameters is not None:
        doc["parameters"] = parameters
    doc["inputs"] = [i.json() for i in inputs]
    if outputs is not None:
        doc["outputs"] = outputs
    doc.update(extra or {})
    head = json.dumps(doc).encode()
    tail = b"".join(i.raw() for i in inputs)
    headers = {}
    if tail:
        headers["Inference-Header-Content-Length"] = str(len(head))
    return head + tail, headers


def raw_infer_body(doc, tail=b"", header_len=None):
    """A hand-built body for malformed-request cases."""
    head = json.dumps(doc).encode()
    headers = {"Inference-Header-Content-Length": str(len(head) if header_len is None else header_len)}
    return head + tail, headers


def decompress(body, encoding):
    if encoding in (None, "", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise AssertionError(f"unexpected Content-Encoding {encoding!r}")


def parse_infer_response(resp, body):
    """(doc, {name: ndarray}) from an infer response, as a Triton client reads it.

    The body is decompressed first; Inference-Header-Content-Length then gives
    the JSON length and binary outputs follow in the order of `outputs`.
    """
    body = decompress(body, resp.getheader("Content-Encoding"))
    ihcl = resp.getheader("Inference-Header-Content-Length")
    if ihcl is None:
        doc, rest = json.loads(body), b""
    else:
        n = int(ihcl)
        doc, rest = json.loads(body[:n]), body[n:]
    tensors, off = {}, 0
    for out in doc["outputs"]:
        size = (out.get("parameters") or {}).get("binary_data_size")
        if size is None:
            tensors[out["name"]] = from_json(out["data"], out["datatype"], out["shape"])
        else:
            if "data" in out:
                raise AssertionError(f"binary output {out['name']} also carries data")
            if ihcl is None:
                raise AssertionError("binary output without Inference-Header-Content-Length")
            tensors[out["name"]] = from_binary(rest[off:off + size], out["datatype"], out["shape"])
            off += size
    if off != len(rest):
        raise AssertionError(f"{len(rest) - off} unexplained bytes after the binary outputs")
    return doc, tensors


def infer_path(version=None, model=MODEL):
    return f"/v2/models/{model}/infer" if version is None else f"/v2/models/{model}/versions/{version}/infer"


def server_timing_ok(value):
    """Server-Timing per the W3C ABNF: metric *( ; param=value ), comma separated."""
    if not value:
        return False
    token = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
    param = rf"\s*;\s*{token}\s*=\s*(?:{token}|\"[^\"]*\")"
    return all(re.fullmatch(rf"\s*{token}(?:{param})*\s*", m) for m in value.split(","))


# ---------------------------------------------------------------------------
class V2Case(unittest.TestCase):
    """A daemon per test class plus the request helpers."""

    daemon_args = ()

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(*cls.daemon_args)
        cls.rng = np.random.default_rng(20240613)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"

    def get_json(self, path, status=200):
        resp, body = self.d.request("GET", path)
        self.assertEqual(resp.status, status, (path, body))
        self.assertEqual(resp.getheader("Content-Type"), "application/json", path)
        return json.loads(body)

    def assert_error(self, resp, body, status, what=""):
        """A non-200 answer: the expected status and a JSON {"error": string} body."""
        self.assertEqual(resp.status, status, (what, body[:300]))
        self.assertTrue((resp.getheader("Content-Type") or "").startswith("application/json"), what)
        doc = json.loads(body)
        self.assertIsInstance(doc.get("error"), str, (what, doc))
        self.assertTrue(doc["error"], what)

    def post(self, path, body, headers=None):
        return self.d.request("POST", path, body, headers or {})

    def infer_raw(self, inputs, version=None, outputs=None, parameters=None, request_id=None, headers=None):
        body, h = infer_body(inputs, outputs, parameters, request_id)
        h.update(headers or {})
        return self.post(infer_path(version), body, h)

    def infer(self, inputs, version=None, outputs=None, parameters=None, request_id=None, headers=None):
        """A request that must succeed: returns (resp, doc, tensors)."""
        resp, body = self.infer_raw(inputs, version, outputs, parameters, request_id, headers)
        self.assertEqual(resp.status, 200, body[:500])
        doc, tensors = parse_infer_response(resp, body)
        self.assertEqual(doc["model_name"], MODEL)
        self.assertEqual(doc["model_version"], version or DEFAULT_VERSION)
        return resp, doc, tensors

    def infer_error(self, inputs, status=400, version=None, outputs=None, parameters=None, what=""):
        resp, body = self.infer_raw(inputs, version, outputs, parameters)
        self.assert_error(resp, body, status, what)

    def assert_output(self, doc, tensors, want, datatype, name="output"):
        out = [o for o in doc["outputs"] if o["name"] == name]
        self.assertEqual(len(out), 1, doc["outputs"])
        self.assertEqual(out[0]["datatype"], datatype)
        self.assertEqual(out[0]["shape"], list(want.shape))
        self.assertTrue(tensors_equal(tensors[name], want, datatype),
                        (datatype, tensors[name].flatten()[:8], want.flatten()[:8]))

    def assert_healthy(self):
        self.assertIsNone(self.d.proc.poll(), "daemon exited")
        resp, _ = self.d.request("GET", "/v2/health/ready")
        self.assertEqual(resp.status, 200)
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        _, doc, t = self.infer([In("input", "FP32", a), In("repeats", "INT64", [2, 1])])
        self.assert_output(doc, t, np.tile(a, (2, 1)), "FP32")


def tile_inputs(a, datatype, repeats, binary=False, nested=False, repeats_binary=False, repeats_type="INT64"):
    return [In("input", datatype, a, binary=binary, nested=nested),
            In("repeats", repeats_type, np.array(repeats, dtype=NUMPY_OF[repeats_type]), binary=repeats_binary)]


# ---------------------------------------------------------------------------
class ServerAndModelEndpoints(V2Case):
    def test_server_metadata(self):
        for path in ("/v2", "/v2/"):
            doc = self.get_json(path)
            self.assertIsInstance(doc["name"], str)
            self.assertTrue(doc["name"])
            self.assertIsInstance(doc["version"], str)
            self.assertTrue(doc["version"])
            self.assertIsInstance(doc["extensions"], list)
            for ext in ("binary_tensor_data", "statistics", "model_configuration"):
                self.assertIn(ext, doc["extensions"], path)

    def test_health(self):
        for path in ("/v2/health/live", "/v2/health/ready"):
            resp, _ = self.d.request("GET", path)
            self.assertEqual(resp.status, 200, path)

    def test_model_metadata_every_version(self):
        want_inputs = {"13": ["input", "repeats"], "6": ["input", "repeats"], "1": ["input", "tiles", "axis"]}
        for path, version in [(f"/v2/models/{MODEL}", DEFAULT_VERSION)] + \
                             [(f"/v2/models/{MODEL}/versions/{v}", v) for v in VERSIONS]:
            with self.subTest(path=path):
                doc = self.get_json(path)
                self.assertEqual(doc["name"], MODEL)
                self.assertEqual(sorted(doc["versions"]), sorted(VERSIONS))
                self.assertTrue(all(isinstance(v, str) for v in doc["versions"]))
                self.assertIsInstance(doc["platform"], str)
                self.assertTrue(doc["platform"])
                self.assertEqual([t["name"] for t in doc["inputs"]], want_inputs[version])
                self.assertEqual([t["name"] for t in doc["outputs"]], ["output"])
                for t in doc["inputs"] + doc["outputs"]:
                    self.assertIn(t["datatype"], ALL_DATATYPES, t)
                    self.assertIsInstance(t["shape"], list, t)
                    self.assertTrue(all(isinstance(x, int) and x >= -1 for x in t["shape"]), t)
                if version != "1":
                    rep = doc["inputs"][1]
                    self.assertEqual(rep["datatype"], "INT64")
                    self.assertEqual(len(rep["shape"]), 1)

    def test_model_ready(self):
        paths = [f"/v2/models/{MODEL}/ready"] + [f"/v2/models/{MODEL}/versions/{v}/ready" for v in VERSIONS]
        for path in paths:
            resp, _ = self.d.request("GET", path)
            self.assertEqual(resp.status, 200, path)

    def test_model_config(self):
        for version in [None] + VERSIONS:
            base = f"/v2/models/{MODEL}" + ("" if version is None else f"/versions/{version}")
            with self.subTest(version=version):
                cfg = self.get_json(base + "/config")
                meta = self.get_json(base)
                self.assertEqual(cfg["name"], MODEL)
                self.assertEqual(cfg["max_batch_size"], 0)
                self.assertEqual([t["name"] for t in cfg["input"]], [t["name"] for t in meta["inputs"]])
                self.assertEqual([t["name"] for t in cfg["output"]], [t["name"] for t in meta["outputs"]])
                # Both documents say the same thing, as Triton's do for an ONNX model.
                self.assertEqual(cfg["platform"], meta["platform"])
                self.assertEqual(meta["platform"], "onnxruntime_onnx")
                for c, m in zip(cfg["input"] + cfg["output"], meta["inputs"] + meta["outputs"]):
                    self.assertEqual(c["data_type"], "TYPE_" + m["datatype"].replace("BYTES", "STRING"), (c, m))
                    self.assertEqual(c["dims"], m["shape"], (c, m))

    def test_unknown_model_or_version_is_404(self):
        paths = ["/v2/models/nope", "/v2/models/nope/ready", "/v2/models/nope/config", "/v2/models/nope/stats",
                 f"/v2/models/{MODEL}/versions/7", f"/v2/models/{MODEL}/versions/7/ready",
                 f"/v2/models/{MODEL}/versions/7/config", f"/v2/models/{MODEL}/versions/7/stats",
                 f"/v2/models/{MODEL}/versions/abc", f"/v2/models/{MODEL}/versions/0", "/v2/nope",
                 "/v2/health/nope"]
        for path in paths:
            resp, body = self.d.request("GET", path)
            self.assert_error(resp, body, 404, path)
        body, headers = infer_body(tile_inputs(np.arange(3, dtype=np.int32), "INT32", [2]))
        for path in (infer_path(model="nope"), infer_path(version="7"), infer_path(version="99", model="nope")):
            resp, out = self.post(path, body, headers)
            self.assert_error(resp, out, 404, path)

    def test_wrong_method_is_405(self):
        cases = [("POST", "/v2"), ("DELETE", "/v2"), ("POST", "/v2/health/live"), ("PUT", "/v2/health/ready"),
                 ("POST", f"/v2/models/{MODEL}"), ("DELETE", f"/v2/models/{MODEL}/versions/6"),
                 ("POST", f"/v2/models/{MODEL}/ready"), ("POST", f"/v2/models/{MODEL}/config"),
                 ("POST", f"/v2/models/{MODEL}/stats"), ("GET", infer_path()), ("PUT", infer_path("1")),
                 ("POST", "/v2/models/stats")]
        for method, path in cases:
            resp, body = self.d.request(method, path, b"{}" if method in ("POST", "PUT") else None)
            self.assert_error(resp, body, 405, f"{method} {path}")


# ---------------------------------------------------------------------------
class InferJSON(V2Case):
    SHAPE, REPEATS = (2, 3), [2, 2]

    def test_every_datatype_flat_and_nested(self):
        for version in ("13", "6"):
            for datatype in ALL_DATATYPES:
                if version == "6" and datatype == "BF16":
                    continue
                for nested in (False, True):
                    with self.subTest(version=version, datatype=datatype, nested=nested):
                        a = make_tensor(datatype, self.SHAPE, self.rng)
                        _, doc, t = self.infer(tile_inputs(a, datatype, self.REPEATS, nested=nested),
                                               version=version)
                        self.assert_output(doc, t, np.tile(a, self.REPEATS), datatype)
                        data = doc["outputs"][0]["data"]
                        per = 2 if datatype.startswith("COMPLEX") else 1
                        self.assertEqual(len(data), per * a.size * 4, "response data is flat")
                        self.assertFalse(any(isinstance(v, list) for v in data), "response data is flat")

    def test_json_output_types(self):
        a = np.array([True, False])
        _, doc, _ = self.infer(tile_inputs(a, "BOOL", [2]))
        self.assertEqual(doc["outputs"][0]["data"], [True, False, True, False])
        s = np.array(["\u00e9".encode(), b""], dtype=object)
        _, doc, _ = self.infer(tile_inputs(s, "BYTES", [2]))
        self.assertEqual(doc["outputs"][0]["data"], ["\u00e9", "", "\u00e9", ""])
        big = np.array([18446744073709551615, 0], dtype=np.uint64)
        _, doc, _ = self.infer(tile_inputs(big, "UINT64", [1]))
        self.assertEqual(doc["outputs"][0]["data"], [18446744073709551615, 0])
        ints = np.array([-9223372036854775808, 9223372036854775807], dtype=np.int64)
        _, doc, _ = self.infer(tile_inputs(ints, "INT64", [1]))
        self.assertEqual(doc["outputs"][0]["data"], ints.tolist())

    def test_bf16_json_rounds_to_nearest_even(self):
        one = 1.0
        halfway_down = 1.0 + 2 ** -8        # between 1.0 (even) and 1.0078125: -> 1.0
        halfway_up = 1.0 + 3 * 2 ** -8      # between 1.0078125 (odd) and 1.015625 (even): -> 1.015625
        above = 1.0 + 2 ** -8 + 2 ** -20    # just above halfway: -> 1.0078125
        vals = np.array([one, halfway_down, halfway_up, above, -halfway_down, 3.0e38], dtype=np.float32)
        _, doc, t = self.infer(tile_inputs(vals, "BF16", [2]))
        want = bf16_round(np.tile(vals, 2))
        self.assertTrue(tensors_equal(t["output"], want, "BF16"), (t["output"], want))
        self.assertEqual(np.asarray(t["output"], np.float32)[:4].tolist(), [1.0, 1.0, 1.015625, 1.0078125])

    def test_json_floats_round_to_nearest(self):
        """JSON numbers become the nearest value of the datatype, ties to even.

        Every number here has an exact double value, so numpy's double ->
        FP16/FP32 conversion gives the correctly rounded answer.
        """
        cases = {
            "FP16": [0.1, 0.25, 65504.0, 2.0 ** -24, 2.0 ** -26, 3 * 2.0 ** -25, -0.0, 2049.0, 2051.0,
                     1.00048828125, 1.00146484375],
            "FP32": [0.1, 0.5, 1e-45, 3.4028234663852886e38, -0.0, 16777217.0, 16777219.0, 0.3],
            "FP64": [0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -0.0],
        }
        for datatype, vals in cases.items():
            with self.subTest(datatype=datatype):
                doc = {"inputs": [{"name": "input", "shape": [len(vals)], "datatype": datatype, "data": vals},
                                  {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}
                resp, out = self.post(infer_path(), json.dumps(doc).encode())
                self.assertEqual(resp.status, 200, out)
                doc, t = parse_infer_response(resp, out)
                want = np.tile(np.array(vals, dtype=np.float64).astype(NUMPY_OF[datatype]), 2)
                self.assert_output(doc, t, want, datatype)

    def test_shapes_scalar_empty_and_zero_repeats(self):
        cases = [
            ((), []),                 # rank 0
            ((0, 3), [2, 2]),         # empty input
            ((2, 3), [0, 2]),         # zero repeats -> empty output
            ((1, 1, 1, 2), [1, 2, 1, 3]),
        ]
        for shape, repeats in cases:
            for binary in (False, True):
                with self.subTest(shape=shape, repeats=repeats, binary=binary):
                    a = make_tensor("INT32", shape, self.rng)
                    outputs = [{"name": "output", "parameters": {"binary_data": binary}}]
                    _, doc, t = self.infer(tile_inputs(a, "INT32", repeats, binary=binary), outputs=outputs)
                    self.assert_output(doc, t, np.tile(a, repeats) if repeats else a.copy(), "INT32")

    def test_with_and_without_content_type(self):
        a = np.arange(4, dtype=np.int16)
        for ctype in (None, "application/json", "application/octet-stream"):
            with self.subTest(content_type=ctype):
                headers = {} if ctype is None else {"Content-Type": ctype}
                _, doc, t = self.infer(tile_inputs(a, "INT16", [3]), headers=headers)
                self.assert_output(doc, t, np.tile(a, 3), "INT16")

    def test_id_model_name_version_and_json_headers(self):
        a = np.arange(3, dtype=np.float64)
        for version in (None,) + tuple(VERSIONS[:2]):
            resp, doc, _ = self.infer(tile_inputs(a, "FP64", [2]), version=version, request_id="req-\u00e9-42")
            self.assertEqual(doc["id"], "req-\u00e9-42")
            self.assertEqual(resp.getheader("Content-Type"), "application/json")
            self.assertIsNone(resp.getheader("Inference-Header-Content-Length"))
            self.assertTrue(server_timing_ok(resp.getheader("Server-Timing")), resp.getheader("Server-Timing"))
            self.assertTrue(resp.getheader("X-Request-Id"))

    def test_requested_outputs(self):
        a = np.arange(4, dtype=np.uint16)
        _, doc, t = self.infer(tile_inputs(a, "UINT16", [2]), outputs=[{"name": "output"}])
        self.assertEqual([o["name"] for o in doc["outputs"]], ["output"])
        self.assert_output(doc, t, np.tile(a, 2), "UINT16")
        self.infer_error(tile_inputs(a, "UINT16", [2]), outputs=[{"name": "nope"}], what="unknown output")
        self.infer_error(tile_inputs(a, "UINT16", [2]), outputs=[{"name": "output"}, {"name": "nope"}],
                         what="unknown output after a known one")

    def test_unknown_custom_parameters_are_ignored(self):
        a = np.arange(4, dtype=np.int8)
        params = {"x_custom": "yes", "priority": 0, "timeout": 1000000}
        _, doc, t = self.infer(tile_inputs(a, "INT8", [2]), parameters=params)
        self.assert_output(doc, t, np.tile(a, 2), "INT8")


# ---------------------------------------------------------------------------
class Leniency(V2Case):
    """What real clients add is skipped; what a known key says is checked (docs/protocols.md, "Leniency")."""

    def test_keys_clients_add_are_ignored(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        want = np.tile(a, (2, 1))
        inputs = [In("input", "FP32", a), In("repeats", "INT64", [2, 1])]
        extras = [
            {"model_name": MODEL},                                   # KServe's InferRequest.to_rest()
            {"model_name": MODEL, "model_version": DEFAULT_VERSION},
            {"model_name": MODEL, "model_version": ""},                # no version named
            {"x_client": {"nested": [1, {"k": None}]}, "trace": True},
        ]
        for extra in extras:
            with self.subTest(extra=extra):
                body, headers = infer_body(inputs, extra=extra)
                resp, out = self.post(infer_path(), body, headers)
                self.assertEqual(resp.status, 200, out)
                self.assert_output(*parse_infer_response(resp, out), want, "FP32")
        doc = json.loads(infer_body(inputs)[0])
        doc["inputs"][0]["x_client_tag"] = "abc"
        doc["outputs"] = [{"name": "output", "x_client_tag": 1, "parameters": {"binary_data": True, "x": 2}}]
        resp, out = self.post(infer_path(), json.dumps(doc).encode())
        self.assertEqual(resp.status, 200, out)
        self.assert_output(*parse_infer_response(resp, out), want, "FP32")
        # The version the URL names is the one the body may name.
        body, headers = infer_body(inputs, extra={"model_name": MODEL, "model_version": "6"})
        resp, out = self.post(infer_path("6"), body, headers)
        self.assertEqual(resp.status, 200, out)

    def test_model_name_or_version_mismatch_names_both(self):
        inputs = [In("input", "FP32", [1.0, 2.0]), In("repeats", "INT64", [2])]
        cases = [
            (infer_path(), {"model_name": "resnet"}, ["'resnet'", "'tile'"]),
            (infer_path(), {"model_version": "6"}, ["'6'", "version 13"]),
            (infer_path("6"), {"model_version": "13"}, ["'13'", "version 6"]),
            (infer_path(), {"model_version": 13}, ["model_version must be a string"]),
        ]
        for path, extra, words in cases:
            with self.subTest(extra=extra, path=path):
                body, headers = infer_body(inputs, extra=extra)
                resp, out = self.post(path, body, headers)
                self.assert_error(resp, out, 400, str(extra))
                for w in words:
                    self.assertIn(w, json.loads(out)["error"])

    def test_null_data_beside_binary_data_size(self):
        """KServe sends an empty binary tensor as "data": null with binary_data_size 0."""
        for shape, repeats in (((), []), ((3,), [2]), ((2, 0), [1, 4])):
            with self.subTest(shape=shape):
                a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
                reps = np.array(repeats, dtype=np.int64)
                doc = {"model_name": MODEL, "inputs": [
                    {"name": "input", "shape": list(shape), "datatype": "INT32",
                     "parameters": {"binary_data_size": a.nbytes}, "data": None},
                    {"name": "repeats", "shape": [len(repeats)], "datatype": "INT64",
                     "parameters": {"binary_data_size": reps.nbytes}, "data": None}]}
                body, headers = raw_infer_body(doc, a.tobytes() + reps.tobytes())
                resp, out = self.post(infer_path(), body, headers)
                self.assertEqual(resp.status, 200, out)
                self.assert_output(*parse_infer_response(resp, out), np.tile(a, repeats), "INT32")
        # A null "data" without binary_data_size is no data at all.
        doc = {"inputs": [{"name": "input", "shape": [1], "datatype": "INT32", "data": None},
                          {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}
        resp, out = self.post(infer_path(), json.dumps(doc).encode())
        self.assert_error(resp, out, 400, "null data alone")
        self.assertIn("exactly one of 'data' and 'binary_data_size'", json.loads(out)["error"])

    def test_known_keys_stay_strict(self):
        inp = {"name": "input", "shape": [3], "datatype": "INT32", "data": [1, 2, 3]}
        rep = {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}
        cases = [
            ("duplicate key", b'{"inputs": [], "inputs": []}', "duplicate key 'inputs'"),
            ("id not a string", json.dumps({"id": 7, "inputs": [inp, rep]}).encode(), "id must be a string"),
            ("shape not a list", json.dumps({"inputs": [dict(inp, shape=3), rep]}).encode(), "shape"),
            ("binary_data not a bool",
             json.dumps({"inputs": [inp, rep], "outputs": [{"name": "output", "parameters": {"binary_data": 1}}]})
             .encode(), "binary_data must be true or false"),
            ("unknown output", json.dumps({"inputs": [inp, rep], "outputs": [{"name": "out"}]}).encode(),
             "unknown output 'out'"),
        ]
        for what, body, word in cases:
            with self.subTest(what):
                resp, out = self.post(infer_path(), body)
                self.assert_error(resp, out, 400, what)
                self.assertIn(word, json.loads(out)["error"])


# ---------------------------------------------------------------------------
class InferBinary(V2Case):
    SHAPE, REPEATS = (3, 2), [2, 3]

    def test_every_datatype_binary_in_and_out(self):
        for version in ("13", "6"):
            for datatype in ALL_DATATYPES:
                if version == "6" and datatype == "BF16":
                    continue
                with self.subTest(version=version, datatype=datatype):
                    a = make_tensor(datatype, self.SHAPE, self.rng)
                    if datatype == "BYTES":
                        a.flat[0] = b"\xff\x00\xfe not utf-8"
                    resp, doc, t = self.infer(tile_inputs(a, datatype, self.REPEATS, binary=True,
                                                          repeats_binary=True),
                                              version=version, parameters={"binary_data_output": True})
                    want = np.tile(a, self.REPEATS)
                    self.assert_output(doc, t, want, datatype)
                    out = doc["outputs"][0]
                    self.assertNotIn("data", out)
                    self.assertEqual(out["parameters"]["binary_data_size"], len(to_binary(want, datatype)))
                    self.assertEqual(resp.getheader("Content-Type"), "application/octet-stream")

    def test_bf16_binary_is_upper_two_bytes(self):
        vals = np.array([1.0, -2.5, 65280.0, 2 ** -20], dtype=np.float32)
        raw = b"".join(struct.pack("<f", float(x))[2:4] for x in vals)
        inp = In("input", "BF16", vals, binary=True)
        self.assertEqual(inp.raw(), raw)
        _, doc, t = self.infer([inp, In("repeats", "INT64", [2])], outputs=[{"name": "output",
                                                                              "parameters": {"binary_data": True}}])
        self.assertTrue(tensors_equal(t["output"], np.tile(vals, 2), "BF16"))

    def test_bytes_binary_length_prefix(self):
        items = [b"abc", b"", b"\x00\x01", "\u00e9".encode()]
        a = np.array(items, dtype=object)
        body, headers = infer_body(tile_inputs(a, "BYTES", [2], binary=True),
                                   outputs=[{"name": "output", "parameters": {"binary_data": True}}])
        resp, out = self.post(infer_path(), body, headers)
        self.assertEqual(resp.status, 200, out)
        n = int(resp.getheader("Inference-Header-Content-Length"))
        want_raw = b"".join(struct.pack("<I", len(s)) + s for s in items) * 2
        self.assertEqual(out[n:], want_raw)
        self.assertEqual(json.loads(out[:n])["outputs"][0]["parameters"]["binary_data_size"], len(want_raw))

    def test_response_layout(self):
        a = make_tensor("FP32", (2, 2), self.rng)
        body, headers = infer_body(tile_inputs(a, "FP32", [1, 2]), parameters={"binary_data_output": True},
                                   request_id="bin-1")
        resp, out = self.post(infer_path(), body, headers)
        self.assertEqual(resp.status, 200, out)
        n = int(resp.getheader("Inference-Header-Content-Length"))
        self.assertEqual(int(resp.getheader("Content-Length")), len(out))
        doc = json.loads(out[:n])
        self.assertEqual(doc["id"], "bin-1")
        self.assertEqual(out[n:], np.tile(a, (1, 2)).astype("<f4").tobytes())
        self.assertEqual(doc["outputs"][0]["parameters"]["binary_data_size"], len(out) - n)
        self.assertTrue(server_timing_ok(resp.getheader("Server-Timing")))
        self.assertTrue(resp.getheader("X-Request-Id"))

    def test_binary_output_selection(self):
        a = np.arange(6, dtype=np.int32).reshape(2, 3)
        want = np.tile(a, (2, 1))
        cases = [  # (request parameters, outputs, binary expected)
            (None, None, False),
            ({"binary_data_output": True}, None, True),
            ({"binary_data_output": False}, None, False),
            (None, [{"name": "output", "parameters": {"binary_data": True}}], True),
            ({"binary_data_output": True}, [{"name": "output", "parameters": {"binary_data": False}}], False),
            ({"binary_data_output": False}, [{"name": "output", "parameters": {"binary_data": True}}], True),
            ({"binary_data_output": True}, [{"name": "output"}], True),
        ]
        for params, outputs, binary in cases:
            with self.subTest(parameters=params, outputs=outputs):
                resp, doc, t = self.infer(tile_inputs(a, "INT32", [2, 1]), outputs=outputs, parameters=params)
                self.assert_output(doc, t, want, "INT32")
                out = doc["outputs"][0]
                if binary:
                    self.assertNotIn("data", out)
                    self.assertEqual(out["parameters"]["binary_data_size"], want.nbytes)
                    self.assertIsNotNone(resp.getheader("Inference-Header-Content-Length"))
                else:
                    self.assertIn("data", out)
                    self.assertNotIn("binary_data_size", out.get("parameters") or {})
                    self.assertIsNone(resp.getheader("Inference-Header-Content-Length"))

    def test_binary_and_json_inputs_mixed(self):
        a = make_tensor("UINT32", (2, 2), self.rng)
        for in_bin, rep_bin in ((True, False), (False, True), (True, True)):
            with self.subTest(input_binary=in_bin, repeats_binary=rep_bin):
                _, doc, t = self.infer(tile_inputs(a, "UINT32", [3, 1], binary=in_bin, repeats_binary=rep_bin))
                self.assert_output(doc, t, np.tile(a, (3, 1)), "UINT32")
        # Binary tensors are taken in JSON order, whatever order the inputs come in.
        inputs = [In("repeats", "INT64", [1, 2], binary=True), In("input", "UINT32", a, binary=True)]
        _, doc, t = self.infer(inputs)
        self.assert_output(doc, t, np.tile(a, (1, 2)), "UINT32")

    def test_zero_byte_binary_input_and_output(self):
        a = np.zeros((0, 4), dtype=np.float32)
        _, doc, t = self.infer(tile_inputs(a, "FP32", [3, 1], binary=True),
                               parameters={"binary_data_output": True})
        self.assert_output(doc, t, np.zeros((0, 4), np.float32), "FP32")
        self.assertEqual(doc["outputs"][0]["parameters"]["binary_data_size"], 0)


# ---------------------------------------------------------------------------
class InferVersionsAndSemantics(V2Case):
    def test_repeats_any_integer_datatype(self):
        a = make_tensor("FP32", (2, 3), self.rng)
        for version in ("13", "6"):
            for rtype in INTEGER_DATATYPES:
                for binary in (False, True):
                    with self.subTest(version=version, repeats=rtype, binary=binary):
                        _, doc, t = self.infer(tile_inputs(a, "FP32", [2, 3], repeats_type=rtype,
                                                           repeats_binary=binary), version=version)
                        self.assert_output(doc, t, np.tile(a, (2, 3)), "FP32")

    def test_version6_refuses_bf16(self):
        a = bf16_round(np.arange(4, dtype=np.float32))
        for binary in (False, True):
            self.infer_error(tile_inputs(a, "BF16", [2], binary=binary), version="6", what="BF16 on Tile-6")
        _, doc, t = self.infer(tile_inputs(a, "BF16", [2], binary=True), version="13")
        self.assert_output(doc, t, np.tile(a, 2), "BF16")

    def test_version1_tiles_axis(self):
        a32 = make_tensor("FP32", (2, 3), self.rng)
        for datatype in FLOAT_DATATYPES:
            a = a32.astype(NUMPY_OF[datatype])
            for tiles, axis in ((3, 0), (2, 1), (2, -1), (4, -2), (1, 0)):
                for binary in (False, True):
                    with self.subTest(datatype=datatype, tiles=tiles, axis=axis, binary=binary):
                        inputs = [In("input", datatype, a, binary=binary),
                                  In("tiles", "INT64", [tiles], binary=binary),
                                  In("axis", "INT64", [axis], binary=binary)]
                        _, doc, t = self.infer(inputs, version="1")
                        self.assert_output(doc, t, np.concatenate([a] * tiles, axis=axis), datatype)

    def test_version1_errors(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        cases = {
            "INT32 input": [In("input", "INT32", a.astype(np.int32)), In("tiles", "INT64", [2]),
                            In("axis", "INT64", [0])],
            "BF16 input": [In("input", "BF16", a), In("tiles", "INT64", [2]), In("axis", "INT64", [0])],
            "BYTES input": [In("input", "BYTES", np.array([b"a"], dtype=object)), In("tiles", "INT64", [2]),
                            In("axis", "INT64", [0])],
            "axis out of range": [In("input", "FP32", a), In("tiles", "INT64", [2]), In("axis", "INT64", [2])],
            "axis below range": [In("input", "FP32", a), In("tiles", "INT64", [2]), In("axis", "INT64", [-3])],
            "missing axis": [In("input", "FP32", a), In("tiles", "INT64", [2])],
            "missing tiles": [In("input", "FP32", a), In("axis", "INT64", [0])],
            "repeats instead": [In("input", "FP32", a), In("repeats", "INT64", [2, 2])],
        }
        for what, inputs in cases.items():
            with self.subTest(what):
                self.infer_error(inputs, version="1", what=what)
        self.assert_healthy()

    def test_semantics_parameter(self):
        a = make_tensor("FP32", (2, 3), self.rng)
        cases = [  # (semantics, repeats, expected or None for 400)
            ("onnx", [2, 3], np.tile(a, (2, 3))),
            ("onnx", [2, 0], np.tile(a, (2, 0))),
            ("onnx", [2], None),
            ("onnx", [2, 2, 2], None),
            ("numpy", [2, 2, 2], np.tile(a, (2, 2, 2))),
            ("numpy", [3], np.tile(a, 3)),
            ("numpy", [2, 3], np.tile(a, (2, 3))),
            ("openvino", [2, 1, 2], np.tile(a, (2, 1, 2))),
            ("openvino", [4], np.tile(a, 4)),
            ("directml", [1, 2], np.tile(a, (1, 2))),
            ("directml", [0, 2], None),
            ("directml", [2], None),
            ("bogus", [1, 1], None),
        ]
        for version in ("13", "6"):
            for semantics, repeats, want in cases:
                with self.subTest(version=version, semantics=semantics, repeats=repeats):
                    inputs = tile_inputs(a, "FP32", repeats)
                    params = {"semantics": semantics}
                    if want is None:
                        self.infer_error(inputs, version=version, parameters=params, what=semantics)
                    else:
                        _, doc, t = self.infer(inputs, version=version, parameters=params)
                        self.assert_output(doc, t, want, "FP32")


# ---------------------------------------------------------------------------
class InferErrors(V2Case):
    def post_case(self, body, headers, status=400, what=""):
        resp, out = self.post(infer_path(), body, headers)
        self.assert_error(resp, out, status, what)

    def test_binary_framing_errors(self):
        a = np.arange(4, dtype=np.float32)
        raw = a.tobytes()
        good_inputs = [{"name": "input", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
                       {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]
        # The well-formed version of these requests works.
        body, headers = raw_infer_body({"inputs": good_inputs}, raw)
        resp, out = self.post(infer_path(), body, headers)
        self.assertEqual(resp.status, 200, out)

        def with_size(n):
            inputs = json.loads(json.dumps(good_inputs))
            inputs[0]["parameters"]["binary_data_size"] = n
            return {"inputs": inputs}

        # Inference-Header-Content-Length may also be sent when everything is JSON.
        json_only = {"inputs": [{"name": "input", "shape": [4], "datatype": "FP32", "data": a.tolist()},
                                good_inputs[1]]}
        body, headers = raw_infer_body(json_only)
        resp, out = self.post(infer_path(), body, headers)
        self.assertEqual(resp.status, 200, out)
        self.assertEqual(parse_infer_response(resp, out)[1]["output"].tolist(), np.tile(a, 2).tolist())

        head = json.dumps({"inputs": good_inputs}).encode()
        cases = [
            ("Inference-Header-Content-Length 0 (raw request) for a two-input model",
             *raw_infer_body({"inputs": good_inputs}, raw, header_len=0)),
            ("binary_data_size larger than the rest of the body", *raw_infer_body(with_size(32), raw)),
            ("binary_data_size larger than the body, by one", *raw_infer_body(with_size(17), raw)),
            ("leftover binary bytes", *raw_infer_body({"inputs": good_inputs}, raw + b"\0\0\0\0")),
            ("binary_data_size smaller than the tensor", *raw_infer_body(with_size(12), raw[:12])),
            ("binary_data_size larger than the tensor", *raw_infer_body(with_size(20), raw + b"\0" * 4)),
            ("Inference-Header-Content-Length larger than the body",
             *raw_infer_body({"inputs": good_inputs}, raw, header_len=len(head) + len(raw) + 1)),
            ("Inference-Header-Content-Length far larger than the body",
             *raw_infer_body({"inputs": good_inputs}, raw, header_len=1 << 40)),
            ("Inference-Header-Content-Length cuts the JSON",
             *raw_infer_body({"inputs": good_inputs}, raw, header_len=len(head) - 3)),
            ("Inference-Header-Content-Length negative", *raw_infer_body({"inputs": good_inputs}, raw, header_len=-1)),
            ("Inference-Header-Content-Length not a number",
             *raw_infer_body({"inputs": good_inputs}, raw, header_len="12abc")),
            ("binary input without Inference-Header-Content-Length", head + raw, {}),
            ("negative binary_data_size", *raw_infer_body(with_size(-16), raw)),
            ("non-integer binary_data_size", *raw_infer_body(with_size("16"), raw)),
        ]
        for what, body, headers in cases:
            with self.subTest(what):
                self.post_case(body, headers, what=what)
        # BYTES with a length prefix running past the tensor's bytes.
        bad = struct.pack("<I", 10) + b"abc"
        body, headers = raw_infer_body(
            {"inputs": [{"name": "input", "shape": [1], "datatype": "BYTES",
                         "parameters": {"binary_data_size": len(bad)}},
                        {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}, bad)
        self.post_case(body, headers, what="truncated BYTES element")
        # BYTES elements fewer than the shape says.
        two = struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b"
        body, headers = raw_infer_body(
            {"inputs": [{"name": "input", "shape": [3], "datatype": "BYTES",
                         "parameters": {"binary_data_size": len(two)}},
                        {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}, two)
        self.post_case(body, headers, what="BYTES element count below shape")
        self.assert_healthy()

    def test_request_errors(self):
        rep = {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}
        inp = {"name": "input", "shape": [3], "datatype": "INT32", "data": [1, 2, 3]}

        def doc(*inputs, **extra):
            return json.dumps({"inputs": list(inputs), **extra}).encode()

        cases = [
            ("both data and binary_data_size",
             *raw_infer_body({"inputs": [dict(inp, parameters={"binary_data_size": 12}), rep]},
                             np.array([1, 2, 3], np.int32).tobytes())),
            ("neither data nor binary_data_size",
             doc({"name": "input", "shape": [3], "datatype": "INT32"}, rep), {}),
            ("shape/data count mismatch (fewer)", doc(dict(inp, data=[1, 2]), rep), {}),
            ("shape/data count mismatch (more)", doc(dict(inp, data=[1, 2, 3, 4]), rep), {}),
            ("nested data count mismatch", doc(dict(inp, shape=[2, 2], data=[[1, 2], [3]]), rep), {}),
            ("COMPLEX64 odd number count", doc(dict(inp, datatype="COMPLEX64", data=[1, 2, 3, 4, 5]), rep), {}),
            ("missing repeats", doc(inp), {}),
            ("missing input", doc(rep), {}),
            ("wrong repeats count for onnx", doc(inp, dict(rep, shape=[2], data=[2, 2])), {}),
            ("negative repeats", doc(inp, dict(rep, data=[-1])), {}),
            ("repeats of rank 2", doc(inp, dict(rep, shape=[1, 1])), {}),
            ("FP32 repeats", doc(inp, dict(rep, datatype="FP32", data=[2.0])), {}),
            ("FP64 repeats", doc(inp, dict(rep, datatype="FP64", data=[2.0])), {}),
            ("BYTES repeats", doc(inp, dict(rep, datatype="BYTES", data=["2"])), {}),
            ("malformed JSON", b'{"inputs": [', {}),
            ("not JSON", b"hello", {}),
            ("empty body", b"", {}),
            ("JSON but not an object", b"[1, 2]", {}),
            ("inputs missing", doc(), {}),
            ("inputs not a list", json.dumps({"inputs": {"input": inp}}).encode(), {}),
            ("unknown datatype", doc(dict(inp, datatype="FP8"), rep), {}),
            ("datatype names are case-sensitive", doc(dict(inp, datatype="int32"), rep), {}),
            ("negative shape dimension", doc(dict(inp, shape=[-3]), rep), {}),
            ("data of the wrong type", doc(dict(inp, data=["a", "b", "c"]), rep), {}),
            ("unknown input name", doc(inp, rep, dict(inp, name="extra")), {}),
            ("duplicate input", doc(inp, rep, inp), {}),
            ("unknown output", doc(inp, rep, outputs=[{"name": "nope"}]), {}),
        ]
        for what, body, headers in cases:
            with self.subTest(what):
                self.post_case(body, headers, what=what)
        self.assert_healthy()

    def test_every_error_status_has_json_error(self):
        """Statuses other than 400 also carry {"error": ...}."""
        resp, body = self.d.request("GET", "/nope")
        self.assert_error(resp, body, 404, "/nope")
        resp, body = self.d.request("GET", infer_path())
        self.assert_error(resp, body, 405, "GET infer")
        resp, body = self.post(infer_path(), gzip.compress(b"{}"), {"Content-Encoding": "br"})
        self.assert_error(resp, body, 415, "br")


# ---------------------------------------------------------------------------
class Statistics(V2Case):
    STAT_KEYS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")

    def stats(self, path):
        doc = self.get_json(path)
        self.assertIsInstance(doc["model_stats"], list)
        for m in doc["model_stats"]:
            self.assertIsInstance(m["name"], str)
            self.assertIsInstance(m["version"], str)
            for key in ("last_inference", "inference_count", "execution_count"):
                self.assertIsInstance(m[key], int, key)
            for key in self.STAT_KEYS:
                d = m["inference_stats"][key]
                self.assertIsInstance(d["count"], int, key)
                self.assertIsInstance(d["ns"], int, key)
                self.assertGreaterEqual(d["count"], 0)
                self.assertGreaterEqual(d["ns"], 0)
        return doc["model_stats"]

    def entry(self, version, path=f"/v2/models/{MODEL}/stats"):
        got = [m for m in self.stats(path) if m["name"] == MODEL and m["version"] == version]
        self.assertEqual(len(got), 1, (path, version))
        return got[0]

    def test_shape_of_every_stats_endpoint(self):
        all_models = self.stats("/v2/models/stats")
        self.assertEqual({m["version"] for m in all_models if m["name"] == MODEL}, set(VERSIONS))
        model = self.stats(f"/v2/models/{MODEL}/stats")
        self.assertEqual({m["version"] for m in model}, set(VERSIONS))
        for v in VERSIONS:
            one = self.stats(f"/v2/models/{MODEL}/versions/{v}/stats")
            self.assertEqual([(m["name"], m["version"]) for m in one], [(MODEL, v)])

    def test_counts_move_after_success_and_failure(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        before = self.entry("13")
        other_before = self.entry("6")
        t0 = time.time()
        self.infer(tile_inputs(a, "FP32", [2, 2]))
        after = self.entry("13")
        s0, s1 = before["inference_stats"], after["inference_stats"]
        self.assertEqual(s1["success"]["count"], s0["success"]["count"] + 1)
        self.assertGreater(s1["success"]["ns"], s0["success"]["ns"])
        self.assertEqual(s1["fail"]["count"], s0["fail"]["count"])
        for key in ("queue", "compute_input", "compute_infer", "compute_output"):
            self.assertEqual(s1[key]["count"], s0[key]["count"] + 1, key)
            self.assertGreaterEqual(s1[key]["ns"], s0[key]["ns"], key)
        self.assertEqual(after["inference_count"], before["inference_count"] + 1)
        self.assertEqual(after["execution_count"], before["execution_count"] + 1)
        self.assertLessEqual(abs(after["last_inference"] - t0 * 1000), 60_000, "ms since the epoch")
        self.assertEqual(self.entry("6")["inference_stats"]["success"]["count"],
                         other_before["inference_stats"]["success"]["count"], "other versions unchanged")

        # A request the model refuses counts as a failure, not a success.
        self.infer_error(tile_inputs(a, "FP32", [2, 2, 2]), what="wrong repeats count")
        failed = self.entry("13")
        s2 = failed["inference_stats"]
        self.assertEqual(s2["fail"]["count"], s1["fail"]["count"] + 1)
        self.assertGreaterEqual(s2["fail"]["ns"], s1["fail"]["ns"])
        self.assertEqual(s2["success"]["count"], s1["success"]["count"])

        # A versioned request moves that version's entry.
        self.infer(tile_inputs(a, "FP32", [1, 1]), version="6")
        self.assertEqual(self.entry("6", f"/v2/models/{MODEL}/versions/6/stats")["inference_stats"]["success"]
                         ["count"], other_before["inference_stats"]["success"]["count"] + 1)


    def test_streamed_outputs_count_their_production(self):
        """A streamed body is tiled and formatted while it is sent; the statistics count that time."""
        a = np.arange(4096, dtype=np.float32)
        for binary, phase in ((True, "compute_infer"), (False, "compute_output")):
            with self.subTest(binary=binary):
                before = self.entry("13")["inference_stats"]
                outputs = [{"name": "output", "parameters": {"binary_data": binary}}]
                resp, doc, t = self.infer(tile_inputs(a, "FP32", [1024 if binary else 64]), outputs=outputs)
                self.assertEqual(t["output"].size, 4096 * (1024 if binary else 64))
                after = self.entry("13")["inference_stats"]
                delta = {k: after[k]["ns"] - before[k]["ns"] for k in self.STAT_KEYS}
                self.assertEqual(after["success"]["count"], before["success"]["count"] + 1)
                # Producing 16 MiB (binary) or 256 Ki numbers as text takes well over 100 us.
                self.assertGreater(delta[phase], 100_000, delta)
                parts = sum(delta[k] for k in ("queue", "compute_input", "compute_infer", "compute_output"))
                self.assertLessEqual(parts, delta["success"], delta)


# ---------------------------------------------------------------------------
class Compression(V2Case):
    def small_request(self, **kw):
        a = np.arange(12, dtype=np.int32).reshape(3, 4)
        body, headers = infer_body(tile_inputs(a, "INT32", [2, 2], **kw), request_id="z")
        return a, body, headers

    def test_compressed_request_bodies(self):
        for binary in (False, True):
            a, body, headers = self.small_request(binary=binary)
            for encoding, pack in (("gzip", gzip.compress), ("deflate", zlib.compress), ("identity", bytes)):
                with self.subTest(encoding=encoding, binary=binary):
                    h = dict(headers, **{"Content-Encoding": encoding})
                    resp, out = self.post(infer_path(), pack(body), h)
                    self.assertEqual(resp.status, 200, out)
                    doc, t = parse_infer_response(resp, out)
                    self.assertEqual(doc["id"], "z")
                    self.assert_output(doc, t, np.tile(a, (2, 2)), "INT32")

    def test_unsupported_content_encoding_is_415(self):
        _, body, headers = self.small_request()
        for encoding in ("br", "compress", "x-unknown"):
            with self.subTest(encoding=encoding):
                resp, out = self.post(infer_path(), body, dict(headers, **{"Content-Encoding": encoding}))
                self.assert_error(resp, out, 415, encoding)
                accept = (resp.getheader("Accept-Encoding") or "").lower()
                self.assertIn("gzip", accept)
                self.assertIn("deflate", accept)
        self.assert_healthy()

    def test_corrupt_compressed_body_is_400(self):
        _, body, headers = self.small_request()
        for encoding, data in (("gzip", b"\x1f\x8b\x08\x00garbage-not-gzip"), ("deflate", b"not zlib at all"),
                               ("gzip", gzip.compress(body)[:-12])):
            with self.subTest(encoding=encoding, n=len(data)):
                resp, out = self.post(infer_path(), data, dict(headers, **{"Content-Encoding": encoding}))
                self.assert_error(resp, out, 400, encoding)
        self.assert_healthy()

    def test_compressed_responses(self):
        a, body, headers = self.small_request()
        want = np.tile(a, (20, 20))  # 19200 bytes: above the 1 KiB below which nothing is compressed
        for accept, encoding in (("gzip", "gzip"), ("deflate", "deflate"), ("gzip, deflate", None),
                                 ("identity", "identity"), ("deflate;q=0.2, gzip;q=0.9", "gzip"),
                                 ("gzip;q=0.1, deflate;q=0.8", "deflate"), ("gzip;q=0", "identity"),
                                 ("deflate;q=0, gzip", "gzip"), ("identity;q=0, deflate", "deflate")):
            for binary_out in (False, True):
                with self.subTest(accept=accept, binary_output=binary_out):
                    b, h = infer_body(tile_inputs(a, "INT32", [20, 20]), request_id="z",
                                      parameters={"binary_data_output": binary_out})
                    resp, out = self.post(infer_path(), b, dict(h, **{"Accept-Encoding": accept}))
                    self.assertEqual(resp.status, 200, out)
                    got = resp.getheader("Content-Encoding")
                    if encoding is None:
                        self.assertIn(got, ("gzip", "deflate"))
                    elif encoding == "identity":
                        self.assertIn(got, (None, "identity"))
                    else:
                        self.assertEqual(got, encoding)
                    self.assertEqual(int(resp.getheader("Content-Length")), len(out))
                    self.assertEqual(resp.getheader("Vary"), "Accept-Encoding")
                    doc, t = parse_infer_response(resp, out)  # splits after decompressing
                    self.assert_output(doc, t, want, "INT32")
                    if binary_out:
                        plain = decompress(out, got)
                        n = int(resp.getheader("Inference-Header-Content-Length"))
                        self.assertEqual(plain[n:], want.astype("<i4").tobytes(),
                                         "Inference-Header-Content-Length counts uncompressed JSON")
                        json.loads(plain[:n])

    def test_small_bodies_are_not_compressed_and_every_answer_varies(self):
        """Below 1 KiB a body fits one TCP segment either way: it is sent as it is. Compressed or
        not, an answer that depends on Accept-Encoding says so to caches."""
        a = np.arange(4, dtype=np.int8)
        for repeats, compressed in (([2], False), ([300], True)):
            for accept in ("gzip", "identity", None):
                with self.subTest(repeats=repeats, accept=accept):
                    b, h = infer_body(tile_inputs(a, "INT8", repeats))
                    if accept:
                        h["Accept-Encoding"] = accept
                    resp, out = self.post(infer_path(), b, h)
                    self.assertEqual(resp.status, 200, out)
                    self.assertEqual(resp.getheader("Vary"), "Accept-Encoding")
                    got = resp.getheader("Content-Encoding")
                    self.assertEqual(got, "gzip" if compressed and accept == "gzip" else None, len(out))
                    if got is None and accept == "gzip":
                        self.assertLess(len(out), 1024)
                    self.assert_output(*parse_infer_response(resp, out), np.tile(a, repeats), "INT8")
        resp, out = self.post("/v1/tile", json.dumps({"input": {"dtype": "int8", "data": [1]}, "repeats": [3]}).encode(),
                              {"Content-Type": "application/json", "Accept-Encoding": "gzip"})
        # /v1 also picks the body's type by Accept (test_caching.Negotiation).
        self.assertEqual((resp.status, resp.getheader("Content-Encoding"), resp.getheader("Vary")),
                         (200, None, "Accept, Accept-Encoding"))

    def test_v1_tile_compression(self):
        doc = {"input": {"dtype": "float32", "shape": [2, 2], "data": [1, 2, 3, 4]}, "repeats": [1, 100]}
        body = json.dumps(doc).encode()
        for encoding, pack, unpack in (("gzip", gzip.compress, gzip.decompress),
                                       ("deflate", zlib.compress, zlib.decompress)):
            with self.subTest(encoding=encoding):
                resp, out = self.post("/v1/tile", pack(body), {"Content-Type": "application/json",
                                                               "Content-Encoding": encoding,
                                                               "Accept-Encoding": encoding})
                self.assertEqual(resp.status, 200, out)
                self.assertEqual(resp.getheader("Content-Encoding"), encoding)
                got = json.loads(unpack(out))
                self.assertEqual(got["output"]["shape"], [2, 200])
                self.assertEqual(got["output"]["data"], [1, 2] * 100 + [3, 4] * 100)
        resp, out = self.post("/v1/tile", body, {"Content-Type": "application/json", "Content-Encoding": "br"})
        self.assert_error(resp, out, 415, "/v1/tile br")
        self.assertIn("gzip", (resp.getheader("Accept-Encoding") or "").lower())


class CompressionBomb(V2Case):
    daemon_args = ("--max-body", "1M")

    def test_bomb_over_max_body_is_413(self):
        inflated = b'{"inputs": [' + b" " * (64 << 20) + b"]}"
        bombs = {"gzip": gzip.compress(inflated, 9), "deflate": zlib.compress(inflated, 9)}
        for path, extra in ((infer_path(), {}), ("/v1/tile", {"Content-Type": "application/json"})):
            for encoding, data in bombs.items():
                with self.subTest(path=path, encoding=encoding):
                    self.assertLess(len(data), 1 << 20)
                    resp, out = self.post(path, data, dict(extra, **{"Content-Encoding": encoding}))
                    self.assert_error(resp, out, 413, f"{path} {encoding}")
                    self.assertIsNone(self.d.proc.poll(), "daemon crashed")
        # Just under the limit once inflated is still served.
        a = np.arange(1000, dtype=np.int64)
        body, headers = infer_body(tile_inputs(a, "INT64", [1]))
        self.assertLess(len(body), 1 << 20)
        resp, out = self.post(infer_path(), gzip.compress(body), dict(headers, **{"Content-Encoding": "gzip"}))
        self.assertEqual(resp.status, 200, out)
        self.assert_healthy()


# ---------------------------------------------------------------------------
class LargeOutputs(V2Case):
    def test_64mib_binary_output_streams(self):
        a = (np.arange(1024, dtype=np.float32) * 0.5 - 7).astype(np.float32)
        reps = 16384  # 4 KiB * 16384 = 64 MiB
        body, headers = infer_body(tile_inputs(a, "FP32", [reps], binary=True),
                                   outputs=[{"name": "output", "parameters": {"binary_data": True}}],
                                   request_id="big")
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=120)
        conn.request("POST", infer_path(), body, headers)
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertIsNotNone(resp.getheader("Content-Length"))
        self.assertIsNone(resp.getheader("Transfer-Encoding"))
        self.assertTrue(server_timing_ok(resp.getheader("Server-Timing")), resp.getheader("Server-Timing"))
        self.assertTrue(resp.getheader("X-Request-Id"))
        n = int(resp.getheader("Inference-Header-Content-Length"))
        out = resp.read()
        conn.close()
        self.assertEqual(len(out), int(resp.getheader("Content-Length")))
        doc = json.loads(out[:n])
        self.assertEqual(doc["id"], "big")
        self.assertEqual(doc["outputs"][0]["shape"], [1024 * reps])
        self.assertEqual(doc["outputs"][0]["parameters"]["binary_data_size"], 64 << 20)
        self.assertEqual(len(out) - n, 64 << 20)
        self.assertTrue(out[n:] == np.tile(a, reps).tobytes(), "64 MiB output bytes")
        self.assert_healthy()

    def test_keep_alive_reuse_after_binary_response(self):
        """Content-Length framing lets one connection carry several infers."""
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=30)
        try:
            for i, reps in enumerate((1, 3000, 2)):
                a = np.arange(256, dtype=np.uint16) + i
                body, headers = infer_body(tile_inputs(a, "UINT16", [reps], binary=True),
                                           parameters={"binary_data_output": True})
                conn.request("POST", infer_path(), body, headers)
                resp = conn.getresponse()
                out = resp.read()
                self.assertEqual(resp.status, 200, out[:200])
                doc, t = parse_infer_response(resp, out)
                self.assert_output(doc, t, np.tile(a, reps), "UINT16")
        finally:
            conn.close()


    def test_large_json_outputs(self):
        """Big JSON bodies (above the streaming size) are valid, flat and exact."""
        cases = [("FP64", (1024,), [1024]), ("FP32", (32, 32), [32, 32]), ("BYTES", (997,), [400]),
                 ("INT8", (256,), [16384]), ("BOOL", (3, 333), [4000, 1]), ("COMPLEX64", (512,), [1024])]
        for datatype, shape, reps in cases:
            with self.subTest(datatype=datatype):
                a = make_tensor(datatype, shape, self.rng)
                resp, doc, t = self.infer(tile_inputs(a, datatype, reps, binary=True), request_id="big-json")
                self.assertEqual(doc["id"], "big-json")
                self.assertEqual(resp.getheader("Content-Type"), "application/json")
                self.assert_output(doc, t, np.tile(a, reps), datatype)
                self.assertTrue(resp.getheader("X-Request-Id"))

    def test_large_bytes_binary_output(self):
        a = make_tensor("BYTES", (997,), self.rng)
        reps = 400
        _, doc, t = self.infer(tile_inputs(a, "BYTES", [reps], binary=True),
                               parameters={"binary_data_output": True})
        want = np.tile(a, reps)
        self.assertGreater(len(to_binary(want, "BYTES")), 16 << 20)
        self.assert_output(doc, t, want, "BYTES")

    def test_large_compressed_json_output(self):
        a = make_tensor("FP32", (1024,), self.rng)
        body, headers = infer_body(tile_inputs(a, "FP32", [1024], binary=True))
        resp, out = self.post(infer_path(), body, dict(headers, **{"Accept-Encoding": "gzip"}))
        self.assertEqual(resp.status, 200, out[:200])
        self.assertEqual(resp.getheader("Content-Encoding"), "gzip")
        doc, t = parse_infer_response(resp, out)
        self.assert_output(doc, t, np.tile(a, 1024), "FP32")

    def test_large_compressed_binary_output(self):
        a = make_tensor("FP32", (1024,), self.rng)
        reps = 4096  # 16 MiB
        for encoding in ("gzip", "deflate"):
            with self.subTest(encoding=encoding):
                body, headers = infer_body(tile_inputs(a, "FP32", [reps], binary=True),
                                           parameters={"binary_data_output": True})
                resp, out = self.post(infer_path(), body, dict(headers, **{"Accept-Encoding": encoding}))
                self.assertEqual(resp.status, 200, out[:200])
                self.assertEqual(resp.getheader("Content-Encoding"), encoding)
                self.assertLess(len(out), 16 << 20)
                doc, t = parse_infer_response(resp, out)
                self.assert_output(doc, t, np.tile(a, reps), "FP32")

    def test_keep_alive_after_errors(self):
        """An error answer leaves the connection usable (or says Connection: close)."""
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=30)
        a = np.arange(4, dtype=np.int64)
        good, gh = infer_body(tile_inputs(a, "INT64", [2]))
        bad, bh = infer_body(tile_inputs(a, "INT64", [2, 2]))
        try:
            for body, headers, status in ((bad, bh, 400), (good, gh, 200), (b"{", {}, 400), (good, gh, 200)):
                conn.request("POST", infer_path(), body, headers)
                resp = conn.getresponse()
                out = resp.read()
                self.assertEqual(resp.status, status, out)
                if status == 200:
                    self.assertEqual(parse_infer_response(resp, out)[1]["output"].tolist(), np.tile(a, 2).tolist())
        finally:
            conn.close()


# ---------------------------------------------------------------------------
class Drain(unittest.TestCase):
    def test_sigterm_drains_in_flight_stream(self):
        d = Daemon("--stream-chunk", "64K")
        try:
            block = np.arange(1024, dtype=np.float32)
            reps = 1 << 16                      # 4 KiB * 65536 = 256 MiB
            pattern = block.tobytes()
            # An idle keep-alive connection opened before the signal.
            idle = http.client.HTTPConnection(d.host, d.port, timeout=10)
            idle.request("GET", "/v2/health/ready")
            r = idle.getresponse()
            r.read()
            self.assertEqual(r.status, 200)

            conn = http.client.HTTPConnection(d.host, d.port, timeout=60)
            body, headers = infer_body(tile_inputs(block, "FP32", [reps], binary=True),
                                       parameters={"binary_data_output": True})
            conn.request("POST", infer_path(), body, headers)
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            n = int(resp.getheader("Inference-Header-Content-Length"))
            total = int(resp.getheader("Content-Length"))
            self.assertEqual(total - n, 256 << 20)
            head = resp.read(n)
            self.assertEqual(json.loads(head)["outputs"][0]["parameters"]["binary_data_size"], 256 << 20)
            first = resp.read(1 << 20)
            self.assertEqual(first, pattern * 256)

            d.proc.send_signal(signal.SIGTERM)
            # The drain has begun (its log line) and the daemon is still there.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any('"event":"drain"' in line for line in d.log_lines()):
                time.sleep(0.02)  # a poll interval: the log line decides
            self.assertTrue(any('"event":"drain"' in line for line in d.log_lines()), "no drain log line")
            self.assertIsNone(d.proc.poll(), "the daemon waits for the in-flight request")

            # Readiness while draining: 503 {"error"} on the open connection, or the
            # connection is closed; new connections get 503 or are refused.
            try:
                idle.request("GET", "/v2/health/ready")
                r = idle.getresponse()
                rb = r.read()
                self.assertEqual(r.status, 503, rb)
                self.assertIsInstance(json.loads(rb)["error"], str)
            except (http.client.HTTPException, OSError):
                pass  # the server closed the idle connection: acceptable while draining
            finally:
                idle.close()
            try:
                c2 = http.client.HTTPConnection(d.host, d.port, timeout=2)
                c2.request("GET", "/v2/health/ready")
                r = c2.getresponse()
                rb = r.read()
                self.assertEqual(r.status, 503, rb)
                c2.close()
            except (http.client.HTTPException, OSError):
                pass  # new connections refused: acceptable while draining

            # The in-flight response still completes, byte for byte.
            got = len(first)
            while True:
                chunk = resp.read(1 << 22)
                if not chunk:
                    break
                off = got % len(pattern)
                want = (pattern * (len(chunk) // len(pattern) + 2))[off:off + len(chunk)]
                self.assertTrue(chunk == want, f"bytes at offset {got}")
                got += len(chunk)
                time.sleep(0.002)
            self.assertEqual(got, 256 << 20)
            conn.close()
            self.assertEqual(d.proc.wait(30), 0, "exit status after drain")
        finally:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
            d.log.close()


if __name__ == "__main__":
    unittest.main()
