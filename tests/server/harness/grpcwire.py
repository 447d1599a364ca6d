"""gRPC messages by hand: the method paths, ModelInferRequest written and
ModelInferResponse read in protobuf's wire format, and a raw unary call."""
import numpy as np

SERVICE = "/inference.GRPCInferenceService/"
LIVE = SERVICE + "ServerLive"
INFER = SERVICE + "ModelInfer"


def raw_method(channel, path):
    """A unary call on `path` with bytes in and out."""
    return channel.unary_unary(path, request_serializer=None, response_deserializer=None)


# ---- ModelInfer by hand (protobuf wire format; field numbers of grpc_service.proto) ----

def pb_varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def pb_len(field, payload):
    return pb_varint(field << 3 | 2) + pb_varint(len(payload)) + payload


def infer_request(array, repeats):
    """ModelInferRequest for model tile: `input` (raw contents) and `repeats`."""
    def tensor(name, datatype, shape):
        return pb_len(1, name.encode()) + pb_len(2, datatype.encode()) + pb_len(3, b"".join(pb_varint(d) for d in shape))
    datatype = {"float32": "FP32", "int8": "INT8"}[str(array.dtype)]
    return (pb_len(1, b"tile") + pb_len(5, tensor("input", datatype, array.shape)) +
            pb_len(5, tensor("repeats", "INT64", [len(repeats)])) + pb_len(7, array.tobytes()) +
            pb_len(7, np.array(repeats, dtype=np.int64).tobytes()))


def raw_output(reply):
    """raw_output_contents[0] (field 6) of a ModelInferResponse."""
    i = 0
    while i < len(reply):
        key, i = read_varint(reply, i)
        if key & 7 == 0:
            _, i = read_varint(reply, i)
            continue
        n, i = read_varint(reply, i)
        if key >> 3 == 6:
            return reply[i:i + n]
        i += n
    raise AssertionError("no raw_output_contents in the reply")


def read_varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i
