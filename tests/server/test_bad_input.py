"""Bad input: every malformed, oversized or unsupported request gets a 4xx.

A table of cases, one test each: the status (400, 413, 415 or 406), a JSON
error body naming the problem, and a normal request answered right after,
so no bad request leaves the daemon broken. Raw-socket cases cover what
http.client cannot send: bodies shorter or longer than their Content-Length,
broken header framing. Loopback only; one daemon with small limits.

    cd tests/server && TILED_BIN=../../build/tiled /usr/bin/python3 -m unittest -v test_bad_input
"""
import gzip
import io
import json
import socket
import struct
import unittest
import zlib

import numpy as np

from harness.daemon import WRAP, Daemon, read_until_close

# Limits small enough to reach with small requests.
MAX_BODY = 64 << 10
MAX_OUTPUT = 64 << 10          # in-memory bodies (up to the stream threshold)
STREAM_THRESHOLD = 1 << 20
MAX_STREAM = 4 << 20
MAX_DEPTH = 16
SLACK = 10 if WRAP else 1      # timing allowance under a wrapper such as valgrind

JSON = {"Content-Type": "application/json"}
RAW = {"Content-Type": "application/octet-stream"}
NPY = {"Content-Type": "application/x-npy"}


def jdoc(dtype="int32", shape=(2,), data=(1, 2), **extra):
    """A /v1/tile JSON document (fields may be overridden or added)."""
    doc = {"input": {"dtype": dtype, "shape": list(shape), "data": list(data)}, "repeats": [2]}
    doc.update(extra)
    return json.dumps(doc).encode()


def npy(array, **kw):
    buf = io.BytesIO()
    np.save(buf, array, **kw)
    return buf.getvalue()


def npy_raw(descr, shape, data, fortran=False):
    """A hand-built .npy v1.0 file (for headers numpy would not write)."""
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, fortran, "".join(f"{n}, " for n in shape) if len(shape) != 1 else f"{shape[0]},")
    pad = 64 - (10 + len(d) + 1) % 64
    header = (d + " " * pad + "\n").encode()
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def v2_body(inputs, tail=b"", header_len=None):
    head = json.dumps({"inputs": inputs}).encode()
    headers = {"Content-Type": "application/octet-stream",
               "Inference-Header-Content-Length": str(len(head) if header_len is None else header_len)}
    return head + tail, headers


def v2_case(inputs, tail=b"", header_len=None):
    body, headers = v2_body(inputs, tail, header_len)
    return "POST", "/v2/models/tile/infer", body, headers


V2_REPEATS = {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}


def deep(n):
    return b'{"input": {"dtype": "int32", "data": ' + b"[" * n + b"1" + b"]" * n + b'}, "repeats": [1]}'


# (name, method, path, body, headers, status, fragment of "error")
CASES = [
    # ---- JSON framing and syntax
    ("json_truncated_document", "POST", "/v1/tile", b'{"input": {"dtype": "int32", "sha', JSON, 400, "invalid JSON"),
    ("json_empty_body", "POST", "/v1/tile", b"", JSON, 400, "unexpected end of input"),
    ("json_not_an_object", "POST", "/v1/tile", b"[1, 2]", JSON, 400, "must be an object"),
    ("json_trailing_garbage", "POST", "/v1/tile", jdoc() + b" x", JSON, 400, "invalid JSON"),
    ("json_bare_nan_literal", "POST", "/v1/tile",
     b'{"input": {"dtype": "float32", "shape": [1], "data": [NaN]}, "repeats": [1]}', JSON, 400, "invalid JSON"),
    ("json_nesting_beyond_max_depth", "POST", "/v1/tile", deep(MAX_DEPTH + 4), JSON, 400,
     f"nesting deeper than {MAX_DEPTH}"),
    ("json_nesting_30k_deep", "POST", "/v1/tile", deep(30000), JSON, 400, f"nesting deeper than {MAX_DEPTH}"),
    ("json_nesting_in_unknown_key", "POST", "/v1/tile",
     b'{"x": ' + b"[" * 1000 + b"]" * 1000 + b', "input": {}}', JSON, 400,
     "unknown key 'x'"),
    ("json_invalid_utf8_in_string_data", "POST", "/v1/tile",
     b'{"input": {"dtype": "string", "shape": [1], "data": ["a\xff\xfeb"]}, "repeats": [1]}', JSON, 400,
     "invalid UTF-8"),
    ("json_invalid_utf8_in_dtype", "POST", "/v1/tile",
     b'{"input": {"dtype": "str\xc3\x28ing", "shape": [1], "data": ["a"]}, "repeats": [1]}', JSON, 400,
     "invalid UTF-8"),
    ("json_overlong_utf8", "POST", "/v1/tile",
     b'{"input": {"dtype": "string", "shape": [1], "data": ["\xc0\xaf"]}, "repeats": [1]}', JSON, 400,
     "invalid UTF-8"),
    ("json_utf8_encoded_surrogate", "POST", "/v1/tile",
     b'{"input": {"dtype": "string", "shape": [1], "data": ["\xed\xa0\x80"]}, "repeats": [1]}', JSON, 400,
     "invalid UTF-8"),
    ("json_truncated_utf8_sequence", "POST", "/v1/tile",
     b'{"input": {"dtype": "string", "shape": [1], "data": ["\xe6\x97"]}, "repeats": [1]}', JSON, 400,
     "invalid UTF-8"),
    ("json_unknown_key", "POST", "/v1/tile", jdoc(foo=1), JSON, 400, "unknown key 'foo'"),
    ("json_missing_input", "POST", "/v1/tile", b'{"repeats": [1]}', JSON, 400, 'has no "input"'),
    ("json_missing_repeats", "POST", "/v1/tile", b'{"input": {"dtype": "int32", "shape": [1], "data": [1]}}',
     JSON, 400, "missing 'repeats'"),
    # ---- shapes and repeats
    ("json_negative_dim", "POST", "/v1/tile", jdoc(shape=(-2,)), JSON, 400, "dimensions must be >= 0"),
    ("json_fractional_dim", "POST", "/v1/tile", jdoc(shape=(2.5,)), JSON, 400, "must be an integer"),
    ("json_string_dim", "POST", "/v1/tile", jdoc(shape=("2",)), JSON, 400, "must be an integer"),
    ("json_negative_repeat", "POST", "/v1/tile", jdoc(repeats=[-1]), JSON, 400, "repeats[0] is -1"),
    ("json_fractional_repeat", "POST", "/v1/tile", jdoc(repeats=[1.5]), JSON, 400, "must be an integer"),
    ("json_string_repeat", "POST", "/v1/tile", jdoc(repeats=["2"]), JSON, 400, "must be an integer"),
    ("json_repeat_beyond_int64", "POST", "/v1/tile", jdoc(repeats=[1 << 64]), JSON, 400, "64-bit"),
    ("json_repeats_not_array", "POST", "/v1/tile", jdoc(repeats=2), JSON, 400, "repeats"),
    ("json_shape_product_overflow", "POST", "/v1/tile",
     jdoc(dtype="uint8", shape=(1 << 32, 1 << 32, 4), data=(1,), repeats=[1, 1, 1]), JSON, 413, "overflow"),
    ("json_rank_above_max", "POST", "/v1/tile", jdoc(shape=[1] * 65, data=(1,), repeats=[1] * 65), JSON, 400,
     "more than 64"),
    ("query_negative_dim", "POST", "/v1/tile?dtype=uint8&shape=-2&repeats=1", b"ab", RAW, 400,
     "dimensions must be >= 0"),
    ("query_fractional_dim", "POST", "/v1/tile?dtype=uint8&shape=2.0&repeats=1", b"ab", RAW, 400,
     "'2.0' is not a decimal integer"),
    ("query_negative_repeat", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=-1", b"ab", RAW, 400, "repeats[0] is -1"),
    ("query_fractional_repeat", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=1.5", b"ab", RAW, 400,
     "'1.5' is not a decimal integer"),
    ("query_word_repeat", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=two", b"ab", RAW, 400, "'two'"),
    ("query_empty_repeat_item", "POST", "/v1/tile?dtype=uint8&shape=2,1&repeats=1,,1", b"ab", RAW, 400, "empty"),
    ("query_repeat_beyond_int64", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=99999999999999999999", b"ab", RAW,
     400, "64-bit"),
    ("query_shape_product_overflow", "POST", "/v1/tile?dtype=uint8&shape=4294967296,4294967296,4&repeats=1,1,1",
     b"abcd", RAW, 413, "overflows 64 bits"),
    ("query_duplicate_parameter", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=1&repeats=2", b"ab", RAW, 400,
     "duplicate query parameter 'repeats'"),
    ("query_missing_shape", "POST", "/v1/tile?dtype=uint8&repeats=1", b"ab", RAW, 400, "shape"),
    # ---- dtype and data
    ("json_unknown_dtype", "POST", "/v1/tile", jdoc(dtype="int33"), JSON, 400, "unknown dtype 'int33'"),
    ("query_unknown_dtype", "POST", "/v1/tile?dtype=uint7&shape=2&repeats=1", b"ab", RAW, 400,
     "unknown dtype 'uint7'"),
    ("json_string_in_int32", "POST", "/v1/tile", jdoc(data=("abc", 2)), JSON, 400,
     "data[0] is a string, but dtype int32 needs numbers"),
    ("json_fraction_in_int8", "POST", "/v1/tile", jdoc(dtype="int8", data=(1.5, 2)), JSON, 400, "not an integer"),
    ("json_out_of_range_int8", "POST", "/v1/tile", jdoc(dtype="int8", data=(300, 2)), JSON, 400, "value 300 is out of range for int8"),
    ("json_negative_uint8", "POST", "/v1/tile", jdoc(dtype="uint8", data=(-1, 2)), JSON, 400, "value -1 is out of range for uint8"),
    ("json_bool_in_float32", "POST", "/v1/tile", jdoc(dtype="float32", data=(True, 2)), JSON, 400, "data[0] is true"),
    ("json_null_in_float32", "POST", "/v1/tile", jdoc(dtype="float32", data=(None, 2)), JSON, 400, "data[0] is null"),
    ("json_nan_in_int32", "POST", "/v1/tile", jdoc(data=("NaN", 2)), JSON, 400, "NaN"),
    ("json_infinity_in_int64", "POST", "/v1/tile", jdoc(dtype="int64", data=("Infinity", 2)), JSON, 400,
     "Infinity"),
    ("json_number_in_string_tensor", "POST", "/v1/tile", jdoc(dtype="string", data=(1, 2)), JSON, 400,
     "data[0] is a number, but dtype str needs strings"),
    ("json_complex_not_a_pair", "POST", "/v1/tile", jdoc(dtype="complex64", data=([1, 2, 3], [1, 2])), JSON, 400,
     "pair"),
    ("json_too_few_elements", "POST", "/v1/tile", jdoc(shape=(3,)), JSON, 400, "data has 2 elements but shape [3]"),
    ("json_too_many_elements", "POST", "/v1/tile", jdoc(shape=(1,)), JSON, 400, "data has 2 elements but shape [1]"),
    ("json_ragged_nested_data", "POST", "/v1/tile",
     b'{"input": {"dtype": "int32", "data": [[1, 2], [3]]}, "repeats": [1, 1]}', JSON, 400, "ragged"),
    ("raw_too_few_bytes", "POST", "/v1/tile?dtype=int32&shape=3&repeats=1", b"\0" * 8, RAW, 400,
     "body has 8 bytes but dtype int32 and shape [3] need 12"),
    ("raw_too_many_bytes", "POST", "/v1/tile?dtype=int32&shape=1&repeats=1", b"\0" * 8, RAW, 400,
     "body has 8 bytes"),
    ("raw_string_length_past_end", "POST", "/v1/tile?dtype=BYTES&shape=1&repeats=1", b"\xff\0\0\0ab", RAW, 400,
     "claims 255 bytes"),
    # ---- .npy
    ("npy_object_dtype", "POST", "/v1/tile?repeats=1", npy(np.array([1, "a"], dtype=object), allow_pickle=True),
     NPY, 400, "object"),
    ("npy_header_claims_more_data", "POST", "/v1/tile?repeats=1", npy(np.arange(10, dtype=np.int32))[:-8], NPY, 400,
     "needs 40 bytes after the header, the file has 32"),
    ("npy_shape_product_overflow", "POST", "/v1/tile?repeats=1,1,1",
     npy_raw("|u1", (1 << 32, 1 << 32, 4), b"\0" * 16), NPY, 413, "overflows 64 bits"),
    ("npy_negative_dim", "POST", "/v1/tile?repeats=1", npy_raw("<i4", (-2,), b"\0" * 8), NPY, 400, ">= 0"),
    # Empty strings take no body byte: their references are bounded at 5 bytes a byte of --max-body.
    ("npy_zero_width_strings", "POST", "/v1/tile?repeats=1", npy_raw("|S0", (10 ** 8,), b""), NPY, 413,
     f"tensor needs 1600000000 bytes, above the limit of {5 * MAX_BODY}"),
    ("npy_not_npy", "POST", "/v1/tile?repeats=1", b"hello, world", NPY, 400, "not a .npy file"),
    ("npy_header_length_past_end", "POST", "/v1/tile?repeats=1", b"\x93NUMPY\x01\x00\xff\x7f{'descr'", NPY, 400,
     "header"),
    ("npy_structured_dtype", "POST", "/v1/tile?repeats=1",
     npy(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])), NPY, 400, "structured"),
    ("npy_shape_in_query", "POST", "/v1/tile?repeats=1&shape=2", npy(np.arange(2, dtype=np.int32)), NPY, 400,
     "shape"),
    # ---- v2 (Open Inference Protocol)
    ("v2_binary_data_size_past_body", "POST", "/v2/models/tile/infer",
     *v2_body([{"name": "input", "shape": [2], "datatype": "INT32", "parameters": {"binary_data_size": 100}},
               V2_REPEATS], b"\0" * 8), 400, "binary_data_size 100"),
    ("v2_header_length_past_body", *v2_case([{"name": "input", "shape": [2], "datatype": "INT32", "data": [1, 2]},
                                             V2_REPEATS], header_len=100000), 400,
     "Inference-Header-Content-Length is 100000"),
    ("v2_header_length_not_a_number", *v2_case([{"name": "input", "shape": [2], "datatype": "INT32",
                                                 "data": [1, 2]}, V2_REPEATS], header_len="x"), 400,
     "Inference-Header-Content-Length"),
    ("v2_unknown_datatype", *v2_case([{"name": "input", "shape": [2], "datatype": "INT33", "data": [1, 2]},
                                      V2_REPEATS]), 400, "INT33"),
    ("v2_unknown_input", *v2_case([{"name": "input", "shape": [2], "datatype": "INT32", "data": [1, 2]},
                                   V2_REPEATS, {"name": "bogus", "shape": [1], "datatype": "INT64", "data": [1]}]),
     400, "bogus"),
    ("v2_data_length_mismatch", *v2_case([{"name": "input", "shape": [3], "datatype": "INT32", "data": [1, 2]},
                                          V2_REPEATS]), 400, "data has 2 elements but shape [3] needs 3"),
    ("v2_repeats_count_mismatch", *v2_case([{"name": "input", "shape": [2], "datatype": "INT32", "data": [1, 2]},
                                            {"name": "repeats", "shape": [2], "datatype": "INT64", "data": [1, 2]}]),
     400, "repeats has 2 values but input has rank 1"),
    ("v2_negative_repeat", *v2_case([{"name": "input", "shape": [2], "datatype": "INT32", "data": [1, 2]},
                                     {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [-3]}]),
     400, "-3"),
    # ---- query parameters, semantics
    ("raw_unknown_query_parameter", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=1&foo=1", b"ab", RAW, 400,
     "unknown query parameter 'foo'"),
    ("npy_with_dtype_parameter", "POST", "/v1/tile?repeats=1&dtype=int32", npy(np.arange(2, dtype=np.int32)), NPY,
     400, "dtype"),
    ("json_unknown_semantics", "POST", "/v1/tile", jdoc(semantics="foo"), JSON, 400, "unknown semantics 'foo'"),
    ("query_unknown_semantics", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=1&semantics=bar", b"ab", RAW, 400,
     "unknown semantics 'bar'"),
    ("onnx_repeats_count_mismatch", "POST", "/v1/tile", jdoc(repeats=[1, 2]), JSON, 400,
     "repeats has 2 values but input has rank 1"),
    ("directml_repeats_count_mismatch", "POST", "/v1/tile", jdoc(repeats=[1, 2], semantics="directml"), JSON, 400,
     "repeats has 2 values but input has rank 1 (semantics directml"),
    ("directml_zero_repeat", "POST", "/v1/tile", jdoc(repeats=[0], semantics="directml"), JSON, 400,
     "requires every repeat >= 1"),
    ("query_directml_zero_repeat", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=0&semantics=directml", b"ab", RAW,
     400, "requires every repeat >= 1"),
    ("directml_rank_above_8", "POST", "/v1/tile", jdoc(shape=[1] * 9, data=(1,), repeats=[1] * 9,
                                                         semantics="directml"), JSON, 400, "directml"),
    ("onnx1_with_repeats", "POST", "/v1/tile", jdoc(dtype="float32", semantics="onnx1", tiles=2, axis=0), JSON, 400,
     "'repeats' is not used by semantics onnx1"),
    ("onnx1_missing_axis", "POST", "/v1/tile",
     json.dumps({"input": {"dtype": "float32", "shape": [2], "data": [1, 2]}, "semantics": "onnx1",
                 "tiles": 2}).encode(), JSON, 400, "missing 'axis'"),
    ("onnx1_axis_out_of_range", "POST", "/v1/tile",
     json.dumps({"input": {"dtype": "float32", "shape": [2], "data": [1, 2]}, "semantics": "onnx1",
                 "tiles": 2, "axis": 3}).encode(), JSON, 400, "axis"),
    ("onnx_with_tiles", "POST", "/v1/tile", jdoc(tiles=2), JSON, 400, "'tiles' is not used by semantics onnx"),
    ("numpy_too_many_repeats", "POST", "/v1/tile", jdoc(repeats=[1] * 65, semantics="numpy"), JSON, 400, "more than 64 values"),
    # ---- sizes
    ("body_over_max_body", "POST", "/v1/tile?dtype=uint8&shape=70000&repeats=1", b"\0" * 70000, RAW, 413,
     f"exceeds the max-body limit of {MAX_BODY} bytes"),
    ("gzip_body_over_max_body_once_inflated", "POST", "/v1/tile?dtype=uint8&shape=200000&repeats=1",
     gzip.compress(b"\0" * 200000), {**RAW, "Content-Encoding": "gzip"}, 413,
     f"decompressed request body exceeds the max-body limit of {MAX_BODY} bytes"),
    ("output_over_max_output", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=50000", b"ab", RAW, 413,
     f"exceeds the max-output limit of {MAX_OUTPUT} bytes"),
    ("json_output_over_max_output", "POST", "/v1/tile", jdoc(dtype="uint8", repeats=[50000]), JSON, 413,
     "max-output"),
    ("streamed_output_over_max_output", "POST", "/v1/tile?dtype=uint8&shape=2&repeats=4000000", b"ab", RAW, 413,
     f"output of 8000000 bytes exceeds the max-output limit of {MAX_OUTPUT} bytes (--max-output)"),
    ("output_of_2_pow_62_bytes", "POST", "/v1/tile", jdoc(dtype="uint8", data=(1,), shape=(1,), repeats=[1 << 62]),
     JSON, 413, "bytes"),
    # ---- media types and codings
    ("missing_content_type", "POST", "/v1/tile", jdoc(), {}, 415, "missing Content-Type"),
    ("unsupported_content_type", "POST", "/v1/tile", jdoc(), {"Content-Type": "text/plain"}, 415, "'text/plain'"),
    ("multipart_content_type", "POST", "/v1/tile", b"--x\r\n\r\n--x--", {"Content-Type": "multipart/form-data; boundary=x"},
     415, "multipart/form-data"),
    ("unsatisfiable_accept", "POST", "/v1/tile", jdoc(), {**JSON, "Accept": "image/png"}, 406, "'image/png'"),
    ("accept_all_q0", "POST", "/v1/tile", jdoc(), {**JSON, "Accept": "application/json;q=0"}, 406, "Accept"),
    ("bfloat16_as_npy", "POST", "/v1/tile?dtype=bfloat16&shape=1&repeats=1", b"\0\0",
     {**RAW, "Accept": "application/x-npy"}, 406, "bfloat16 has no .npy form"),
    ("unknown_content_encoding", "POST", "/v1/tile", jdoc(), {**JSON, "Content-Encoding": "br"}, 415,
     "unsupported Content-Encoding 'br'"),
    ("corrupt_gzip_body", "POST", "/v1/tile", b"\x1f\x8b\x08\x00" + b"garbage" * 4,
     {**JSON, "Content-Encoding": "gzip"}, 400, "not valid gzip"),
    ("truncated_gzip_body", "POST", "/v1/tile", gzip.compress(jdoc())[:-12], {**JSON, "Content-Encoding": "gzip"},
     400, "not valid gzip"),
    ("gzip_body_labelled_deflate", "POST", "/v1/tile", gzip.compress(jdoc()), {**JSON, "Content-Encoding": "deflate"},
     400, "not valid deflate"),
    ("deflate_with_trailing_garbage", "POST", "/v1/tile", zlib.compress(jdoc())[:-4],
     {**JSON, "Content-Encoding": "deflate"}, 400, "not valid deflate"),
]


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--max-body", str(MAX_BODY), "--max-output", str(MAX_OUTPUT), "--max-stream", str(MAX_STREAM),
                       "--stream-threshold", str(STREAM_THRESHOLD), "--max-json-depth", str(MAX_DEPTH),
                       "--idle-timeout", "5")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"

    # ---- helpers -------------------------------------------------------------
    def assert_healthy(self):
        """The daemon is up and a normal request right after is answered correctly."""
        self.assertIsNone(self.d.proc.poll(), "the daemon exited")
        resp, body = self.d.request("POST", "/v1/tile?dtype=int16&shape=3&repeats=2",
                                    np.array([1, -2, 3], np.int16).tobytes(), RAW, timeout=10 * SLACK)
        self.assertEqual(resp.status, 200, body)
        self.assertEqual(np.frombuffer(body, np.int16).tolist(), [1, -2, 3, 1, -2, 3])

    def assert_error(self, resp, body, status, fragment):
        self.assertEqual(resp.status, status, body[:300])
        self.assertEqual(resp.getheader("Content-Type"), "application/json", body[:300])
        doc = json.loads(body)
        self.assertIsInstance(doc.get("error"), str, doc)
        self.assertIn(fragment, doc["error"])

    def connect(self, timeout=5):
        s = socket.create_connection((self.d.host, self.d.port), timeout=timeout * SLACK)
        return s

    @staticmethod
    def parse_responses(data):
        """Splits raw bytes into (status, headers, body) responses framed by Content-Length."""
        out = []
        while data:
            head, sep, rest = data.partition(b"\r\n\r\n")
            if not sep:
                raise AssertionError(f"incomplete response head: {data[:200]!r}")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers.setdefault(k.strip().lower(), []).append(v.strip())
            n = int(headers.get("content-length", ["0"])[0])
            out.append((status, headers, rest[:n]))
            data = rest[n:]
        return out

    def post_head(self, length, ctype="application/json", path="/v1/tile", extra=b""):
        return (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {length}\r\n").encode() + extra + b"\r\n"

    # ---- bodies that do not match their Content-Length --------------------------
    def test_truncated_body_then_client_closes(self):
        """Content-Length larger than what is sent, then the client goes away."""
        body = jdoc()
        for shut_write in (False, True):
            s = self.connect()
            s.sendall(self.post_head(len(body) + 1000) + body)
            # While the request waits for the rest of its body, others are served.
            self.assert_healthy()
            if shut_write:
                # A half-close: the body can never complete, the server must let go.
                s.shutdown(socket.SHUT_WR)
                data, closed = read_until_close(s)
                self.assertTrue(closed, "the server kept a connection whose body can never arrive")
                if data:  # an answer is optional, but then a 4xx
                    self.assertRegex(data[:13], rb"^HTTP/1\.1 4\d\d ", data[:300])
            s.close()
            self.assert_healthy()

    def test_many_truncated_bodies(self):
        """Many abandoned uploads in a row (some mid-header) leave nothing behind."""
        body = jdoc()
        for i in range(200):
            s = self.connect()
            s.sendall((self.post_head(len(body) + 1 + i) + body)[:len(body) + i])
            s.close()
        self.assert_healthy()
        resp, body = self.d.request("GET", "/metrics", timeout=10 * SLACK)
        self.assertEqual(resp.status, 200)

    def test_content_length_smaller_than_body(self):
        """The server reads Content-Length bytes; the rest is the next request (or nothing)."""
        body = jdoc()
        s = self.connect()
        s.sendall(self.post_head(10, extra=b"Connection: close\r\n") + body)
        data, closed = read_until_close(s)
        s.close()
        self.assertTrue(closed)
        responses = self.parse_responses(data)
        self.assertEqual(len(responses), 1, data[:500])
        status, headers, payload = responses[0]
        self.assertEqual(status, 400, payload)
        self.assertEqual(headers["content-type"], ["application/json"])
        self.assertIn("invalid JSON", json.loads(payload)["error"])
        self.assert_healthy()

    def test_content_length_smaller_than_body_keep_alive(self):
        """On a kept-alive connection the leftover bytes are a malformed request: refused, then closed."""
        body = jdoc()
        s = self.connect()
        s.sendall(self.post_head(10) + body + b"\r\n\r\n")
        data, closed = read_until_close(s)
        s.close()
        self.assertTrue(closed, "the connection stays open after a malformed request")
        head, _, rest = data.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400 "), data[:300])
        self.assertIn(b"Content-Type: application/json", head)
        self.assertTrue(rest.startswith(b'{"error":"invalid JSON'), rest[:200])
        self.assertIn(b"HTTP/1.1 400 ", rest, "the leftover bytes got no 400")
        self.assert_healthy()

    def test_malformed_content_length_gets_a_400_and_a_close(self):
        """A Content-Length that is not digits is a framing error (the framer refuses it before any
        parser reads the request): a 400, the connection closed, and the daemon unharmed."""
        for value in (b"abc", b"-5", b"1 2"):
            s = self.connect()
            s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: "
                      + value + b"\r\n\r\n" + jdoc())
            data, closed = read_until_close(s)
            s.close()
            self.assertTrue(closed, value)
            self.assertTrue(data.startswith(b"HTTP/1.1 400 "), (value, data[:200]))
            self.assertNotIn(b"HTTP/1.1 200", data, value)
        self.assert_healthy()

    def test_conflicting_content_lengths_are_refused(self):
        """Two different Content-Length values must be a 400 (RFC 9112 6.3), not a guess: taking
        either one lets the bytes after it pass as a second, smuggled request."""
        body = jdoc()
        smuggled = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"
        s = self.connect(timeout=2)
        s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\nContent-Length: {len(body) + len(smuggled)}\r\n\r\n".encode()
                  + body + smuggled)
        data, _ = read_until_close(s)
        s.close()
        self.assertTrue(data.startswith(b"HTTP/1.1 400 "), data[:300])
        self.assertNotIn(b"/smuggled", data, "the bytes after the first Content-Length ran as a request")
        self.assert_healthy()

    def test_unsupported_transfer_encoding(self):
        """A Transfer-Encoding other than chunked is refused at once (RFC 9112 6.1: 501), not left hanging."""
        body = jdoc()
        s = self.connect(timeout=2)
        s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: gzip, chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        data, _ = read_until_close(s)
        s.close()
        self.assertRegex(data[:13], rb"^HTTP/1\.1 (400|501) ", data[:300])
        self.assert_healthy()

    def test_content_length_over_max_body_answered_before_upload(self):
        """A declared oversize body gets its 413 at once, without uploading it."""
        for expect in (b"", b"Expect: 100-continue\r\n"):
            s = self.connect(timeout=2)
            s.sendall(self.post_head(1 << 40, ctype="application/octet-stream",
                                     path="/v1/tile?dtype=uint8&shape=1099511627776&repeats=1", extra=expect))
            data, closed = read_until_close(s)
            s.close()
            self.assertTrue(data.startswith(b"HTTP/1.1 413 "), (expect, data[:300]))
            self.assertIn(b"max-body", data)
        self.assert_healthy()

    def test_chunked_body_over_max_body(self):
        s = self.connect()
        chunk = b"\0" * 8192
        s.sendall(b"POST /v1/tile?dtype=uint8&shape=100000&repeats=1 HTTP/1.1\r\nHost: t\r\n"
                  b"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        try:
            for _ in range(13):
                s.sendall(b"2000\r\n" + chunk + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may stop reading once the limit is passed
        data, _ = read_until_close(s)
        s.close()
        status, headers, payload = self.parse_responses(data)[0]
        self.assertEqual(status, 413, payload)
        self.assertIn("max-body", json.loads(payload)["error"])
        self.assert_healthy()

    def test_endless_chunked_body_past_max_body_is_cut(self):
        """A chunked body refused for --max-body is read and dropped for at most --max-body more
        bytes (so a client that reads only once it has sent all still gets the 413); past that the
        413 is written at once and the connection closed, whatever the client keeps sending."""
        s = self.connect()
        chunk = b"%x\r\n" % 8192 + b"\0" * 8192 + b"\r\n"
        s.sendall(b"POST /v1/tile?dtype=uint8&shape=100000&repeats=1 HTTP/1.1\r\nHost: t\r\nX-Request-Id: endless-1\r\n"
                  b"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        sent, limit = 0, 32 << 20  # far past what loopback's socket buffers hold
        try:
            while sent < limit:
                s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data, closed = read_until_close(s)
        s.close()
        self.assertLess(sent, limit, "the server read the endless body to the end")
        self.assertTrue(closed)
        if data:  # the 413 may be lost to the reset that unread bytes cause
            self.assertTrue(data.startswith(b"HTTP/1.1 413 "), data[:300])
            self.assertIn(b"max-body", data)
        access = self.d.access_lines(lambda a: a["request_id"] == "endless-1")
        self.assertEqual([a["status"] for a in access], [413])
        self.assert_healthy()

    def test_truncated_chunked_body(self):
        # What matters is that the daemon closes, not how fast: a loaded
        # machine (sanitizer builds beside other jobs) has taken over 5 s.
        s = self.connect(timeout=20)
        s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n100\r\n{\"input\"")
        s.shutdown(socket.SHUT_WR)
        data, closed = read_until_close(s)
        s.close()
        self.assertTrue(closed)
        self.assert_healthy()

    def test_garbage_request_line(self):
        for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\0" * 40 + b"\r\n\r\n",  # a TLS hello
                     b"GET /v1/tile HTTP/9.9\r\n\r\n",
                     b"POST " + b"/v1/tile?" + b"a" * 70000 + b" HTTP/1.1\r\nHost: t\r\n\r\n"):
            s = self.connect()
            try:
                s.sendall(junk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            data, closed = read_until_close(s)
            s.close()
            self.assertTrue(closed, junk[:40])
            if data:
                self.assertRegex(data[:13], rb"^HTTP/1\.1 [45]\d\d ", junk[:40])
        self.assert_healthy()

    def test_too_many_query_parameters(self):
        path = "/v1/tile?dtype=uint8&shape=2&repeats=1&" + "&".join(f"p{i}=1" for i in range(40))
        resp, body = self.d.request("POST", path, b"ab", RAW)
        self.assert_error(resp, body, 400, "query parameter")
        self.assert_healthy()


class OutputLimits(unittest.TestCase):
    """Each size flag bounds what it names, however the output leaves: --max-output every
    output (held in memory below --stream-threshold, streamed above it), --max-stream the
    streamed ones; each 413 names its flag and value."""

    def tile(self, d, n):
        """POST /v1/tile of n uint8 output bytes: (status, body)."""
        resp, body = d.request("POST", f"/v1/tile?dtype=uint8&shape=1000&repeats={n // 1000}", bytes(1000), RAW)
        return resp.status, body

    def test_max_output_bounds_streamed_outputs_too(self):
        d = Daemon("--max-output", "1M")  # --stream-threshold stays 8M: 12 MB would be streamed
        try:
            for n in (12_000_000, 1_200_000):
                status, body = self.tile(d, n)
                self.assertEqual(status, 413, n)
                self.assertEqual(json.loads(body)["error"],
                                 f"output of {n} bytes exceeds the max-output limit of 1048576 bytes (--max-output)")
            status, body = self.tile(d, 1_000_000)
            self.assertEqual((status, len(body)), (200, 1_000_000))
        finally:
            self.assertEqual(d.stop(), 0)

    def test_max_stream_bounds_streamed_outputs(self):
        d = Daemon("--max-output", "16M", "--stream-threshold", "1M", "--max-stream", "4M")
        try:
            status, body = self.tile(d, 8_000_000)
            self.assertEqual(status, 413)
            self.assertEqual(json.loads(body)["error"],
                             "output of 8000000 bytes, streamed (above --stream-threshold), exceeds the max-stream "
                             "limit of 4194304 bytes (--max-stream)")
            status, body = self.tile(d, 20_000_000)
            self.assertEqual(status, 413)
            self.assertIn("(--max-output)", json.loads(body)["error"])
            status, body = self.tile(d, 2_000_000)
            self.assertEqual((status, len(body)), (200, 2_000_000))
        finally:
            self.assertEqual(d.stop(), 0)


def _make_case(method, path, body, headers, status, fragment):
    def test(self):
        resp, out = self.d.request(method, path, body, headers, timeout=30 * SLACK)
        self.assert_error(resp, out, status, fragment)
        self.assert_healthy()
    return test


for _name, _method, _path, _body, _headers, _status, _fragment in CASES:
    assert not hasattr(BadInput, f"test_case_{_name}"), _name
    setattr(BadInput, f"test_case_{_name}", _make_case(_method, _path, _body, _headers, _status, _fragment))


if __name__ == "__main__":
    unittest.main()
