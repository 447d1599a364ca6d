"""gRPC server reflection (grpc.reflection.v1alpha and v1 ServerReflectionInfo).

The daemon describes the vendored .proto files (api/proto/) from
api/grpc_descriptors.c, which scripts/grpc_descriptors.py generates; the
first test checks the committed file is what the .proto files give today.
The rest drive the daemon with grpcio's own reflection client
(grpcio-reflection), build message classes from what it resolves, and call
ModelInfer with them, as grpcurl-like tools do without the .proto files.

Run with the virtual environment scripts/venv.sh makes:
  cd tests/server && ../../build/venv/bin/python -m unittest test_grpc_reflection
"""
import os
import queue
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2 as rpb
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

sys.path.insert(0, os.path.dirname(__file__))
from harness.daemon import Daemon  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GENERATOR = os.path.join(ROOT, "scripts", "grpc_descriptors.py")
PATHS = {"v1alpha": "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
         "v1": "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"}
SERVICES = ["grpc.health.v1.Health", "inference.GRPCInferenceService"]
NOT_FOUND, INVALID_ARGUMENT = grpc.StatusCode.NOT_FOUND.value[0], grpc.StatusCode.INVALID_ARGUMENT.value[0]


def generated_descriptors():
    return subprocess.run([sys.executable, GENERATOR, "-"], capture_output=True, text=True, check=True).stdout


def vendored_files():
    """{name: FileDescriptorProto} of api/proto/, compiled by grpc_tools.protoc here."""
    from grpc_tools import protoc
    proto_dir = os.path.join(ROOT, "api", "proto")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.desc")
        names = [os.path.join(proto_dir, n) for n in os.listdir(proto_dir) if n.endswith(".proto")]
        assert protoc.main(["protoc", "-I" + proto_dir, "--include_imports", "--descriptor_set_out=" + out] + names) == 0
        with open(out, "rb") as f:
            return {fd.name: fd for fd in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file}


class CommittedDescriptors(unittest.TestCase):
    def test_generated_file_matches_the_proto_files(self):
        with open(os.path.join(ROOT, "api", "grpc_descriptors.c")) as f:
            committed = f.read()
        self.assertEqual(committed, generated_descriptors(),
                         "api/grpc_descriptors.c is stale: run make grpc-descriptors and commit it")


class ReflectionCase(unittest.TestCase):
    daemon_args = ()

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--grpc-port", "0", *cls.daemon_args)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.d.grpc_port}")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.d.stop() == 0, "daemon exit status"

    def info(self, version="v1alpha"):
        return self.channel.stream_stream(PATHS[version], request_serializer=rpb.ServerReflectionRequest.SerializeToString,
                                          response_deserializer=rpb.ServerReflectionResponse.FromString)

    def ask(self, version="v1alpha", metadata=None, **question):
        """One request on its own call (what grpcio's reflection client does)."""
        request = rpb.ServerReflectionRequest(**question)
        responses = list(self.info(version)(iter([request]), timeout=30, metadata=metadata))
        self.assertEqual(len(responses), 1)
        self.assertEqual(responses[0].original_request, request)
        return responses[0]

    def files_of(self, response):
        return {fd.name: fd for fd in map(descriptor_pb2.FileDescriptorProto.FromString,
                                          response.file_descriptor_response.file_descriptor_proto)}


class Reflection(ReflectionCase):
    def test_lists_the_services(self):
        db = ProtoReflectionDescriptorDatabase(self.channel)
        self.assertEqual(sorted(db.get_services()), SERVICES)
        for version in PATHS:
            names = [s.name for s in self.ask(version, list_services="").list_services_response.service]
            self.assertEqual(sorted(names), SERVICES, version)

    def test_model_infer_resolved_and_called(self):
        """grpcio's reflection client resolves ModelInfer's messages; a call made with classes
        built from them alone tiles like numpy.tile."""
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(self.channel))
        method = pool.FindServiceByName("inference.GRPCInferenceService").FindMethodByName("ModelInfer")
        self.assertEqual((method.input_type.full_name, method.output_type.full_name),
                         ("inference.ModelInferRequest", "inference.ModelInferResponse"))
        self.assertFalse(method.client_streaming or method.server_streaming)
        Request = message_factory.GetMessageClass(method.input_type)
        Response = message_factory.GetMessageClass(method.output_type)
        a = np.arange(6, dtype=np.int16).reshape(2, 3)
        req = Request(model_name="tile")
        for name, datatype, shape in (("input", "INT16", a.shape), ("repeats", "INT64", [2])):
            t = req.inputs.add()
            t.name, t.datatype = name, datatype
            t.shape.extend(shape)
        req.raw_input_contents.extend([a.tobytes(), np.array([2, 3], dtype=np.int64).tobytes()])
        call = self.channel.unary_unary("/" + method.containing_service.full_name + "/" + method.name,
                                        request_serializer=Request.SerializeToString,
                                        response_deserializer=Response.FromString)
        resp = call(req, timeout=30)
        out = resp.outputs[0]
        self.assertEqual((out.name, out.datatype, list(out.shape)), ("output", "INT16", [4, 9]))
        got = np.frombuffer(resp.raw_output_contents[0], dtype=np.int16).reshape(4, 9)
        self.assertTrue(np.array_equal(got, np.tile(a, (2, 3))))

    def test_files_are_the_vendored_ones(self):
        """Every file the daemon sends is the one protoc makes of api/proto/, and a file comes
        with the files it imports."""
        want = vendored_files()
        for name in want:
            with self.subTest(name=name):
                got = self.files_of(self.ask(file_by_filename=name))
                deps = {name} | set(want[name].dependency)
                self.assertEqual(set(got), deps)
                for n in deps:
                    self.assertEqual(got[n], want[n], n)

    def test_file_containing_each_kind_of_symbol(self):
        for symbol, file in (("inference.GRPCInferenceService", "grpc_service.proto"),
                             ("inference.GRPCInferenceService.ModelInfer", "grpc_service.proto"),
                             ("inference.ModelInferRequest", "grpc_service.proto"),
                             ("inference.ModelInferRequest.InferInputTensor", "grpc_service.proto"),
                             ("inference.ModelInferRequest.raw_input_contents", "grpc_service.proto"),
                             ("inference.DataType", "model_config.proto"),
                             ("inference.TYPE_FP32", "model_config.proto"),
                             ("grpc.health.v1.Health.Check", "health.proto"),
                             ("grpc.health.v1.HealthCheckResponse.SERVING", "health.proto")):
            with self.subTest(symbol=symbol):
                files = list(self.files_of(self.ask(file_containing_symbol=symbol)))
                self.assertEqual(files[0], file)

    def test_what_is_not_there_is_an_error_response(self):
        for question, code, words in (
                ({"file_containing_symbol": "inference.Nope"}, NOT_FOUND, "symbol 'inference.Nope' not found"),
                ({"file_containing_symbol": "inference.GRPCInferenceService.ModelLoad"}, NOT_FOUND,
                 "not found"),
                ({"file_by_filename": "nope.proto"}, NOT_FOUND, "file 'nope.proto' not found"),
                ({"file_containing_extension": rpb.ExtensionRequest(containing_type="inference.ModelInferRequest",
                                                                    extension_number=100)}, NOT_FOUND,
                 "no extensions"),
                ({"all_extension_numbers_of_type": "inference.Nope"}, NOT_FOUND, "type 'inference.Nope' not found"),
                ({}, INVALID_ARGUMENT, "asks nothing")):
            with self.subTest(question=question):
                r = self.ask(**question)
                self.assertEqual(r.WhichOneof("message_response"), "error_response")
                self.assertEqual(r.error_response.error_code, code)
                self.assertIn(words, r.error_response.error_message)

    def test_extension_numbers_of_a_type(self):
        r = self.ask(all_extension_numbers_of_type="inference.ModelInferRequest").all_extension_numbers_response
        self.assertEqual((r.base_type_name, list(r.extension_number)), ("inference.ModelInferRequest", []))

    def test_host_is_echoed(self):
        self.assertEqual(self.ask(host="example:8081", list_services="").valid_host, "example:8081")

    def test_a_client_that_keeps_its_side_open_gets_its_answers(self):
        """grpcurl's reflection client sends a request and waits for the answer before it sends
        the next or closes its side: each answer comes at once, on the same call, which ends OK
        when the client closes its side."""
        for version in PATHS:
            with self.subTest(version=version):
                sent = queue.Queue()

                def requests():
                    while (r := sent.get()) is not None:
                        yield r
                sent.put(rpb.ServerReflectionRequest(file_containing_symbol="inference.ModelInferRequest"))
                responses = self.info(version)(requests(), timeout=30)
                try:
                    first = next(responses)
                    self.assertEqual(list(self.files_of(first))[0], "grpc_service.proto")
                    sent.put(rpb.ServerReflectionRequest(list_services=""))
                    second = next(responses)
                    self.assertEqual(sorted(s.name for s in second.list_services_response.service), SERVICES)
                    sent.put(rpb.ServerReflectionRequest(file_by_filename="health.proto"))
                    self.assertEqual(list(self.files_of(next(responses))), ["health.proto"])
                    sent.put(None)
                    self.assertEqual(list(responses), [])
                    self.assertEqual(responses.code(), grpc.StatusCode.OK)
                finally:
                    sent.put(None)

    def test_malformed_request_fails_the_call(self):
        call = self.channel.stream_stream(PATHS["v1alpha"], request_serializer=None, response_deserializer=None)
        with self.assertRaises(grpc.RpcError) as cm:
            list(call(iter([b"\x22\x02\xc3\x28"]), timeout=30))  # file_containing_symbol not UTF-8
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("UTF-8", cm.exception.details())
        # list_services as a varint is an unknown field, as protobuf reads it:
        # the request asks nothing, which the response says
        (answer,) = list(call(iter([b"\x38\x01"]), timeout=30))
        self.assertIn(b"asks nothing", answer)

    def test_other_methods_are_unimplemented(self):
        call = self.channel.unary_unary("/grpc.reflection.v1alpha.ServerReflection/Nope", request_serializer=None,
                                        response_deserializer=None)
        with self.assertRaises(grpc.RpcError) as cm:
            call(b"", timeout=30)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)


class ReflectionWithApiKeys(ReflectionCase):
    """Reflection describes the API as /openapi.json does, under the same keys."""

    @classmethod
    def setUpClass(cls):
        fd, cls.keyfile = tempfile.mkstemp(prefix="tiled-reflection-keys-")
        with os.fdopen(fd, "w") as f:
            f.write("k-reflection\n")
        cls.daemon_args = ("--api-key-file", cls.keyfile)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        os.unlink(cls.keyfile)

    def test_needs_a_key(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.ask(list_services="")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        r = self.ask(list_services="", metadata=[("authorization", "Bearer k-reflection")])
        self.assertEqual(sorted(s.name for s in r.list_services_response.service), SERVICES)


if __name__ == "__main__":
    unittest.main()
