"""gRPC through a second implementation of it: grpclib (PyPI), a gRPC client
written in Python on hyper-h2 -- an HTTP/2 stack of its own (framing, HPACK,
flow control, header validation), where tritonclient, KServe's SDK, grpcio
and perf_analyzer all share gRPC's C core. h2 checks what the server sends
(pseudo-headers first, lower-case names, no connection-specific headers,
trailers after the data, a final frame with END_STREAM) and fails the call
on any violation, so every call here passing says tiled's HTTP/2 framing of
gRPC holds for a peer other than the one it was first tried with.

Unary RPCs (server, model, health), ModelInfer for several datatypes over
raw and typed contents, errors as gRPC statuses, many calls in flight on one
connection with replies past every flow-control window, a request larger
than the server's initial window, the bidirectional ModelStreamInfer stream
(an error answered in the stream, the stream going on), grpclib's
grpc-timeout spellings, and TLS with ALPN h2.

    cd tests/server && TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest -v test_grpclib
"""

import asyncio
import os
import shutil
import ssl
import sys
import unittest

import numpy as np
import tritonclient.grpc.service_pb2 as pb
from grpclib.client import Channel, StreamStreamMethod, UnaryUnaryMethod
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.health.v1.health_grpc import HealthStub
from grpclib.health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse

sys.path.insert(0, os.path.dirname(__file__))
from harness.certs import make_certificate  # noqa: E402
from harness.daemon import Daemon  # noqa: E402

SERVICE = "/inference.GRPCInferenceService/"
DATATYPE = {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64", np.dtype(np.int64): "INT64",
            np.dtype(np.int8): "INT8", np.dtype(np.uint8): "UINT8", np.dtype(np.uint16): "UINT16",
            np.dtype(np.float16): "FP16", np.dtype(np.bool_): "BOOL"}


def unary(channel, name):
    return UnaryUnaryMethod(channel, SERVICE + name, getattr(pb, name + "Request"), getattr(pb, name + "Response"))


def infer_request(data, repeats, request_id=""):
    """ModelInferRequest with raw_input_contents, as tritonclient writes it."""
    req = pb.ModelInferRequest(model_name="tile", id=request_id)
    req.inputs.add(name="input", datatype=DATATYPE[data.dtype], shape=list(data.shape))
    req.inputs.add(name="repeats", datatype="INT64", shape=[len(repeats)])
    req.raw_input_contents.extend([data.tobytes(), np.array(repeats, dtype=np.int64).tobytes()])
    return req


def output_of(reply, dtype):
    out = reply.outputs[0]
    return np.frombuffer(reply.raw_output_contents[0], dtype=dtype).reshape(list(out.shape)), out


class Grpclib(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--grpc-port", "0")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"

    def run_with_channel(self, body, **channel_kw):
        async def main():
            ch = Channel("127.0.0.1", self.d.grpc_port, **channel_kw)
            try:
                return await body(ch)
            finally:
                ch.close()
        return asyncio.run(main())

    def test_server_model_and_health_calls(self):
        async def body(ch):
            self.assertTrue((await unary(ch, "ServerLive")(pb.ServerLiveRequest())).live)
            self.assertTrue((await unary(ch, "ServerReady")(pb.ServerReadyRequest())).ready)
            self.assertTrue((await unary(ch, "ModelReady")(pb.ModelReadyRequest(name="tile"))).ready)
            meta = await unary(ch, "ModelMetadata")(pb.ModelMetadataRequest(name="tile"))
            self.assertEqual(meta.name, "tile")
            self.assertEqual([t.name for t in meta.inputs], ["input", "repeats"])
            server = await unary(ch, "ServerMetadata")(pb.ServerMetadataRequest())
            self.assertTrue(server.name)
            health = await HealthStub(ch).Check(HealthCheckRequest(service=""))
            self.assertEqual(health.status, HealthCheckResponse.SERVING)
        self.run_with_channel(body)

    def test_infer_every_datatype_matches_numpy(self):
        rng = np.random.default_rng(5)
        cases = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(7),
                 rng.integers(-2**62, 2**62, (2, 3)), rng.integers(-128, 127, (5,), dtype=np.int8),
                 rng.integers(0, 255, (2, 2, 2), dtype=np.uint8), rng.integers(0, 65535, (4,), dtype=np.uint16),
                 rng.standard_normal((2, 3)).astype(np.float16), rng.random((3, 3)) < 0.5]

        async def body(ch):
            infer = unary(ch, "ModelInfer")
            for a in cases:
                repeats = [2] + [1] * (a.ndim - 1)
                reply = await infer(infer_request(a, repeats, request_id="lib-%s" % a.dtype))
                got, out = output_of(reply, a.dtype)
                self.assertEqual(out.datatype, DATATYPE[a.dtype])
                self.assertEqual(reply.id, "lib-%s" % a.dtype)
                np.testing.assert_array_equal(got, np.tile(a, repeats))
        self.run_with_channel(body)

    def test_typed_contents(self):
        async def body(ch):
            req = pb.ModelInferRequest(model_name="tile")
            t = req.inputs.add(name="input", datatype="FP32", shape=[2])
            t.contents.fp32_contents.extend([1.5, -2.0])
            r = req.inputs.add(name="repeats", datatype="INT64", shape=[1])
            r.contents.int64_contents.append(3)
            got, _ = output_of(await unary(ch, "ModelInfer")(req), np.float32)
            np.testing.assert_array_equal(got, np.tile(np.array([1.5, -2.0], np.float32), 3))
        self.run_with_channel(body)

    def test_errors_are_grpc_statuses(self):
        async def body(ch):
            req = infer_request(np.arange(4, dtype=np.int64), [2])
            del req.inputs[1]
            del req.raw_input_contents[1]
            with self.assertRaises(GRPCError) as cm:
                await unary(ch, "ModelInfer")(req)
            self.assertEqual(cm.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("missing input 'repeats'", cm.exception.message)
            req = infer_request(np.arange(4, dtype=np.int64), [2])
            req.model_name = "no-such-model"
            with self.assertRaises(GRPCError) as cm:
                await unary(ch, "ModelInfer")(req)
            self.assertNotEqual(cm.exception.status, Status.OK)
            self.assertIn("no-such-model", cm.exception.message)
            # The connection serves on after both.
            self.assertTrue((await unary(ch, "ServerLive")(pb.ServerLiveRequest())).live)
        self.run_with_channel(body)

    def test_many_calls_in_flight_past_the_flow_control_windows(self):
        """48 calls at once on one connection, each reply 2 MiB: past h2's and tiled's
        initial windows, so both sides' WINDOW_UPDATEs carry the data."""
        rng = np.random.default_rng(9)
        inputs = [rng.integers(0, 2**31, (256, 256), dtype=np.int64) for _ in range(48)]  # 512 KiB each

        async def body(ch):
            infer = unary(ch, "ModelInfer")
            replies = await asyncio.gather(*(infer(infer_request(a, [2, 2], "c%d" % i))
                                             for i, a in enumerate(inputs)))
            for i, (a, reply) in enumerate(zip(inputs, replies)):
                self.assertEqual(reply.id, "c%d" % i)
                got, _ = output_of(reply, np.int64)
                np.testing.assert_array_equal(got, np.tile(a, (2, 2)))
        self.run_with_channel(body)

    def test_request_larger_than_the_initial_window(self):
        a = np.random.default_rng(3).standard_normal(3 << 20)  # 24 MiB of FP64

        async def body(ch):
            got, _ = output_of(await unary(ch, "ModelInfer")(infer_request(a, [1]), timeout=120), np.float64)
            np.testing.assert_array_equal(got, a)
        self.run_with_channel(body)

    def test_stream_infer_answers_each_request_and_survives_an_error(self):
        async def body(ch):
            good = [np.arange(6, dtype=np.float32).reshape(2, 3) * k for k in (1, 2)]
            bad = infer_request(np.arange(3, dtype=np.int64), [2], "s-bad")
            del bad.inputs[1]
            del bad.raw_input_contents[1]
            async with StreamStreamMethod(ch, SERVICE + "ModelStreamInfer", pb.ModelInferRequest,
                                          pb.ModelStreamInferResponse).open() as stream:
                await stream.send_message(infer_request(good[0], [1, 2], "s-0"))
                first = await stream.recv_message()
                await stream.send_message(bad)
                second = await stream.recv_message()
                await stream.send_message(infer_request(good[1], [2, 1], "s-1"), end=True)
                third = await stream.recv_message()
                self.assertIsNone(await stream.recv_message())
            self.assertEqual(first.error_message, "")
            self.assertEqual(first.infer_response.id, "s-0")
            np.testing.assert_array_equal(output_of(first.infer_response, np.float32)[0], np.tile(good[0], (1, 2)))
            self.assertIn("missing input 'repeats'", second.error_message)
            self.assertEqual(third.infer_response.id, "s-1")
            np.testing.assert_array_equal(output_of(third.infer_response, np.float32)[0], np.tile(good[1], (2, 1)))
        self.run_with_channel(body)

    def test_grpclib_deadline_spellings_are_read(self):
        """grpclib writes grpc-timeout as whole seconds past 10 s ('30S') and in milliseconds
        below ('5000m'); tiled refuses a grpc-timeout it cannot read (INVALID_ARGUMENT), so a call
        answered in full says it read each spelling (the refusal: test_grpc_transport)."""
        a = np.arange(3, dtype=np.uint8)

        async def body(ch):
            for timeout in (30, 5, 2):
                reply = await unary(ch, "ModelInfer")(infer_request(a, [2]), timeout=timeout)
                np.testing.assert_array_equal(output_of(reply, np.uint8)[0], np.tile(a, 2))
        self.run_with_channel(body)


class GrpclibTls(unittest.TestCase):
    """grpclib over TLS (Python's ssl, ALPN h2) to the gRPC port with --tls-cert."""

    def test_infer_over_tls(self):
        cert, key = make_certificate()
        self.addCleanup(shutil.rmtree, os.path.dirname(cert))
        d = Daemon("--grpc-port", "0", "--tls-cert", cert, "--tls-key", key, scheme="https")
        try:
            ctx = ssl.create_default_context(cafile=cert)
            ctx.set_alpn_protocols(["h2"])
            a = np.arange(6, dtype=np.int64).reshape(3, 2)

            async def main():
                ch = Channel("127.0.0.1", d.grpc_port, ssl=ctx)
                try:
                    return await unary(ch, "ModelInfer")(infer_request(a, [1, 3]))
                finally:
                    ch.close()
            np.testing.assert_array_equal(output_of(asyncio.run(main()), np.int64)[0], np.tile(a, (1, 3)))
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
