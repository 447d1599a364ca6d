"""The Open Inference Protocol over gRPC (`serve --grpc-port`), on loopback.

Two clients drive the daemon:
- tritonclient.grpc from PyPI, unmodified: health, metadata, config,
  statistics, inference for every datatype it sends at ranks 0-6 against
  numpy.tile, the model's versions, errors (the same message as the same
  mistake over HTTP, and the gRPC status of that HTTP status), shared memory.
- a client built from the vendored .proto files (api/proto/, compiled by
  `make grpc-stubs` into build/grpc/tiled.desc) for what tritonclient never
  sends: typed `contents`, mixed and invalid styles, the error paths, size
  limits, deadlines, cancellation, drain, API keys as metadata, Server-Timing
  trailers, /metrics by transport, grpc.health.v1.

Framing and HTTP/2-level cases are tests/server/test_grpc_transport.py's.
Run with the virtual environment scripts/venv.sh makes, after make grpc-stubs:
  cd tests/server && ../../build/venv/bin/python -m unittest test_grpc
"""
import asyncio
import itertools
import json
import os
import queue
import re
import shutil
import signal
import struct
import sys
import tempfile
import time
import types
import unittest
import urllib.error
import urllib.request
import uuid

import grpc
import ml_dtypes
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.service_pb2 as triton_pb2
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

sys.path.insert(0, os.path.dirname(__file__))
from harness.certs import make_certificate  # noqa: E402
from harness.daemon import Daemon, wait_for  # noqa: E402
from harness.docs import readme_python_output  # noqa: E402
from harness.triton import error_of  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PROTO_DIR = os.path.join(ROOT, "api", "proto")
DESCRIPTORS = os.path.join(ROOT, "build", "grpc", "tiled.desc")
SERVICE = "inference.GRPCInferenceService"
MIB = 1 << 20

# The gRPC status tiled gives an error of each HTTP status (server/service/reply.c).
GRPC_OF_HTTP = {"400": grpc.StatusCode.INVALID_ARGUMENT, "401": grpc.StatusCode.UNAUTHENTICATED,
                "404": grpc.StatusCode.NOT_FOUND, "413": grpc.StatusCode.RESOURCE_EXHAUSTED,
                "500": grpc.StatusCode.INTERNAL, "501": grpc.StatusCode.UNIMPLEMENTED,
                "503": grpc.StatusCode.UNAVAILABLE}

# Every datatype tritonclient sends, as numpy types (BF16 through ml_dtypes,
# BYTES as object arrays of bytes).
CLIENT_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                 np.float16, np.float32, np.float64, ml_dtypes.bfloat16, np.object_]
# Rank: (input shape, repeats).
SHAPES = {0: ((), ()), 1: ((3,), (2,)), 2: ((2, 3), (2, 2)), 3: ((2, 1, 3), (1, 3, 2)),
          4: ((1, 2, 2, 3), (2, 1, 1, 2)), 5: ((2, 1, 2, 1, 3), (1, 2, 1, 3, 1)),
          6: ((1, 2, 1, 2, 1, 3), (2, 1, 2, 1, 2, 1))}
# The datatypes InferTensorContents has a field for: (numpy type, field).
TYPED = {"BOOL": (np.bool_, "bool_contents"), "INT8": (np.int8, "int_contents"),
         "INT16": (np.int16, "int_contents"), "INT32": (np.int32, "int_contents"),
         "INT64": (np.int64, "int64_contents"), "UINT8": (np.uint8, "uint_contents"),
         "UINT16": (np.uint16, "uint_contents"), "UINT32": (np.uint32, "uint_contents"),
         "UINT64": (np.uint64, "uint64_contents"), "FP32": (np.float32, "fp32_contents"),
         "FP64": (np.float64, "fp64_contents"), "BYTES": (np.object_, "bytes_contents")}
NUMPY_OF = {name: t for name, (t, _) in TYPED.items()}
NUMPY_OF.update(FP16=np.float16, BF16=ml_dtypes.bfloat16)


class Protos:
    """The vendored .proto files as protoc compiled them: message classes
    and unary stubs, from a descriptor pool of their own. tritonclient
    registers its copies of the same messages in protobuf's default pool,
    which cannot hold two definitions of inference.ModelInferRequest."""

    def __init__(self, path=DESCRIPTORS):
        if not os.path.exists(path):
            raise RuntimeError(f"{path} is missing: run make grpc-stubs")
        with open(path, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        self.pool = descriptor_pool.DescriptorPool()
        for proto in files.file:
            self.pool.Add(proto)

    def msg(self, full_name, **fields):
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))(**fields)

    def stub(self, channel, service=SERVICE):
        svc = self.pool.FindServiceByName(service)
        calls = {}
        for m in svc.methods:
            out = message_factory.GetMessageClass(m.output_type)
            calls[m.name] = channel.unary_unary(f"/{svc.full_name}/{m.name}",
                                                request_serializer=lambda msg: msg.SerializeToString(),
                                                response_deserializer=out.FromString)
        return types.SimpleNamespace(**calls)


_protos = []


def protos():
    if not _protos:
        _protos.append(Protos())
    return _protos[0]


def bytes_tensor(a):
    """BYTES elements as the protocol lays them out raw: 4-byte little-endian
    length, then the bytes."""
    return b"".join(struct.pack("<I", len(x)) + x for x in a.ravel())


def from_bytes_tensor(raw, shape):
    out, i = [], 0
    while i < len(raw):
        (n,) = struct.unpack_from("<I", raw, i)
        out.append(raw[i + 4:i + 4 + n])
        i += 4 + n
    return np.array(out, dtype=object).reshape(shape)


def output_array(resp, index=0):
    """Output `index` of a ModelInferResponse, from its raw_output_contents."""
    out = resp.outputs[index]
    raw = resp.raw_output_contents[index]
    if out.datatype == "BYTES":
        return from_bytes_tensor(raw, tuple(out.shape))
    return np.frombuffer(raw, dtype=NUMPY_OF[out.datatype]).reshape(tuple(out.shape))


def sample(dtype, shape, rng):
    n = int(np.prod(shape))
    if dtype is np.object_:
        return np.array([b"ab", b"", "\u00e9".encode(), b"\x00z"] * n, dtype=object)[:n].reshape(shape)
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return np.asarray(rng.standard_normal(shape) * 50).astype(dtype)


def triton_inputs(module, data, repeats, names=("input", "repeats")):
    """tritonclient inputs (`module` is tritonclient.http or .grpc) for `data` and `repeats`."""
    inp = module.InferInput(names[0], list(data.shape), np_to_triton_dtype(data.dtype))
    inp.set_data_from_numpy(data)
    rep = module.InferInput(names[1], [len(repeats)], "INT64")
    rep.set_data_from_numpy(np.array(repeats, dtype=np.int64))
    return [inp, rep]


def inflight(d):
    """Requests the daemon holds (both transports): tiled_inflight_requests less the /metrics
    request that reads it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/metrics", timeout=30) as r:
        return int(re.search(r"^tiled_inflight_requests (\d+)$", r.read().decode(), re.M).group(1)) - 1


def grpc_error(call):
    """The grpc.RpcError `call` raises (fails the test if it succeeds)."""
    try:
        call()
    except grpc.RpcError as e:
        return e
    raise AssertionError("the call succeeded")


def http_error(method, url):
    """(status, error message) of an HTTP request that fails."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30)
    except urllib.error.HTTPError as e:
        return str(e.code), json.loads(e.read())["error"]
    raise AssertionError(f"{method} {url} succeeded")


class GrpcCase(unittest.TestCase):
    """A daemon with gRPC on a free port (plus `daemon_args`), a
    tritonclient.grpc client, a tritonclient.http one for comparisons, and
    stubs from the vendored .proto files."""

    daemon_args = ()

    @classmethod
    def setUpClass(cls):
        cls.P = protos()
        cls.d = Daemon("--grpc-port", "0", *cls.daemon_args)
        cls.target = f"127.0.0.1:{cls.d.grpc_port}"
        cls.client = grpcclient.InferenceServerClient(cls.target)
        cls.http = httpclient.InferenceServerClient(f"127.0.0.1:{cls.d.port}", network_timeout=300)
        cls.channel = grpc.insecure_channel(cls.target, options=[("grpc.max_receive_message_length", -1),
                                                                 ("grpc.max_send_message_length", -1)])
        cls.stub = cls.P.stub(cls.channel)
        cls.rng = np.random.default_rng(17)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.client.close()
        cls.http.close()
        assert cls.d.stop() == 0, "daemon exit status"

    def grpc_infer(self, data, repeats, **kw):
        return self.client.infer("tile", triton_inputs(grpcclient, data, repeats), **kw)

    # The stub client.
    def request(self, inputs, raw=(), model="tile", version="", semantics=None, outputs=(), **fields):
        """A ModelInferRequest; `inputs` are (name, datatype, shape, {contents field: values})."""
        req = self.P.msg("inference.ModelInferRequest", model_name=model, model_version=version, **fields)
        for name, datatype, shape, contents in inputs:
            t = req.inputs.add(name=name, datatype=datatype, shape=list(shape))
            for field, values in (contents or {}).items():
                getattr(t.contents, field).extend(values)
        for name in outputs:
            req.outputs.add(name=name)
        req.raw_input_contents.extend(raw)
        if semantics is not None:
            req.parameters["semantics"].string_param = semantics
        return req

    def raw_request(self, data, repeats, **kw):
        datatype = np_to_triton_dtype(data.dtype)
        payload = bytes_tensor(data) if datatype == "BYTES" else data.tobytes()
        return self.request([("input", datatype, data.shape, None), ("repeats", "INT64", [len(repeats)], None)],
                            raw=[payload, np.array(repeats, dtype=np.int64).tobytes()], **kw)

    def assert_same_error_as_http(self, http_call, grpc_call, code=None):
        """The same mistake over both transports: the same message, and the
        gRPC status of the HTTP status (or `code`)."""
        h = error_of(http_call)
        g = error_of(grpc_call)
        self.assertEqual(g.message(), h.message())
        self.assertEqual(g.status(), str(code or GRPC_OF_HTTP[h.status()]), h.message())
        return g


class ProtoFiles(unittest.TestCase):
    """The vendored files keep NVIDIA's license and say what changed, and
    describe the wire format tritonclient's full copy describes: every
    message and field kept has Triton's number and type."""

    def test_license_headers_kept_and_changes_stated(self):
        for name in ("grpc_service.proto", "model_config.proto", "health.proto"):
            with open(os.path.join(PROTO_DIR, name)) as f:
                text = f.read()
            self.assertRegex(text.split("\n", 1)[0], r"^// Copyright .*NVIDIA CORPORATION", name)
            for clause in ("Redistribution and use in source and binary forms", "Neither the name of NVIDIA",
                           "THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS"):
                self.assertIn(clause, text, name)
            self.assertIn("triton-inference-server/common", text, name)
        for name in ("grpc_service.proto", "model_config.proto"):
            with open(os.path.join(PROTO_DIR, name)) as f:
                self.assertIn("Modified for tiled", f.read(), name)

    def test_messages_match_tritonclients_copy(self):
        ours = protos().pool
        theirs = triton_pb2.DESCRIPTOR.pool
        checked = 0
        for proto in descriptor_pb2.FileDescriptorSet.FromString(open(DESCRIPTORS, "rb").read()).file:
            if proto.package != "inference":
                continue
            stack = [ours.FindMessageTypeByName(f"inference.{m.name}") for m in proto.message_type]
            while stack:
                m = stack.pop()
                stack.extend(m.nested_types)
                t = theirs.FindMessageTypeByName(m.full_name)
                for f in m.fields:
                    tf = t.fields_by_name.get(f.name)
                    self.assertIsNotNone(tf, f.full_name)
                    self.assertEqual((f.number, f.type, f.label), (tf.number, tf.type, tf.label), f.full_name)
                    if f.message_type or f.enum_type:
                        self.assertEqual((f.message_type or f.enum_type).full_name,
                                         (tf.message_type or tf.enum_type).full_name, f.full_name)
                    checked += 1
        enum = ours.FindEnumTypeByName("inference.DataType")
        self.assertEqual({v.name: v.number for v in enum.values},
                         {v.name: v.number for v in theirs.FindEnumTypeByName("inference.DataType").values})
        self.assertGreater(checked, 100)

    def test_service_is_a_subset_of_tritons(self):
        ours = protos().pool.FindServiceByName(SERVICE)
        theirs = triton_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
        names = set()
        for m in ours.methods:
            t = theirs.methods_by_name[m.name]
            self.assertEqual((m.input_type.full_name, m.output_type.full_name, m.client_streaming,
                              m.server_streaming),
                             (t.input_type.full_name, t.output_type.full_name, t.client_streaming,
                              t.server_streaming), m.name)
            names.add(m.name)
        # What tritonclient.grpc and perf_analyzer -i grpc call.
        self.assertLessEqual({"ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
                              "ModelConfig", "ModelStatistics", "ModelInfer", "SystemSharedMemoryStatus",
                              "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
                              "CudaSharedMemoryUnregister"}, names)
        health = protos().pool.FindServiceByName("grpc.health.v1.Health")
        self.assertEqual([m.name for m in health.methods], ["Check"])


class TritonClientGrpc(GrpcCase):
    """tritonclient.grpc, unmodified."""

    def test_health(self):
        self.assertTrue(self.client.is_server_live())
        self.assertTrue(self.client.is_server_ready())
        for version in ("", "13", "6", "1"):
            self.assertTrue(self.client.is_model_ready("tile", version), version)
        # An unknown model or version is not ready: Triton answers OK, ready: false over gRPC, so
        # tritonclient.grpc returns False, as tritonclient.http does for the 404 of the same question.
        for model, version in (("nope", ""), ("tile", "7")):
            self.assertFalse(self.client.is_model_ready(model, version), (model, version))
            self.assertFalse(self.http.is_model_ready(model, version), (model, version))
        e = error_of(lambda: self.client.is_model_ready("tile", "x"))
        self.assertEqual(e.status(), str(grpc.StatusCode.INVALID_ARGUMENT))

    def test_server_metadata_as_over_http(self):
        meta = self.client.get_server_metadata()
        want = self.http.get_server_metadata()
        self.assertEqual((meta.name, meta.version, list(meta.extensions)),
                         (want["name"], want["version"], want["extensions"]))
        self.assertIn("statistics", meta.extensions)  # perf_analyzer reads server statistics only then

    def test_model_metadata_as_over_http(self):
        for version in ("", "13", "6", "1"):
            with self.subTest(version=version):
                meta = self.client.get_model_metadata("tile", version)
                want = self.http.get_model_metadata("tile", version)
                tensors = lambda ts: [(t.name, t.datatype, list(t.shape)) for t in ts]  # noqa: E731
                self.assertEqual(meta.name, want["name"])
                self.assertEqual(list(meta.versions), want["versions"])
                self.assertEqual(meta.platform, want["platform"])
                self.assertEqual(tensors(meta.inputs), [(t["name"], t["datatype"], t["shape"]) for t in want["inputs"]])
                self.assertEqual(tensors(meta.outputs),
                                 [(t["name"], t["datatype"], t["shape"]) for t in want["outputs"]])

    def test_model_config_as_over_http(self):
        from tritonclient.grpc import model_config_pb2
        for version in ("", "6", "1"):
            with self.subTest(version=version):
                config = self.client.get_model_config("tile", version).config
                want = self.http.get_model_config("tile", version)
                self.assertEqual((config.name, config.platform, config.backend, config.max_batch_size),
                                 (want["name"], want["platform"], want["backend"], want["max_batch_size"]))
                tensors = lambda ts: [(t.name, model_config_pb2.DataType.Name(t.data_type), list(t.dims))  # noqa: E731
                                      for t in ts]
                self.assertEqual(tensors(config.input),
                                 [(t["name"], t["data_type"], t["dims"]) for t in want["input"]])
                self.assertEqual(tensors(config.output),
                                 [(t["name"], t["data_type"], t["dims"]) for t in want["output"]])
                # every field HTTP's document has (proto3 JSON of the same message), version_policy included
                got = json_format.MessageToDict(config, preserving_proto_field_name=True)
                self.assertEqual(set(want) - {"max_batch_size"}, set(got))  # 0, proto3's default, is not sent
                self.assertEqual(got["version_policy"], {"specific": {"versions": [
                    str(v) for v in want["version_policy"]["specific"]["versions"]]}})

    def test_statistics_fields_as_over_http(self):
        def keys(d, prefix=""):
            out = set()
            for k, v in d.items():
                out.add(prefix + k)
                if isinstance(v, dict):
                    out |= keys(v, prefix + k + ".")
            return out

        stats = self.client.get_inference_statistics("tile", "6").model_stats[0]
        got = json_format.MessageToDict(stats, preserving_proto_field_name=True,
                                        always_print_fields_with_no_presence=True)
        want = self.http.get_inference_statistics("tile", "6")["model_stats"][0]
        self.assertEqual(keys(got) & keys(want), keys(want))  # cache_hit and cache_miss included
        self.assertIn("inference_stats.cache_hit.count", keys(got))

    def test_statistics_count_grpc_and_http_requests(self):
        def success():
            stats = self.client.get_inference_statistics("tile", "13").model_stats
            self.assertEqual([(s.name, s.version) for s in stats], [("tile", "13")])
            return stats[0].inference_stats.success.count, stats[0].inference_count

        before = success()
        a = np.arange(3, dtype=np.int8)
        self.grpc_infer(a, [2])
        self.grpc_infer(a, [3])
        self.http.infer("tile", triton_inputs(httpclient, a, [2]))
        # A request is counted as it ends, just after its answer is sent: wait for the count.
        want_now = (before[0] + 3, before[1] + 3)
        self.assertTrue(wait_until(lambda: success() == want_now), f"{success()} != {want_now}")
        want = self.http.get_inference_statistics("tile", "13")["model_stats"][0]
        self.assertEqual(success()[0], want["inference_stats"]["success"]["count"])

    def test_every_datatype_rank_0_to_6(self):
        calls = 0
        for dt in CLIENT_DTYPES:
            for rank, (shape, repeats) in SHAPES.items():
                with self.subTest(dtype=np.dtype(dt).name, rank=rank):
                    a = sample(dt, shape, self.rng)
                    result = self.grpc_infer(a, repeats)
                    got = result.as_numpy("output")
                    want = np.tile(a, repeats)
                    self.assertEqual(result.get_output("output").datatype, np_to_triton_dtype(a.dtype))
                    self.assertEqual(got.dtype, want.dtype)
                    self.assertEqual(got.shape, want.shape)
                    if dt is np.object_:
                        self.assertEqual(got.tolist(), want.tolist())
                    else:
                        self.assertEqual(got.tobytes(), want.tobytes())
                    calls += 1
        self.assertEqual(calls, len(CLIENT_DTYPES) * len(SHAPES))

    def test_versions(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        for version, want in (("", "13"), ("13", "13"), ("6", "6")):
            result = self.grpc_infer(a, [2, 1], model_version=version)
            self.assertEqual(result.get_response().model_version, want)
            self.assertTrue(np.array_equal(result.as_numpy("output"), np.tile(a, (2, 1))))
        # Tile-1: `tiles` copies along `axis`.
        inputs = triton_inputs(grpcclient, a, [3], names=("input", "tiles"))
        axis = grpcclient.InferInput("axis", [1], "INT64")
        axis.set_data_from_numpy(np.array([1], dtype=np.int64))
        result = self.client.infer("tile", inputs + [axis], model_version="1")
        self.assertEqual(result.get_response().model_version, "1")
        self.assertTrue(np.array_equal(result.as_numpy("output"), np.concatenate([a] * 3, axis=1)))

    def test_semantics_request_id_and_requested_output(self):
        a = np.arange(4, dtype=np.int32).reshape(2, 2)
        result = self.grpc_infer(a, [2, 1, 1], parameters={"semantics": "numpy"}, request_id="req-9",
                                 outputs=[grpcclient.InferRequestedOutput("output")])
        self.assertEqual(result.get_response().id, "req-9")
        self.assertEqual(result.get_response().model_name, "tile")
        self.assertTrue(np.array_equal(result.as_numpy("output"), np.tile(a, (2, 1, 1))))

    def test_compressed_requests(self):
        """infer(compression_algorithm=...): tritonclient compresses the request message."""
        a = sample(np.float32, (64, 64), self.rng)
        for algorithm in ("gzip", "deflate"):
            with self.subTest(algorithm=algorithm):
                got = self.grpc_infer(a, [2, 3], compression_algorithm=algorithm).as_numpy("output")
                self.assertTrue(np.array_equal(got, np.tile(a, (2, 3))))

    def test_large_output(self):
        """64 MiB, above --stream-threshold: the reply is produced chunk by chunk."""
        a = sample(np.float32, (256, 256), self.rng)
        got = self.grpc_infer(a, [16, 16]).as_numpy("output")
        self.assertEqual(got.nbytes, 64 * MIB)
        self.assertTrue(np.array_equal(got, np.tile(a, (16, 16))))

    def test_errors_say_what_http_says(self):
        a = np.arange(4, dtype=np.float32)

        def both(model="tile", repeats=(1, 2), names=("input", "repeats"), version="", output=None,
                 repeats_type="INT64", **kw):
            """The same call through tritonclient.http and tritonclient.grpc."""
            def call(module, client):
                inputs = triton_inputs(module, a, list(repeats), names)
                if repeats_type != "INT64":
                    inputs[1] = module.InferInput(names[1], [len(repeats)], repeats_type)
                    inputs[1].set_data_from_numpy(np.array(repeats, dtype=NUMPY_OF[repeats_type]))
                outputs = [module.InferRequestedOutput(output)] if output else None
                return lambda: client.infer(model, inputs, model_version=version, outputs=outputs, **kw)
            return call(httpclient, self.http), call(grpcclient, self.client)

        cases = {
            "a repeat per axis": both(),
            "unknown model": both(model="nope"),
            "unknown version": both(version="5"),
            "semantics": both(repeats=[2], parameters={"semantics": "bogus"}),
            "input name": both(repeats=[2], names=("inputx", "repeats")),
            "repeats datatype": both(repeats=[2], repeats_type="FP32"),
            "negative repeats": both(repeats=[-1]),
            "Tile-13 inputs on version 1": both(repeats=[2], version="1"),
            "requested output": both(repeats=[2], output="nope"),
        }
        for name, (h, g) in cases.items():
            with self.subTest(name):
                self.assert_same_error_as_http(h, g)

    def test_readme_snippet(self):
        """The README's tritonclient.grpc example runs and prints what it shows."""
        marker = 'grpcclient.InferenceServerClient("127.0.0.1:8081")\ndata ='
        self.assertEqual(*readme_python_output(marker, self.d.port, grpc_port=self.d.grpc_port))


class AsyncClients(GrpcCase):
    """tritonclient's other calling styles, unmodified: the asyncio clients
    (tritonclient.grpc.aio, tritonclient.http.aio on aiohttp) and
    tritonclient.grpc's callback-style async_infer, every datatype at
    ranks 0-3 compared with numpy.tile, and errors raised with our message."""

    def each_case(self):
        for dt in CLIENT_DTYPES:
            for rank in range(4):
                shape, repeats = SHAPES[rank]
                yield np.dtype(dt).name, rank, sample(dt, shape, self.rng), repeats

    def assert_tiled(self, result, a, repeats):
        got, want = result.as_numpy("output"), np.tile(a, repeats)
        self.assertEqual((got.dtype, got.shape), (want.dtype, want.shape))
        if a.dtype == object:
            self.assertEqual(got.tolist(), want.tolist())
        else:
            self.assertEqual(got.tobytes(), want.tobytes())

    def test_asyncio_clients_over_grpc_and_http(self):
        import tritonclient.grpc.aio as grpc_aio
        import tritonclient.http.aio as http_aio

        async def run(module, url):
            client = module.InferenceServerClient(url)
            try:
                self.assertTrue(await client.is_server_live())
                self.assertTrue(await client.is_model_ready("tile"))
                calls = 0
                for name, rank, a, repeats in self.each_case():
                    with self.subTest(client=module.__name__, dtype=name, rank=rank):
                        self.assert_tiled(await client.infer("tile", triton_inputs(module, a, repeats)), a, repeats)
                        calls += 1
                with self.assertRaises(InferenceServerException) as cm:
                    await client.infer("tile", triton_inputs(module, np.arange(4, dtype=np.float32), [1, 2]))
                self.assertIn("repeats has 2 values but input has rank 1", cm.exception.message())
                return calls
            finally:
                await client.close()

        for module, url in ((grpc_aio, self.target), (http_aio, f"127.0.0.1:{self.d.port}")):
            self.assertEqual(asyncio.run(run(module, url)), len(CLIENT_DTYPES) * 4)

    def test_async_infer_with_a_callback(self):
        done = queue.Queue()
        cases = list(self.each_case())
        for i, (_, _, a, repeats) in enumerate(cases):  # all in flight at once
            self.client.async_infer("tile", triton_inputs(grpcclient, a, repeats), request_id=str(i),
                                    callback=lambda result, error: done.put((result, error)))
        results = {}
        for _ in cases:
            result, error = done.get(timeout=30)
            self.assertIsNone(error)
            results[int(result.get_response().id)] = result
        for i, (name, rank, a, repeats) in enumerate(cases):
            with self.subTest(dtype=name, rank=rank):
                self.assert_tiled(results[i], a, repeats)
        self.client.async_infer("tile", triton_inputs(grpcclient, np.arange(4, dtype=np.float32), [1, 2]),
                                callback=lambda result, error: done.put((result, error)))
        result, error = done.get(timeout=30)
        self.assertIsNone(result)
        self.assertIn("repeats has 2 values but input has rank 1", error.message())


class StubClient(GrpcCase):
    """A client written from the .proto files: what tritonclient never sends."""

    def test_typed_contents_for_every_type_that_has_a_field(self):
        for datatype, (dt, field) in TYPED.items():
            for rank in (0, 1, 3, 6):
                shape, repeats = SHAPES[rank]
                with self.subTest(datatype=datatype, rank=rank):
                    a = sample(dt, shape, self.rng)
                    values = [bool(x) if dt is np.bool_ else x for x in a.ravel().tolist()]
                    req = self.request([("input", datatype, shape, {field: values}),
                                        ("repeats", "INT64", [len(repeats)], {"int64_contents": repeats})])
                    resp = self.stub.ModelInfer(req)
                    self.assertEqual(len(resp.raw_output_contents), 1)  # always answered raw
                    self.assertEqual(list(resp.outputs[0].contents.ListFields()), [])
                    got = output_array(resp)
                    want = np.tile(a, repeats)
                    self.assertEqual((resp.outputs[0].name, resp.outputs[0].datatype), ("output", datatype))
                    self.assertEqual(got.shape, want.shape)
                    if dt is np.object_:
                        self.assertEqual(got.tolist(), want.tolist())
                    else:
                        self.assertEqual(got.tobytes(), want.tobytes())

    def test_int_contents_are_narrowed_to_int8_and_int16(self):
        """int_contents is int32 on the wire: the protocol keeps the low bytes."""
        for datatype, dt in (("INT8", np.int8), ("INT16", np.int16), ("UINT8", np.uint8), ("UINT16", np.uint16)):
            field = TYPED[datatype][1]
            values = [-128, 127, 0, 1] if datatype.startswith("INT") else [255, 0, 1, 65535 if dt is np.uint16 else 7]
            resp = self.stub.ModelInfer(self.request([("input", datatype, [4], {field: values}),
                                                      ("repeats", "INT64", [1], {"int64_contents": [2]})]))
            self.assertEqual(output_array(resp).tolist(), np.tile(np.array(values).astype(dt), 2).tolist(), datatype)

    def test_raw_inputs_as_tritonclient_sends_them(self):
        a = sample(np.uint16, (2, 3), self.rng)
        resp, call = self.stub.ModelInfer.with_call(self.raw_request(a, [1, 2], id="abc"))
        self.assertEqual((resp.model_name, resp.model_version, resp.id), ("tile", "13", "abc"))
        self.assertTrue(np.array_equal(output_array(resp), np.tile(a, (1, 2))))
        self.assertEqual(call.code(), grpc.StatusCode.OK)

    def test_mixed_raw_and_typed_is_refused(self):
        req = self.request([("input", "FP32", [2], {"fp32_contents": [1, 2]}), ("repeats", "INT64", [1], None)],
                           raw=[np.array([2], dtype=np.int64).tobytes()])
        e = grpc_error(lambda: self.stub.ModelInfer(req))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("'input'", e.details())
        self.assertIn("raw_input_contents", e.details())

    def test_typed_contents_for_fp16_and_bf16_are_refused(self):
        for datatype in ("FP16", "BF16"):
            req = self.request([("input", datatype, [2], {"fp32_contents": [1, 2]}),
                                ("repeats", "INT64", [1], {"int64_contents": [2]})])
            e = grpc_error(lambda: self.stub.ModelInfer(req))
            self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, datatype)
            self.assertIn("'input'", e.details())
            self.assertIn(datatype, e.details())

    def test_contents_field_must_match_the_datatype(self):
        for datatype, field in (("FP32", "int64_contents"), ("INT32", "uint_contents"), ("INT64", "int_contents"),
                                ("BYTES", "fp32_contents"), ("BOOL", "int_contents")):
            req = self.request([("input", datatype, [1], {field: [1]}),
                                ("repeats", "INT64", [1], {"int64_contents": [2]})])
            e = grpc_error(lambda: self.stub.ModelInfer(req))
            self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, (datatype, field))
            self.assertIn("'input'", e.details())

    def test_an_input_without_data_is_refused(self):
        req = self.request([("input", "FP32", [2], None), ("repeats", "INT64", [1], {"int64_contents": [2]})])
        e = grpc_error(lambda: self.stub.ModelInfer(req))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("'input'", e.details())

    def test_wrong_element_counts(self):
        cases = [
            ("typed: 2 values for shape [3]", self.request([("input", "FP32", [3], {"fp32_contents": [1, 2]}),
                                                            ("repeats", "INT64", [1], {"int64_contents": [2]})]),
             ("2", "3")),
            ("raw: 8 bytes for FP32 [3]",
             self.request([("input", "FP32", [3], None), ("repeats", "INT64", [1], None)],
                          raw=[b"\0" * 8, np.array([2], dtype=np.int64).tobytes()]), ("8", "12")),
            ("raw BYTES: a length past the end",
             self.request([("input", "BYTES", [1], None), ("repeats", "INT64", [1], None)],
                          raw=[struct.pack("<I", 9) + b"abc", np.array([2], dtype=np.int64).tobytes()]), ()),
            ("three raw entries for two inputs",
             self.request([("input", "INT8", [1], None), ("repeats", "INT64", [1], None)],
                          raw=[b"\1", np.array([2], dtype=np.int64).tobytes(), b"\1"]), ()),
            ("one raw entry for two raw inputs",
             self.request([("input", "INT8", [1], None), ("repeats", "INT64", [1], None)], raw=[b"\1"]), ()),
        ]
        for name, req, numbers in cases:
            with self.subTest(name):
                e = grpc_error(lambda: self.stub.ModelInfer(req))
                self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, e.details())
                for n in numbers:
                    self.assertRegex(e.details(), rf"\b{n}\b")

    def test_unknown_model_and_version_as_over_http(self):
        a = np.arange(2, dtype=np.float32)
        for model, version, code in (("nope", "", grpc.StatusCode.NOT_FOUND), ("tile", "5", grpc.StatusCode.NOT_FOUND)):
            with self.subTest(model=model, version=version):
                h = error_of(lambda: self.http.infer(model, triton_inputs(httpclient, a, [2]),
                                                     model_version=version))
                e = grpc_error(lambda: self.stub.ModelInfer(self.raw_request(a, [2], model=model, version=version)))
                self.assertEqual((e.code(), e.details()), (code, h.message()))
                for rpc in ("ModelMetadata", "ModelConfig", "ModelStatistics"):
                    msg = self.P.msg(f"inference.{rpc}Request", name=model, version=version)
                    e = grpc_error(lambda: getattr(self.stub, rpc)(msg))
                    self.assertEqual((e.code(), e.details()), (code, h.message()), rpc)
        # A version that is no number: INVALID_ARGUMENT, Triton's code (HTTP's URL would not route it);
        # a number no version has is an unknown version.
        e = grpc_error(lambda: self.stub.ModelInfer(self.raw_request(a, [2], version="x")))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("'x' is not a version number", e.details())
        for version in ("0", "12345678901234567890"):
            e = grpc_error(lambda: self.stub.ModelInfer(self.raw_request(a, [2], version=version)))
            self.assertEqual((e.code(), e.details()),
                             (grpc.StatusCode.NOT_FOUND, f"unknown version {version} of model 'tile' (versions: 13, 6, 1)"))

    def test_semantics_parameter(self):
        a = np.arange(4, dtype=np.int16).reshape(2, 2)
        resp = self.stub.ModelInfer(self.raw_request(a, [3], semantics="numpy"))
        self.assertTrue(np.array_equal(output_array(resp), np.tile(a, 3)))
        h = error_of(lambda: self.http.infer("tile", triton_inputs(httpclient, a, [3]),
                                                 parameters={"semantics": "bogus"}))
        e = grpc_error(lambda: self.stub.ModelInfer(self.raw_request(a, [3], semantics="bogus")))
        self.assertEqual((e.code(), e.details()), (GRPC_OF_HTTP[h.status()], h.message()))
        req = self.raw_request(a, [3])
        req.parameters["semantics"].int64_param = 1
        e = grpc_error(lambda: self.stub.ModelInfer(req))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("semantics", e.details())

    def test_unserved_methods_are_unimplemented(self):
        for path in ("/inference.GRPCInferenceService/RepositoryIndex", "/inference.GRPCInferenceService/Nope",
                     "/nope.Service/Call"):
            call = self.channel.unary_unary(path, request_serializer=None, response_deserializer=None)
            e = grpc_error(lambda: call(b""))
            self.assertEqual(e.code(), grpc.StatusCode.UNIMPLEMENTED, path)
            self.assertIn(path, e.details())

    def test_server_timing_in_trailing_metadata(self):
        a = np.arange(8, dtype=np.float64)
        _, call = self.stub.ModelInfer.with_call(self.raw_request(a, [4]))
        trailers = dict(call.trailing_metadata())
        timing = trailers.get("server-timing", "")
        phases = dict(re.findall(r"(\w+);dur=([0-9.]+)", timing))
        self.assertEqual(set(phases), {"queue", "decode", "tile", "encode", "total"}, timing)
        self.assertGreaterEqual(float(phases["total"]), float(phases["tile"]))

    def test_metrics_are_labelled_by_transport(self):
        def totals():
            with urllib.request.urlopen(f"http://127.0.0.1:{self.d.port}/metrics", timeout=30) as r:
                text = r.read().decode()
            out = {}
            for labels, value in re.findall(r"^tiled_requests_total\{([^}]*)\} (\d+)$", text, re.M):
                m = re.search(r'transport="([^"]+)"', labels)
                self.assertIsNotNone(m, labels)
                out[m.group(1)] = out.get(m.group(1), 0) + int(value)
            return out

        before = totals()
        a = np.arange(3, dtype=np.uint8)
        for _ in range(3):
            self.stub.ModelInfer(self.raw_request(a, [2]))
        grpc_error(lambda: self.stub.ModelInfer(self.raw_request(a, [2, 2])))
        self.stub.ServerLive(self.P.msg("inference.ServerLiveRequest"))
        after = totals()
        self.assertEqual(after.get("grpc", 0) - before.get("grpc", 0), 5)
        self.assertGreater(after.get("http", 0), 0)

    def test_health_v1_check(self):
        health = self.P.stub(self.channel, "grpc.health.v1.Health")
        resp = health.Check(self.P.msg("grpc.health.v1.HealthCheckRequest"))
        self.assertEqual(resp.status, 1)  # SERVING
        watch = self.channel.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=None,
                                          response_deserializer=None)
        e = grpc_error(lambda: list(watch(b"")))
        self.assertEqual(e.code(), grpc.StatusCode.UNIMPLEMENTED)


def pb_varint(n):
    """A varint, as the encoding guide writes it (negatives: ten bytes)."""
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def pb_ld(number, payload):
    return pb_varint(number << 3 | 2) + pb_varint(len(payload)) + payload


def pb_vf(number, value):
    return pb_varint(number << 3) + pb_varint(value)


def pb_group(number, inner=b""):
    return pb_varint(number << 3 | 3) + inner + pb_varint(number << 3 | 4)


class WireEncodings(GrpcCase):
    """Request bytes written by hand, as protobuf libraries other than
    Python's may write them (the protobuf encoding's rules), sent over a real channel with no
    serializer; each reply parsed with the classes of the vendored protos.
    Each case is one class of the differences a protobuf parser would not
    have: every one failed before the decoder read them as protobuf does."""

    def raw(self, method, body, service=SERVICE):
        return self.channel.unary_unary(f"/{service}/{method}", request_serializer=None,
                                        response_deserializer=None)(body)

    def infer(self, body):
        return self.P.msg("inference.ModelInferResponse").FromString(self.raw("ModelInfer", body))

    @staticmethod
    def tensor(name, datatype, shape, *contents):
        return (pb_ld(1, name.encode()) + pb_ld(2, datatype.encode())
                + pb_ld(3, b"".join(pb_varint(d) for d in shape)) + b"".join(pb_ld(5, c) for c in contents))

    def repeats(self, n=1):
        return pb_ld(5, self.tensor("repeats", "INT64", [1], pb_ld(3, pb_varint(n))))

    def test_unknown_groups_skipped(self):
        group = pb_group(9, pb_vf(1, 5) + pb_group(10, pb_ld(1, b"x")))
        body = (group + pb_ld(1, b"tile") + pb_ld(5, group + self.tensor("input", "INT64", [2], group + pb_ld(3, pb_varint(4) + pb_varint(7))))
                + self.repeats() + group)
        resp = self.infer(body)
        self.assertEqual(np.frombuffer(resp.raw_output_contents[0], dtype=np.int64).tolist(), [4, 7])
        ready = self.P.msg("inference.ModelReadyResponse").FromString(
            self.raw("ModelReady", group + pb_ld(1, b"tile")))
        self.assertTrue(ready.ready)
        e = grpc_error(lambda: self.raw("ModelReady", pb_varint(9 << 3 | 3) + pb_vf(1, 5) + pb_varint(10 << 3 | 4)))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("group 9 ended as group 10", e.details())

    def test_bool_contents_nonzero_is_true(self):
        contents = pb_ld(1, b"".join(pb_varint(v) for v in (256, 512, 0, 3)))
        resp = self.infer(pb_ld(1, b"tile") + pb_ld(5, self.tensor("input", "BOOL", [4], contents)) + self.repeats())
        self.assertEqual(resp.raw_output_contents[0], bytes([1, 1, 0, 1]))

    def test_contents_given_twice_are_merged(self):
        first, second = pb_ld(3, pb_varint(1) + pb_varint(2)), pb_vf(3, 3) + pb_vf(3, 4)  # packed, then unpacked
        resp = self.infer(pb_ld(1, b"tile") + pb_ld(5, self.tensor("input", "INT64", [4], first, second))
                          + self.repeats())
        self.assertEqual(np.frombuffer(resp.raw_output_contents[0], dtype=np.int64).tolist(), [1, 2, 3, 4])
        self.assertEqual(list(resp.outputs[0].shape), [4])
        # int32 from a ten-byte negative varint
        resp = self.infer(pb_ld(1, b"tile") + pb_ld(5, self.tensor("input", "INT32", [1], pb_vf(2, -3)))
                          + self.repeats(2))
        self.assertEqual(np.frombuffer(resp.raw_output_contents[0], dtype=np.int32).tolist(), [-3, -3])

    def test_map_entries_replace_and_merge(self):
        def entry(key, *values):
            return pb_ld(4, pb_ld(1, key) + b"".join(pb_ld(2, v) for v in values))

        base = pb_ld(1, b"tile") + pb_ld(5, self.tensor("input", "INT64", [1], pb_vf(3, 6))) + self.repeats(2)
        # a bad semantics (an int64_param) replaced by a later entry of the key
        resp = self.infer(entry(b"semantics", pb_vf(2, 1)) + entry(b"semantics", pb_ld(3, b"numpy")) + base)
        self.assertEqual(np.frombuffer(resp.raw_output_contents[0], dtype=np.int64).tolist(), [6, 6])
        # a value given twice in one entry merges: the empty second one keeps "numpy"
        resp = self.infer(entry(b"semantics", pb_ld(3, b"numpy"), b"") + base)
        self.assertEqual(np.frombuffer(resp.raw_output_contents[0], dtype=np.int64).tolist(), [6, 6])
        e = grpc_error(lambda: self.infer(entry(b"semantics", pb_ld(3, b"numpy")) + entry(b"semantics", pb_vf(1, 1))
                                          + base))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("'semantics' must be a string_param", e.details())

    def test_invalid_utf8_refused_not_echoed(self):
        base = pb_ld(1, b"tile") + pb_ld(5, self.tensor("input", "INT64", [1], pb_vf(3, 6))) + self.repeats()
        e = grpc_error(lambda: self.infer(pb_ld(3, b"\xff\xfe") + base))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("ModelInferRequest.id is not valid UTF-8", e.details())
        resp = self.infer(pb_ld(3, "é-1".encode()) + base)  # valid UTF-8 is echoed
        self.assertEqual(resp.id, "é-1")
        e = grpc_error(lambda: self.raw("Check", pb_ld(1, b"\xc0\xaf"), service="grpc.health.v1.Health"))
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("HealthCheckRequest.service is not valid UTF-8", e.details())

    def test_each_rpc_reads_its_own_message(self):
        # HealthCheckRequest has field 1 only: a field 2 (of any type) is unknown
        for extra in (pb_ld(2, b"\xff"), pb_vf(2, 1), pb_group(2)):
            reply = self.raw("Check", pb_ld(1, b"") + extra, service="grpc.health.v1.Health")
            self.assertEqual(self.P.msg("grpc.health.v1.HealthCheckResponse").FromString(reply).status, 1)
        # an empty request message with unknown fields is still one
        reply = self.raw("ServerLive", pb_vf(1, 1) + pb_ld(2, b"\xff"))
        self.assertTrue(self.P.msg("inference.ServerLiveResponse").FromString(reply).live)
        e = grpc_error(lambda: self.raw("ServerLive", b"\x0a\x05"))  # not a message
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_version_read_alike_over_both_transports(self):
        for version, ready in (("+13", True), ("6", True), ("0", False), ("7", False)):
            with self.subTest(version=version):
                reply = self.raw("ModelReady", pb_ld(1, b"tile") + pb_ld(2, version.encode()))
                self.assertEqual(self.P.msg("inference.ModelReadyResponse").FromString(reply).ready, ready)
                status, _ = http_status("GET", f"http://127.0.0.1:{self.d.port}/v2/models/tile/versions/"
                                        + urllib.request.quote(version) + "/ready")
                self.assertEqual(status == 200, ready, version)

    # Each edge of a version string (api/v2.c tile_v2_version_parse, the one
    # reader of both): the version it addresses, or "unknown" (a number no
    # version has), or None (no version number).
    VERSION_EDGES = (("", 13), ("13", 13), ("+13", 13), ("013", 13), ("+06", 6), ("6", 6),
                     ("0", "unknown"), ("7", "unknown"), ("2147483648", "unknown"), ("4294967309", "unknown"),
                     ("99999999999999999999", "unknown"),
                     ("-1", None), (" 1", None), ("1 ", None), ("+", None), ("x", None), ("1.0", None))

    def test_version_edges_answered_alike_over_both_transports(self):
        a = np.arange(3, dtype=np.float32)
        for version, want in self.VERSION_EDGES:
            with self.subTest(version=version):
                path = "/v2/models/tile" + ("/versions/" + urllib.request.quote(version) if version else "")
                status, body = http_status("GET", f"http://127.0.0.1:{self.d.port}{path}")
                meta = self.P.msg("inference.ModelMetadataRequest", name="tile", version=version)
                if isinstance(want, int):
                    self.assertEqual(status, 200, body)
                    self.assertEqual(list(self.stub.ModelMetadata(meta).versions), json.loads(body)["versions"])
                    # the version an infer addresses, named in both replies
                    g = self.stub.ModelInfer(self.raw_request(a, [2], version=version))
                    h = self.http.infer("tile", triton_inputs(httpclient, a, [2]), model_version=version)
                    self.assertEqual((g.model_version, h.get_response()["model_version"]), (str(want), str(want)))
                    continue
                e = grpc_error(lambda: self.stub.ModelMetadata(meta))
                ready = self.P.msg("inference.ModelReadyRequest", name="tile", version=version)
                if want == "unknown":  # 404 and NOT_FOUND, the same words
                    self.assertEqual(status, 404)
                    self.assertEqual((e.code(), e.details()), (grpc.StatusCode.NOT_FOUND, json.loads(body)["error"]))
                    self.assertIn(f"unknown version {version} of model 'tile'", e.details())
                    self.assertFalse(self.stub.ModelReady(ready).ready)
                else:  # no version number: no route over HTTP (Triton's regex reads digits there), INVALID_ARGUMENT
                    self.assertEqual(status, 404)
                    self.assertEqual(json.loads(body)["error"], f"no such endpoint: GET {path}".replace(
                        urllib.request.quote(version), version))
                    self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
                    self.assertEqual(e.details(), f"model version '{version}' is not a version number "
                                                  "(leave it empty for the newest)")
                    e = grpc_error(lambda: self.stub.ModelReady(ready))
                    self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)


def http_status(method, url):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class SizeLimits(GrpcCase):
    """--max-grpc-message: a message either way above it is RESOURCE_EXHAUSTED,
    naming the limit."""

    daemon_args = ("--max-grpc-message", "4096")

    def test_request_above_the_limit(self):
        a = np.zeros(2048, dtype=np.float32)  # 8 KiB of raw input
        req = self.raw_request(a, [1])
        e = grpc_error(lambda: self.stub.ModelInfer(req))
        self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertRegex(e.details(), r"\b4096\b")
        self.assertRegex(e.details(), rf"\b{req.ByteSize()}\b")  # the message's size

    def test_output_above_the_limit(self):
        a = np.arange(16, dtype=np.float32)
        ok = self.stub.ModelInfer(self.raw_request(a, [32]))  # 2 KiB output
        self.assertTrue(np.array_equal(output_array(ok), np.tile(a, 32)))
        e = grpc_error(lambda: self.stub.ModelInfer(self.raw_request(a, [128])))  # 8 KiB output
        self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertRegex(e.details(), r"\b4096\b")
        sizes = [int(n) for n in re.findall(r"\b\d+\b", e.details())]
        self.assertTrue(any(8192 < n < 8192 + 256 for n in sizes), e.details())  # the response's size
        # tritonclient shows the same message.
        c = error_of(lambda: self.grpc_infer(a, [128]))
        self.assertEqual((c.status(), c.message()), (str(grpc.StatusCode.RESOURCE_EXHAUSTED), e.details()))
        self.assertTrue(self.client.is_server_ready())


def settled_access_entries(d, path_suffix):
    """access_entries once every request the daemon took has ended and its line is in the log:
    lines are gathered and written up to --log-flush-ms after their requests end, in the order
    those ended, so a marker request's line, once it is there, comes after all of theirs. For a
    count taken before a test's own requests (a line of the test before, still gathered, would
    otherwise be counted as the test's)."""
    assert wait_until(lambda: inflight(d) == 0), "requests still in flight"
    marker = "settled-%d-%d" % (os.getpid(), next(_markers))
    d.request("GET", "/v2/health/live", headers={"X-Request-Id": marker})
    assert d.access_lines(lambda a: a.get("request_id") == marker), "the marker's access line"
    return access_entries(d, path_suffix)


_markers = itertools.count()


def access_entries(d, path_suffix):
    entries = []
    for line in d.log_lines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "access" and str(e.get("path", "")).endswith(path_suffix):
            entries.append(e)
    return entries


class DeadlineAndCancel(GrpcCase):
    """A call the client stops waiting for: the client sees its status, the
    daemon ends the call (status 499 in the access log) and goes on serving."""

    # A 512 MiB output: long enough to outlive a few milliseconds.
    BIG = (np.arange(1024, dtype=np.float32), [131072])

    def wait_for_499(self, before):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            entries = access_entries(self.d, "/ModelInfer")[before:]
            if any(e["status"] == 499 for e in entries):
                return
            time.sleep(0.05)
        self.fail(f"no ModelInfer ended with 499: {access_entries(self.d, '/ModelInfer')[before:]}")

    def assert_still_serving(self):
        a = np.arange(5, dtype=np.int32)
        self.assertTrue(np.array_equal(output_array(self.stub.ModelInfer(self.raw_request(a, [3]))), np.tile(a, 3)))

    def test_deadline_exceeded(self):
        before = len(settled_access_entries(self.d, "/ModelInfer"))
        e = grpc_error(lambda: self.stub.ModelInfer(self.raw_request(*self.BIG), timeout=0.02))
        self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.wait_for_499(before)
        self.assert_still_serving()
        # The same call with time to spare succeeds.
        a = np.arange(4, dtype=np.uint8)
        resp = self.stub.ModelInfer(self.raw_request(a, [2]), timeout=30)
        self.assertTrue(np.array_equal(output_array(resp), np.tile(a, 2)))

    def test_cancel_mid_call(self):
        before = len(settled_access_entries(self.d, "/ModelInfer"))
        future = self.stub.ModelInfer.future(self.raw_request(*self.BIG))
        deadline = time.monotonic() + 60  # cancelled once the daemon holds it
        while inflight(self.d) == 0 and not future.done() and time.monotonic() < deadline:
            time.sleep(0.002)
        self.assertTrue(future.cancel(), "the call ended before it could be cancelled")
        self.assertTrue(future.cancelled())
        self.wait_for_499(before)
        self.assert_still_serving()


class StreamInfer(GrpcCase):
    """ModelStreamInfer from tritonclient, unmodified: start_stream/async_stream_infer and the
    asyncio client's stream_infer. Each request of a stream is answered with its id, in order;
    a failed one with an error while the stream goes on; each is a request of its own in the
    access log; the stream's deadline and a cancel end it (499), and the daemon goes on."""

    BIG = DeadlineAndCancel.BIG

    def cases(self):
        for dt in CLIENT_DTYPES:
            for rank in range(5):
                shape, repeats = SHAPES[rank]
                yield np.dtype(dt).name, rank, sample(dt, shape, self.rng), repeats

    def assert_tiled(self, result, a, repeats):
        AsyncClients.assert_tiled(self, result, a, repeats)

    def open_stream(self, client=None, **kw):
        answers = queue.Queue()
        (client or self.client).start_stream(callback=lambda result, error: answers.put((result, error)), **kw)
        return answers

    def test_every_datatype_rank_0_to_4_over_one_stream(self):
        cases = list(self.cases())
        before = len(settled_access_entries(self.d, "/ModelStreamInfer"))
        client = grpcclient.InferenceServerClient(self.target)
        try:
            answers = self.open_stream(client)
            for i, (_, _, a, repeats) in enumerate(cases):  # all sent before any is read
                client.async_stream_infer("tile", triton_inputs(grpcclient, a, repeats), request_id=str(i))
            got = [answers.get(timeout=60) for _ in cases]
            client.stop_stream()
        finally:
            client.close()
        self.assertEqual([e for _, e in got], [None] * len(cases))
        self.assertEqual([r.get_response().id for r, _ in got], [str(i) for i in range(len(cases))])
        for (name, rank, a, repeats), (result, _) in zip(cases, got):
            with self.subTest(dtype=name, rank=rank):
                self.assert_tiled(result, a, repeats)
        # One access-log entry, with status 200, per request, not per stream.
        self.assertTrue(wait_until(lambda: len(access_entries(self.d, "/ModelStreamInfer")) - before == len(cases)))
        entries = access_entries(self.d, "/ModelStreamInfer")[before:]
        self.assertEqual({e["status"] for e in entries}, {200})

    def test_errors_mid_stream_keep_the_stream(self):
        client = grpcclient.InferenceServerClient(self.target)
        try:
            answers = self.open_stream(client)
            a = np.arange(4, dtype=np.float32)
            sent = [("ok1", "tile", a, [2]), ("rank", "tile", a, [1, 2]), ("model", "nope", a, [2]),
                    ("ok2", "tile", a, [3])]
            for rid, model, data, repeats in sent:
                client.async_stream_infer(model, triton_inputs(grpcclient, data, repeats), request_id=rid)
            got = [answers.get(timeout=60) for _ in sent]
            client.stop_stream()
        finally:
            client.close()
        self.assertIsNone(got[0][1])
        self.assert_tiled(got[0][0], a, [2])
        self.assertIsNone(got[1][0])
        self.assertIn("repeats has 2 values but input has rank 1", got[1][1].message())
        self.assertIsNone(got[2][0])
        self.assertIn("nope", got[2][1].message())
        self.assertIsNone(got[3][1])
        self.assertEqual(got[3][0].get_response().id, "ok2")
        self.assert_tiled(got[3][0], a, [3])

    def test_asyncio_stream_infer(self):
        import tritonclient.grpc.aio as grpc_aio

        cases = list(self.cases())

        async def run():
            client = grpc_aio.InferenceServerClient(self.target)
            try:
                async def requests():
                    for i, (_, _, a, repeats) in enumerate(cases):
                        yield {"model_name": "tile", "inputs": triton_inputs(grpc_aio, a, repeats),
                               "request_id": str(i)}
                    yield {"model_name": "tile", "inputs": triton_inputs(grpc_aio, np.arange(3, dtype=np.int8),
                                                                         [1, 1]), "request_id": "bad"}

                return [answer async for answer in client.stream_infer(requests())]
            finally:
                await client.close()

        got = asyncio.run(run())
        self.assertEqual(len(got), len(cases) + 1)
        for i, ((name, rank, a, repeats), (result, error)) in enumerate(zip(cases, got)):
            with self.subTest(dtype=name, rank=rank):
                self.assertIsNone(error)
                self.assertEqual(result.get_response().id, str(i))
                self.assert_tiled(result, a, repeats)
        self.assertIsNone(got[-1][0])
        self.assertIn("repeats has 2 values but input has rank 1", got[-1][1].message())

    def test_metrics_count_requests_not_streams(self):
        def grpc_total():
            with urllib.request.urlopen(f"http://127.0.0.1:{self.d.port}/metrics", timeout=30) as r:
                text = r.read().decode()
            return sum(int(v) for labels, v in re.findall(r"^tiled_requests_total\{([^}]*)\} (\d+)$", text, re.M)
                       if 'transport="grpc"' in labels)

        before = grpc_total()
        client = grpcclient.InferenceServerClient(self.target)
        try:
            answers = self.open_stream(client)
            a = np.arange(3, dtype=np.uint8)
            for repeats in ([2], [3], [1, 1], [4]):  # the third is refused
                client.async_stream_infer("tile", triton_inputs(grpcclient, a, repeats))
            got = [answers.get(timeout=60) for _ in range(4)]
            client.stop_stream()
        finally:
            client.close()
        self.assertEqual([e is None for _, e in got], [True, True, False, True])
        self.assertEqual(grpc_total() - before, 4)

    def test_readme_snippet(self):
        """The streaming example of docs/protocols.md runs and prints what it shows."""
        self.assertEqual(*readme_python_output("start_stream", self.d.port, grpc_port=self.d.grpc_port))

    def wait_for_499(self, before):
        self.assertTrue(wait_until(lambda: any(e["status"] == 499 for e in
                                               access_entries(self.d, "/ModelStreamInfer")[before:])),
                        access_entries(self.d, "/ModelStreamInfer")[before:])

    def assert_still_streaming(self):
        client = grpcclient.InferenceServerClient(self.target)
        try:
            answers = self.open_stream(client)
            a = np.arange(5, dtype=np.int32)
            client.async_stream_infer("tile", triton_inputs(grpcclient, a, [3]), request_id="after")
            result, error = answers.get(timeout=60)
            client.stop_stream()
        finally:
            client.close()
        self.assertIsNone(error)
        self.assert_tiled(result, a, [3])

    def test_stream_deadline(self):
        before = len(settled_access_entries(self.d, "/ModelStreamInfer"))
        inputs = triton_inputs(grpcclient, *self.BIG)
        for _ in range(20):
            client = grpcclient.InferenceServerClient(self.target)
            try:
                answers = self.open_stream(client, stream_timeout=0.05)
                try:
                    client.async_stream_infer("tile", inputs)
                except InferenceServerException:
                    continue  # the deadline passed before the request went out (a loaded client): again
                result, error = answers.get(timeout=60)
                break
            finally:
                client.close()
        else:
            self.fail("no request went out within a stream's 50 ms in 20 tries")
        self.assertIsNone(result)
        self.assertIn("Deadline", str(error))
        self.wait_for_499(before)
        self.assert_still_streaming()

    def test_cancel_mid_stream(self):
        before = len(settled_access_entries(self.d, "/ModelStreamInfer"))
        client = grpcclient.InferenceServerClient(self.target)
        try:
            self.open_stream(client)
            client.async_stream_infer("tile", triton_inputs(grpcclient, *self.BIG))
            self.assertTrue(wait_until(lambda: inflight(self.d) > 0))
            client.stop_stream(cancel_requests=True)
        finally:
            client.close()
        self.wait_for_499(before)
        self.assert_still_streaming()


def wait_until(cond):
    """True once cond() is; False after 60 s (which only a hang reaches)."""
    return wait_for(cond, 60)


class ApiKeys(GrpcCase):
    """With --api-key-file, every RPC but ServerLive, ServerReady and the
    health service needs `authorization: Bearer KEY` metadata."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.keyfile = os.path.join(cls.dir, "keys")
        with open(cls.keyfile, "w") as f:
            f.write("grpc-key-123\n")
        cls.daemon_args = ("--api-key-file", cls.keyfile)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.dir)

    def test_keys_in_metadata(self):
        good = {"authorization": "Bearer grpc-key-123"}
        h = error_of(lambda: self.http.get_model_metadata("tile"))
        for headers in (None, {"authorization": "Bearer wrong"}, {"authorization": "grpc-key-123"}):
            with self.subTest(headers=headers):
                e = error_of(lambda: self.client.get_model_metadata("tile", headers=headers))
                self.assertEqual(e.status(), str(grpc.StatusCode.UNAUTHENTICATED))
                self.assertEqual(e.message(), h.message())
                e = error_of(lambda: self.client.infer("tile", triton_inputs(
                    grpcclient, np.arange(2, dtype=np.int8), [2]), headers=headers))
                self.assertEqual(e.status(), str(grpc.StatusCode.UNAUTHENTICATED))
        self.assertEqual(self.client.get_model_metadata("tile", headers=good).name, "tile")
        a = np.arange(3, dtype=np.int8)
        self.assertTrue(np.array_equal(self.grpc_infer(a, [2], headers=good).as_numpy("output"), np.tile(a, 2)))

    def test_stream_needs_the_key_in_its_metadata(self):
        a = np.arange(3, dtype=np.int8)
        for headers, code in ((None, "UNAUTHENTICATED"), ({"authorization": "Bearer grpc-key-123"}, None)):
            client = grpcclient.InferenceServerClient(self.target)
            answers = queue.Queue()
            try:
                client.start_stream(callback=lambda result, error: answers.put((result, error)), headers=headers)
                try:
                    client.async_stream_infer("tile", triton_inputs(grpcclient, a, [2]))
                except InferenceServerException:  # refused from the head already: the callback has it
                    self.assertTrue(code)
                result, error = answers.get(timeout=60)
            finally:
                client.close()
            with self.subTest(headers=headers):
                if code:
                    self.assertIsNone(result)
                    self.assertIn(code, str(error))
                else:
                    self.assertIsNone(error)
                    self.assertTrue(np.array_equal(result.as_numpy("output"), np.tile(a, 2)))

    def test_health_is_open(self):
        self.assertTrue(self.client.is_server_live())
        self.assertTrue(self.client.is_server_ready())
        health = self.P.stub(self.channel, "grpc.health.v1.Health")
        self.assertEqual(health.Check(self.P.msg("grpc.health.v1.HealthCheckRequest")).status, 1)


class Overload(GrpcCase):
    """One worker and a queue of two: calls beyond them get UNAVAILABLE with
    HTTP's 503 message at once, the others their whole answer."""

    daemon_args = ("--workers", "1", "--queue", "2", "--stream-threshold", "64M", "--log-level", "warn")

    def test_flood_gets_unavailable_and_recovers(self):
        a = np.arange(1024, dtype=np.float32)
        req = self.raw_request(a, [4096])  # 16 MiB, tiled on the worker
        want = np.tile(a, 4096)
        futures = [self.stub.ModelInfer.future(req) for _ in range(16)]
        ok, busy = 0, []
        for f in futures:
            try:
                self.assertTrue(np.array_equal(output_array(f.result(timeout=120)), want))
                ok += 1
            except grpc.RpcError as e:
                busy.append((e.code(), e.details()))
        self.assertGreater(ok, 0)
        self.assertTrue(busy, "16 calls never filled a queue of 2")
        self.assertEqual(set(busy), {(grpc.StatusCode.UNAVAILABLE,
                                      "server overloaded: 2 requests are already queued; retry later")})
        small = np.arange(3, dtype=np.int8)
        self.assertTrue(np.array_equal(output_array(self.stub.ModelInfer(self.raw_request(small, [2]))),
                                       np.tile(small, 2)))

    def test_a_refused_stream_request_is_an_error_message_and_the_stream_goes_on(self):
        a = np.arange(1024, dtype=np.float32)
        clients = [grpcclient.InferenceServerClient(self.target) for _ in range(16)]
        try:
            answers = []
            for client in clients:
                answers.append(queue.Queue())
                client.start_stream(callback=lambda result, error, q=answers[-1]: q.put((result, error)))
            for client in clients:  # 16 MiB each, on the worker: more than one worker and a queue of 2
                client.async_stream_infer("tile", triton_inputs(grpcclient, a, [4096]))
            first = [q.get(timeout=120) for q in answers]
            busy = [e.message() for r, e in first if e is not None]
            self.assertTrue(busy, "16 streams never filled a queue of 2")
            self.assertEqual(set(busy), {"server overloaded: 2 requests are already queued; retry later"})
            for r, e in first:
                if e is None:
                    self.assertTrue(np.array_equal(r.as_numpy("output"), np.tile(a, 4096)))
            small = np.arange(3, dtype=np.int8)
            for client in clients:  # every stream still serves
                client.async_stream_infer("tile", triton_inputs(grpcclient, small, [2]))
            for q in answers:
                r, e = q.get(timeout=120)
                self.assertIsNone(e)
                self.assertTrue(np.array_equal(r.as_numpy("output"), np.tile(small, 2)))
        finally:
            for client in clients:
                client.close()


class Tls(unittest.TestCase):
    """--tls-cert/--tls-key serve gRPC over TLS too (grpcs://): tritonclient
    with ssl=True and the certificate as its root works; plaintext does not."""

    def test_tritonclient_over_tls(self):
        cert, key = make_certificate()
        self.addCleanup(shutil.rmtree, os.path.dirname(cert))
        d = Daemon("--grpc-port", "0", "--tls-cert", cert, "--tls-key", key, scheme="https")
        try:
            client = grpcclient.InferenceServerClient(f"127.0.0.1:{d.grpc_port}", ssl=True,
                                                      root_certificates=cert)
            self.assertTrue(client.is_server_ready())
            a = np.arange(6, dtype=np.int16).reshape(2, 3)
            inputs = triton_inputs(grpcclient, a, [1, 2])
            self.assertTrue(np.array_equal(client.infer("tile", inputs).as_numpy("output"), np.tile(a, (1, 2))))
            client.close()
            plain = grpcclient.InferenceServerClient(f"127.0.0.1:{d.grpc_port}")
            e = error_of(lambda: plain.is_server_live(client_timeout=5))
            self.assertIn(e.status(), (str(grpc.StatusCode.UNAVAILABLE), str(grpc.StatusCode.DEADLINE_EXCEEDED)))
            plain.close()
        finally:
            self.assertEqual(d.stop(), 0)


class SharedMemoryGrpc(GrpcCase):
    """Triton's system shared memory through tritonclient.grpc and
    tritonclient.utils.shared_memory, unmodified."""

    daemon_args = ("--shared-memory", "system")

    def region(self, size):
        name = f"g_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        handle = shm.create_shared_memory_region(name, "/tiled_" + name, size)
        self.addCleanup(shm.destroy_shared_memory_region, handle)
        return name, "/tiled_" + name, handle

    def test_infer_through_regions(self):
        self.assertIn("system_shared_memory", self.client.get_server_metadata().extensions)
        in_name, in_key, inp = self.region(4096)
        out_name, out_key, out = self.region(1 << 16)
        self.client.register_system_shared_memory(in_name, in_key, 4096)
        self.client.register_system_shared_memory(out_name, out_key, 1 << 16)
        self.addCleanup(self.client.unregister_system_shared_memory)
        status = self.client.get_system_shared_memory_status()
        self.assertEqual({(r.name, r.key, r.byte_size) for r in status.regions.values()},
                         {(in_name, in_key, 4096), (out_name, out_key, 1 << 16)})
        for dt in (np.float32, np.int64, np.uint8, np.float16):
            with self.subTest(dtype=np.dtype(dt).name):
                a = sample(dt, (2, 3, 4), self.rng)
                repeats = np.array([2, 1, 3], dtype=np.int64)
                shm.set_shared_memory_region(inp, [a])
                shm.set_shared_memory_region(inp, [repeats], offset=2048)
                inputs = [grpcclient.InferInput("input", list(a.shape), np_to_triton_dtype(a.dtype)),
                          grpcclient.InferInput("repeats", [3], "INT64")]
                inputs[0].set_shared_memory(in_name, a.nbytes)
                inputs[1].set_shared_memory(in_name, repeats.nbytes, offset=2048)
                output = grpcclient.InferRequestedOutput("output")
                output.set_shared_memory(out_name, 1 << 16)
                result = self.client.infer("tile", inputs, outputs=[output])
                meta = result.get_output("output")
                want = np.tile(a, repeats)
                self.assertEqual((meta.datatype, list(meta.shape)), (np_to_triton_dtype(a.dtype), list(want.shape)))
                got = shm.get_contents_as_numpy(out, dt, want.shape)
                self.assertEqual(got.tobytes(), want.tobytes())
        self.client.unregister_system_shared_memory(in_name)
        self.assertEqual([r.name for r in self.client.get_system_shared_memory_status().regions.values()],
                         [out_name])

    def test_errors_as_over_http(self):
        a = np.arange(4, dtype=np.float32)

        def call(module, client):
            inputs = triton_inputs(module, a, [2])
            inputs[0].set_shared_memory("no_such_region", a.nbytes)
            return lambda: client.infer("tile", inputs)

        self.assert_same_error_as_http(call(httpclient, self.http), call(grpcclient, self.client))
        self.assert_same_error_as_http(lambda: self.http.get_system_shared_memory_status("no_such_region"),
                                       lambda: self.client.get_system_shared_memory_status("no_such_region"))


class Drain(unittest.TestCase):
    """SIGTERM: calls in flight finish with their whole answer, new calls get
    UNAVAILABLE (the client, told by the GOAWAY, opens no stream on the draining
    connection, and a new connection is refused), health says NOT_SERVING, and
    the daemon exits 0."""

    def test_sigterm_with_streams_open(self):
        """A stream answering a request finishes that answer; then, as an idle stream at
        once, it ends with UNAVAILABLE, so the daemon exits without waiting for the client."""
        d = Daemon("--grpc-port", "0", "--workers", "1", "--log-level", "warn")
        idle, busy = (grpcclient.InferenceServerClient(f"127.0.0.1:{d.grpc_port}") for _ in range(2))
        try:
            answers = {}
            for name, client in (("idle", idle), ("busy", busy)):
                answers[name] = queue.Queue()
                client.start_stream(callback=lambda result, error, q=answers[name]: q.put((result, error)))
            a = np.arange(4, dtype=np.float32)
            idle.async_stream_infer("tile", triton_inputs(grpcclient, a, [2]))
            result, error = answers["idle"].get(timeout=60)
            self.assertIsNone(error)
            big = np.arange(1024, dtype=np.float32)
            busy.async_stream_infer("tile", triton_inputs(grpcclient, big, [16384]))  # 64 MiB
            # A stream waiting for its next message counts as in flight, so the busy stream
            # does until its request comes: once the daemon holds nothing, it has read the
            # request and handed the answer to the transport, which may still be sending it.
            self.assertTrue(wait_until(lambda: inflight(d) == 0 or not answers["busy"].empty()))
            d.proc.send_signal(signal.SIGTERM)
            result, error = answers["idle"].get(timeout=60)
            self.assertIsNone(result)
            self.assertIn("shutting down", str(error))
            result, error = answers["busy"].get(timeout=120)
            self.assertIsNone(error)
            self.assertTrue(np.array_equal(result.as_numpy("output"), np.tile(big, 16384)))
            result, error = answers["busy"].get(timeout=60)
            self.assertIn("shutting down", str(error))
            self.assertEqual(d.proc.wait(60), 0)
        finally:
            idle.close()
            busy.close()
            d.stop()

    def test_sigterm_with_calls_in_flight(self):
        P = protos()
        d = Daemon("--grpc-port", "0", "--workers", "1", "--log-level", "warn")
        target = f"127.0.0.1:{d.grpc_port}"
        channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)])
        try:
            stub = P.stub(channel)
            health = P.stub(channel, "grpc.health.v1.Health")
            a = np.arange(1024, dtype=np.float32)
            req = P.msg("inference.ModelInferRequest", model_name="tile")
            req.inputs.add(name="input", datatype="FP32", shape=[1024])
            req.inputs.add(name="repeats", datatype="INT64", shape=[1])
            req.raw_input_contents.extend([a.tobytes(), np.array([16384], dtype=np.int64).tobytes()])
            self.assertEqual(health.Check(P.msg("grpc.health.v1.HealthCheckRequest")).status, 1)
            # Eight 64 MiB answers queued on one worker: some are still running at the signal.
            futures = [stub.ModelInfer.future(req) for _ in range(8)]
            # Wait until the daemon has every call (its in-flight gauge, plus those already
            # answered), not for a fixed time: a call not yet received at the signal is a new one.
            deadline = time.monotonic() + 60
            while inflight(d) + sum(f.done() for f in futures) < len(futures) and time.monotonic() < deadline:
                time.sleep(0.005)
            in_flight = [f for f in futures if not f.done()]
            self.assertTrue(in_flight, "every call ended before the signal")
            d.proc.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 5:
                try:
                    status = health.Check(P.msg("grpc.health.v1.HealthCheckRequest"), timeout=5).status
                except grpc.RpcError as e:
                    status = e.code()
                if status != 1:
                    break
                time.sleep(0.005)
            self.assertIn(status, (2, grpc.StatusCode.UNAVAILABLE))  # NOT_SERVING, or refused
            # A new call while those finish: refused.
            e = grpc_error(lambda: stub.ServerReady(P.msg("inference.ServerReadyRequest"), timeout=10))
            self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE)
            refused_while = sum(not f.done() for f in futures)
            want = np.tile(a, 16384)
            for f in futures:
                self.assertTrue(np.array_equal(output_array(f.result(timeout=120)), want))
            rc = d.proc.wait(60)
            print(f"\n  drain: {len(in_flight)} of 8 calls in flight at SIGTERM, all answered whole; health "
                  f"{status}; a new call refused ({e.details()!r}) with {refused_while} still running; exit {rc}")
            self.assertEqual(rc, 0)
        finally:
            channel.close()
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()


if __name__ == "__main__":
    unittest.main()
