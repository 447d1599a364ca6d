"""tiled's hand-written protobuf decoder against the protobuf package's
parser (upb, Google's), over a real gRPC channel.

Every request message tiled decodes by hand (tests/server/pbsamples.py) is
written in many other valid encodings by tests/server/pbreencode.py, from a
seeded RNG (packed/unpacked/split runs, repeated scalars and sub-messages,
repeated and partial map entries, unknown fields of every wire type incl.
nested groups, any field order, over-long varints, explicit defaults). The
bytes go to the daemon as they are (grpcio's generic calls, no serializer),
and the answer must be the answer to the canonical encoding of what the
protobuf package reads from the same bytes: the same status, message and
response bytes. For ModelInfer the output must also be numpy.tile of the
input the protobuf package reads. Bytes the protobuf package refuses (cut
short, invalid UTF-8 in a string field, a group left open) must be refused
with INVALID_ARGUMENT.

The fuzz target fuzz/fuzz_pbdiff.c does the same against protobuf-c,
without a channel. Run after make grpc-stubs:
  cd tests/server && ../../build/venv/bin/python -m unittest test_pb_differential
"""
import os
import random
import struct
import sys
import unittest

import grpc
import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "build", "grpc")]

import grpc_service_pb2 as pb  # noqa: E402  (make grpc-stubs)
import health_pb2  # noqa: E402
import pbreencode  # noqa: E402
import pbsamples  # noqa: E402
from harness.daemon import Daemon  # noqa: E402

# Encodings tried per request (the whole module takes a few seconds).
ENCODINGS = int(os.environ.get("PBDIFF_ENCODINGS", "12"))

NUMPY_OF = {"BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
            "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
            "FP16": np.float16, "BF16": ml_dtypes.bfloat16, "FP32": np.float32, "FP64": np.float64,
            "COMPLEX64": np.complex64, "COMPLEX128": np.complex128}
TYPED_FIELD = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
               "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
               "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
               "FP64": "fp64_contents", "BYTES": "bytes_contents"}


def from_raw(datatype, shape, raw):
    if datatype == "BYTES":
        items, i = [], 0
        while i < len(raw):
            (n,) = struct.unpack_from("<I", raw, i)
            items.append(raw[i + 4:i + 4 + n])
            i += 4 + n
        return np.array(items, dtype=object).reshape(shape)
    return np.frombuffer(raw, dtype=NUMPY_OF[datatype]).reshape(shape)


def input_arrays(req):
    """The request's inputs as numpy arrays, from the protobuf package's
    reading (typed contents, or the next raw_input_contents entry)."""
    out, raw = {}, list(req.raw_input_contents)
    for t in req.inputs:
        shape = tuple(t.shape)
        if raw:
            out[t.name] = from_raw(t.datatype, shape, raw.pop(0))
        else:
            values = list(getattr(t.contents, TYPED_FIELD[t.datatype]))
            dtype = object if t.datatype == "BYTES" else NUMPY_OF[t.datatype]
            out[t.name] = np.array(values, dtype=dtype).reshape(shape)
    return out


class Differential(unittest.TestCase):
    """One daemon per test: ModelStatistics answers must not see the
    inferences of another test."""

    def setUp(self):
        self.d = Daemon("--grpc-port", "0")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.d.grpc_port}")
        self.rng = random.Random(int(os.environ.get("PBDIFF_SEED", "22")))

    def tearDown(self):
        self.channel.close()
        self.assertEqual(self.d.stop(), 0, "daemon exit status")

    def call(self, rpc, data):
        """(status code, details, response bytes) of one raw call."""
        method = self.channel.unary_unary(rpc, request_serializer=None, response_deserializer=None)
        try:
            return grpc.StatusCode.OK, "", method(data, timeout=60)
        except grpc.RpcError as e:
            return e.code(), e.details(), None

    def check_encodings(self, rpc, msg, on_answer=None):
        canonical = msg.SerializeToString()
        want = self.call(rpc, canonical)
        for i in range(ENCODINGS):
            data = pbreencode.reencode(msg, self.rng)
            read = type(msg).FromString(data)  # the reference reading of these bytes
            ref = read.SerializeToString()
            expect = want if ref == canonical else self.call(rpc, ref)
            got = self.call(rpc, data)
            self.assertEqual(got, expect, f"{rpc}: encoding {data.hex()} of {msg} (canonical {ref.hex()})")
            if on_answer:
                on_answer(read, got, data)

    def test_model_infer(self):
        def tiled_output(read, got, data):
            if got[0] != grpc.StatusCode.OK:
                return
            resp = pb.ModelInferResponse.FromString(got[2])
            arrays = input_arrays(read)
            expect = np.tile(arrays["input"], tuple(int(r) for r in arrays["repeats"]))
            out = resp.outputs[0]
            self.assertEqual(out.datatype, read.inputs[0].datatype)
            value = from_raw(out.datatype, tuple(out.shape), resp.raw_output_contents[0])
            self.assertEqual(value.shape, expect.shape, data.hex())
            self.assertTrue(np.array_equal(value, expect), f"{data.hex()}: {value} != {expect}")
            self.assertEqual(resp.id, read.id)
            self.assertEqual(resp.model_name, read.model_name)

        answered = 0
        for rpc, msg in pbsamples.infer_requests(pb):
            with self.subTest(request=str(msg)[:200]):
                self.check_encodings(rpc, msg, tiled_output)
                answered += self.call(rpc, msg.SerializeToString())[0] == grpc.StatusCode.OK
        self.assertGreaterEqual(answered, 12, "the samples that tiled answers")

    def test_other_requests(self):
        for rpc, msg in pbsamples.small_requests(pb, health_pb2):
            with self.subTest(rpc=rpc, request=str(msg)):
                self.check_encodings(rpc, msg)

    def test_bytes_the_parser_refuses_are_refused(self):
        """Bytes protobuf does not read as the request (cut short, a string
        field not UTF-8, a group left open, a stray end of group) are
        refused with INVALID_ARGUMENT, whatever RPC they go to."""
        samples = pbsamples.infer_requests(pb)[:6] + pbsamples.small_requests(pb, health_pb2)
        tried = 0
        for rpc, msg in samples:
            data = pbreencode.reencode(msg, self.rng)
            bad = [data + b"\x0b", data + b"\x0c", b"\x5b\x08\x01" + data, data + b"\x08", data + b"\x0d\x01"]
            if data:
                bad += [data[:self.rng.randrange(len(data))] for _ in range(3)]
            bad.append(data + b"\x0a\x02\xc3\x28")  # field 1 (a string everywhere here): not UTF-8
            for b in bad:
                try:
                    type(msg).FromString(b)
                    continue  # still a message (cut at a field's end)
                except Exception:  # noqa: BLE001  (protobuf's DecodeError)
                    pass
                tried += 1
                code, details, _ = self.call(rpc, b)
                self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, f"{rpc}: {b.hex()} answered {details!r}")
        self.assertGreater(tried, 100)


if __name__ == "__main__":
    unittest.main()
