"""KServe's Python SDK (kserve==0.21.0 from PyPI, unmodified) against tiled's v2 endpoints,
over REST and over gRPC.

`InferenceRESTClient` sends every request the way a KServe user's code does
(InferRequest.to_rest(): "model_name" in the body, "data": null beside an
empty binary tensor), as JSON and as binary tensor data; every datatype it can
send, ranks 0 to 4, is compared with numpy.tile. Its health calls are used as
they are; the metadata documents are checked against KServe's own response
models. Run with the virtual environment scripts/venv.sh makes:
  cd tests/server && ../../build/venv/bin/python -m unittest test_kserve -v
"""
import asyncio
import os
import sys
import unittest

import httpx
import numpy as np
import grpc
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig
from kserve.protocol.infer_type import RequestedOutput
from kserve.protocol.rest.v2_datamodels import ModelMetadataResponse, ServerMetadataResponse

sys.path.insert(0, os.path.dirname(__file__))
from harness.daemon import Daemon  # noqa: E402
from harness.docs import readme_python_output  # noqa: E402

# What InferInput.set_data_from_numpy accepts, with the v2 name it sends.
DATATYPES = {"BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
             "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
             "FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "BYTES": np.object_}
# The SDK itself refuses FP16 as JSON ("Sending FP16 data via JSON is not supported").
JSON_REFUSED_BY_SDK = {"FP16"}
SHAPES = [(), (3,), (2, 3), (2, 1, 3), (1, 2, 2, 3)]
STRINGS = [b"", b"ab", "h\u00e9llo".encode(), b"x" * 40]


def sample(datatype, shape, rng):
    n = int(np.prod(shape))
    if datatype == "BYTES":
        return np.array([STRINGS[i % len(STRINGS)] for i in range(n)], dtype=object).reshape(shape)
    return np.asarray(rng.standard_normal(shape) * 50).astype(DATATYPES[datatype])


def as_bytes(a):
    """KServe hands BYTES outputs back as str; compare them as the bytes that were sent."""
    return np.vectorize(lambda x: x.encode() if isinstance(x, str) else x, otypes=[object])(a)


class SDKCase(unittest.TestCase):
    """A daemon and one SDK client on an event loop of the class's own (a grpc.aio
    channel belongs to the loop it is made in, so the client is made inside it)."""
    daemon_args = ()
    seed = 0

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(*cls.daemon_args)
        cls.base = f"http://127.0.0.1:{cls.d.port}"
        cls.loop = asyncio.new_event_loop()
        cls.client = cls.loop.run_until_complete(cls.connect())
        cls.rng = np.random.default_rng(cls.seed)

    @classmethod
    def tearDownClass(cls):
        cls.loop.run_until_complete(cls.client.close())
        cls.loop.close()
        assert cls.d.stop() == 0

    def run_async(self, coro):
        return self.loop.run_until_complete(coro)

    def assert_tiled(self, result, a, datatype, repeats):
        """The SDK's result is numpy.tile(a, repeats), named and typed as sent."""
        out = result.outputs[0]
        self.assertEqual((out.name, out.datatype), ("output", datatype))
        got, want = out.as_numpy(), np.tile(a, repeats)
        if datatype == "BYTES":
            got = as_bytes(got)
        self.assertEqual(got.shape, want.shape)
        self.assertTrue(np.array_equal(got, want), (got.ravel()[:4], want.ravel()[:4]))


class KServeSDK(SDKCase):
    seed = 21

    @classmethod
    async def connect(cls):
        return InferenceRESTClient(RESTConfig(protocol="v2", timeout=60))

    def infer(self, a, datatype, repeats, binary, model_name="tile"):
        inp = InferInput("input", list(a.shape), datatype)
        inp.set_data_from_numpy(a, binary_data=binary)
        rep = InferInput("repeats", [len(repeats)], "INT64")
        rep.set_data_from_numpy(np.array(repeats, dtype=np.int64), binary_data=binary)
        outputs = [RequestedOutput("output", parameters={"binary_data": binary})]
        request = InferRequest(model_name, [inp, rep], request_outputs=outputs)
        return self.run_async(self.client.infer(self.base, request, model_name))

    def test_every_datatype_rank_0_to_4_json_and_binary(self):
        calls = 0
        for datatype in DATATYPES:
            for shape in SHAPES:
                for binary in (False, True):
                    if datatype in JSON_REFUSED_BY_SDK and not binary:
                        continue
                    with self.subTest(datatype=datatype, shape=shape, binary=binary):
                        a = sample(datatype, shape, self.rng)
                        repeats = [2, 1, 3, 1][:len(shape)]
                        self.assert_tiled(self.infer(a, datatype, repeats, binary), a, datatype, repeats)
                        calls += 1
        self.assertEqual(calls, len(DATATYPES) * len(SHAPES) * 2 - len(JSON_REFUSED_BY_SDK) * len(SHAPES))

    def test_health_calls(self):
        self.assertTrue(self.run_async(self.client.is_server_live(self.base)))
        self.assertTrue(self.run_async(self.client.is_server_ready(self.base)))
        self.assertTrue(self.run_async(self.client.is_model_ready(self.base, "tile")))
        self.assertFalse(self.run_async(self.client.is_model_ready(self.base, "resnet")))

    def test_metadata_matches_kserve_models(self):
        server = httpx.get(f"{self.base}/v2").json()
        ServerMetadataResponse.model_validate(server, strict=True)
        self.assertIn("binary_tensor_data", server["extensions"])
        model = httpx.get(f"{self.base}/v2/models/tile").json()
        meta = ModelMetadataResponse.model_validate(model, strict=True)
        self.assertEqual(meta.name, "tile")
        self.assertEqual([t.name for t in meta.inputs], ["input", "repeats"])
        self.assertEqual([t.name for t in meta.outputs], ["output"])

    def test_errors_surface_with_our_message(self):
        a = np.arange(4, dtype=np.float32)
        with self.assertRaises(httpx.HTTPStatusError) as cm:
            self.infer(a, "FP32", [1, 2], binary=True)
        self.assertEqual(cm.exception.response.status_code, 400)
        self.assertIn("repeats has 2 values but input has rank 1", str(cm.exception))
        with self.assertRaises(httpx.HTTPStatusError) as cm:
            self.infer(a, "FP32", [2], binary=False, model_name="resnet")
        self.assertEqual(cm.exception.response.status_code, 404)

    def test_readme_snippet(self):
        """The KServe example of docs/protocols.md runs and prints what it shows."""
        self.assertEqual(*readme_python_output("from kserve import", self.d.port))


class KServeGRPC(SDKCase):
    """`InferenceGRPCClient` as a KServe user creates it (its default retry policy on):
    numpy inputs go as raw_input_contents, Python lists as typed `contents`."""
    daemon_args = ("--grpc-port", "0")
    seed = 22

    @classmethod
    async def connect(cls):
        return InferenceGRPCClient(f"127.0.0.1:{cls.d.grpc_port}")

    def infer(self, a, datatype, repeats, typed, model_name="tile"):
        if typed:  # lists: the SDK fills the datatype's `contents` field
            data = [x.decode() if isinstance(x, bytes) else x for x in a.ravel().tolist()]
            inp = InferInput("input", list(a.shape), datatype, data=data)
            rep = InferInput("repeats", [len(repeats)], "INT64", data=list(repeats))
        else:
            inp = InferInput("input", list(a.shape), datatype)
            inp.set_data_from_numpy(a, binary_data=True)
            rep = InferInput("repeats", [len(repeats)], "INT64")
            rep.set_data_from_numpy(np.array(repeats, dtype=np.int64), binary_data=True)
        return self.run_async(self.client.infer(InferRequest(model_name, [inp, rep], request_id="k-1")))

    def test_every_datatype_rank_0_to_4_raw_and_typed(self):
        calls = 0
        for datatype in DATATYPES:
            for shape in SHAPES:
                for typed in (False, True):
                    if typed and datatype == "FP16":  # no typed field: raw only
                        continue
                    with self.subTest(datatype=datatype, shape=shape, typed=typed):
                        a = sample(datatype, shape, self.rng)
                        repeats = [2, 1, 3, 1][:len(shape)]
                        result = self.infer(a, datatype, repeats, typed)
                        self.assertEqual(result.id, "k-1")
                        self.assert_tiled(result, a, datatype, repeats)
                        calls += 1
        self.assertEqual(calls, len(DATATYPES) * len(SHAPES) * 2 - len(SHAPES))

    def test_health_calls(self):
        self.assertTrue(self.run_async(self.client.is_server_live()))
        self.assertTrue(self.run_async(self.client.is_server_ready()))
        self.assertTrue(self.run_async(self.client.is_model_ready("tile")))

    def test_errors_surface_with_our_message(self):
        """The SDK raises our status and message, and logs them on its "kserve" logger
        (captured here, so its traceback does not read as a failure in the suite's output)."""
        a = np.arange(4, dtype=np.float32)
        with self.assertLogs("kserve", "ERROR") as logged, self.assertRaises(grpc.aio.AioRpcError) as cm:
            self.infer(a, "FP32", [1, 2], typed=False)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("repeats has 2 values but input has rank 1", cm.exception.details())
        self.assertIn("repeats has 2 values", "\n".join(logged.output))
        with self.assertLogs("kserve", "ERROR") as logged, self.assertRaises(grpc.aio.AioRpcError) as cm:
            self.infer(a, "FP32", [2], typed=True, model_name="resnet")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("unknown model 'resnet'", cm.exception.details())
        self.assertIn("unknown model 'resnet'", "\n".join(logged.output))


if __name__ == "__main__":
    unittest.main()
