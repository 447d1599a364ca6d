"""pbsamples.py - valid requests of every RPC tiled decodes by hand, built
with the Python protobuf stubs of api/proto/ (`make grpc-stubs`, build/grpc),
for pbreencode.py to write in other ways (tests/server/test_pb_differential.py,
fuzz/gen_pbdiff_corpus.py).

Each sample is (rpc, message): rpc is the method's full path.
"""
import struct

SERVICE = "/inference.GRPCInferenceService/"


def _param(pb, **kw):
    p = pb.InferParameter()
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def infer_requests(pb):
    """ModelInferRequests that tiled answers (and a few it refuses for their
    meaning): typed and raw contents of each datatype class, parameters,
    requested outputs, ids, versions."""
    out = []

    def req(inputs, raw=None, name="tile", version="", rid="", params=None, outputs=()):
        r = pb.ModelInferRequest(model_name=name, model_version=version, id=rid)
        for n, dtype, shape, contents in inputs:
            t = r.inputs.add(name=n, datatype=dtype, shape=shape)
            if contents:
                for field, values in contents.items():
                    getattr(t.contents, field).extend(values)
        for b in raw or ():
            r.raw_input_contents.append(b)
        for k, v in (params or {}).items():
            r.parameters[k].CopyFrom(v)
        for o in outputs:
            r.outputs.add(name=o)
        return r

    rep = ("repeats", "INT64", [2], {"int64_contents": [2, 3]})
    rep1 = ("repeats", "INT64", [1], {"int64_contents": [3]})
    out.append(req([("input", "FP32", [2, 2], {"fp32_contents": [1.5, -2, 3, 4]}), rep]))
    out.append(req([("input", "INT32", [3], {"int_contents": [-1, 2, 2147483647]}), rep1], rid="id-1"))
    out.append(req([("input", "INT8", [4], {"int_contents": [-128, 127, 0, 5]}), rep1], version="13"))
    out.append(req([("input", "UINT16", [2], {"uint_contents": [65535, 7]}), rep1]))
    out.append(req([("input", "UINT64", [2], {"uint64_contents": [2**64 - 1, 1]}), rep1]))
    out.append(req([("input", "BOOL", [3], {"bool_contents": [True, False, True]}), rep1]))
    out.append(req([("input", "FP64", [1, 2], {"fp64_contents": [0.25, -1e300]}), rep]))
    out.append(req([("input", "BYTES", [2], {"bytes_contents": [b"ab", b"\x00\xff"]}), rep1]))
    out.append(req([("input", "INT64", [0, 3], {}), rep], params={"semantics": _param(pb, string_param="numpy")}))
    out.append(req([("input", "FP16", [2], None), ("repeats", "INT64", [1], None)],
                   raw=[struct.pack("<2e", 1.0, -2.0), struct.pack("<q", 3)]))
    out.append(req([("input", "UINT8", [2, 2], None), ("repeats", "INT64", [2], None)],
                   raw=[bytes([1, 2, 3, 4]), struct.pack("<2q", 1, 2)], outputs=["output"], rid="r"))
    out.append(req([("input", "COMPLEX64", [1], None), ("repeats", "INT64", [1], None)],
                   raw=[struct.pack("<2f", 1, 2), struct.pack("<q", 2)]))
    out.append(req([("input", "INT16", [2], {"int_contents": [-300, 300]}), rep1],
                   params={"semantics": _param(pb, string_param="onnx"), "other": _param(pb, int64_param=-5),
                           "flag": _param(pb, bool_param=True), "d": _param(pb, double_param=0.5),
                           "u": _param(pb, uint64_param=7)}))
    out.append(req([("input", "FP32", [], {"fp32_contents": [7]}), ("repeats", "INT64", [0], {})]))
    # refused for their meaning (the same whatever the encoding)
    out.append(req([("input", "FP32", [2], {"fp32_contents": [1]}), rep1]))
    out.append(req([("input", "NOPE", [1], {"fp32_contents": [1]}), rep1]))
    out.append(req([("input", "INT64", [1], {"int64_contents": [1]}), rep1],
                   params={"semantics": _param(pb, int64_param=1)}))
    return [(SERVICE + "ModelInfer", r) for r in out]


def small_requests(pb, health_pb):
    """The other requests tiled reads by hand."""
    out = []
    for rpc, cls in (("ModelReady", pb.ModelReadyRequest), ("ModelMetadata", pb.ModelMetadataRequest),
                     ("ModelConfig", pb.ModelConfigRequest), ("ModelStatistics", pb.ModelStatisticsRequest)):
        for name, version in (("tile", ""), ("tile", "6"), ("tile", "1"), ("nope", ""), ("tile", "99")):
            out.append((SERVICE + rpc, cls(name=name, version=version)))
    for service in ("", "inference.GRPCInferenceService", "other"):
        out.append(("/grpc.health.v1.Health/Check", health_pb.HealthCheckRequest(service=service)))
    for name in ("", "region-a"):
        out.append((SERVICE + "SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(name=name)))
        out.append((SERVICE + "SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(name=name)))
        out.append((SERVICE + "CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest(name=name)))
    out.append((SERVICE + "SystemSharedMemoryRegister",
                pb.SystemSharedMemoryRegisterRequest(name="r", key="/tiled-pbdiff-absent", offset=8, byte_size=64)))
    out.append((SERVICE + "CudaSharedMemoryRegister",
                pb.CudaSharedMemoryRegisterRequest(name="c", raw_handle=b"\x01\x02", device_id=1, byte_size=9)))
    for cls in (pb.ServerLiveRequest, pb.ServerReadyRequest, pb.ServerMetadataRequest):
        out.append((SERVICE + cls.DESCRIPTOR.name[:-len("Request")], cls()))
    return out
