#!/usr/bin/python3
"""gen_corpus.py - writes the seed inputs of the fuzz targets to fuzz/corpus/.

    /usr/bin/python3 fuzz/gen_corpus.py

The seeds are committed; this script documents how they were made and
rebuilds them (it needs numpy for the .npy files). Each seed is a small,
valid request that reaches a different part of a decoder: every dtype
family, every semantics, the optional fields, and the unusual but legal
forms (data before dtype, big-endian and Fortran-order .npy, version 2.0
and 3.0 headers, binary v2 inputs, raw and typed gRPC contents).
"""
import io
import json
import os
import shutil
import struct
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def write_seeds(target, seeds):
    """A target's seed directory made anew from {name: bytes}."""
    shutil.rmtree(os.path.join(ROOT, target), ignore_errors=True)
    for name, data in seeds.items():
        write(target, name, data)


# ---- /v1 JSON bodies --------------------------------------------------------

V1_JSON = {
    "float32_onnx": '{"input":{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]},"repeats":[1,2]}',
    "int64_nested_numpy": '{"input":{"dtype":"int64","data":[[1,-2],[3,9223372036854775807]]},'
                          '"repeats":[2],"semantics":"numpy"}',
    "float16_onnx1": '{"input":{"dtype":"float16","shape":[3],"data":[0.1,65504,-0.0]},'
                     '"semantics":"onnx1","tiles":3,"axis":-1}',
    "complex64_pairs": '{"input":{"dtype":"complex64","shape":[2],"data":[[1,2],[3.5,-4e10]]},"repeats":[2]}',
    "string_escapes": '{"input":{"dtype":"str","shape":[3],"data":["a\\"b","\\u00e9\\ud83d\\ude00","\\n\\u0000"]},'
                      '"repeats":[2]}',
    "bool": '{"input":{"dtype":"bool","shape":[2,1],"data":[[true],[false]]},"repeats":[1,3]}',
    "bfloat16_specials": '{"input":{"dtype":"bfloat16","shape":[4],"data":["NaN","Infinity","-inf",1.5]},'
                         '"repeats":[2],"semantics":"openvino"}',
    "int_ranges": '{"input":{"dtype":"uint64","shape":[2],"data":[18446744073709551615,0]},"repeats":[2]}',
    "int8_directml": '{"input":{"dtype":"int8","shape":[1,2,1],"data":[-128,127]},"repeats":[2,1,3],'
                     '"semantics":"directml"}',
    "data_first": '{"repeats":[2,1],"input":{"data":[[1,2,3]],"shape":[1,3],"dtype":"uint16"}}',
    "scalar": '{"input":{"dtype":"int32","shape":[],"data":7},"repeats":[]}',
    "float64_exponents": '{"input":{"dtype":"DOUBLE","data":[1e-300,5e-324,1.7976931348623157e308,2.5E+3]},'
                         '"repeats":[3]}',
    "empty": '{"input":{"dtype":"float32","shape":[0,3],"data":[]},"repeats":[4,2]}',
    "complex128_nested": '{"input":{"dtype":"complex128","data":[[[1,0],[0,1]],[[-1,0.5],[2,2]]]},'
                         '"repeats":[1,2],"semantics":"ONNX"}',
    "uint8_promote": '{"input":{"dtype":"u1","shape":[3],"data":[0,128,255]},"repeats":[2,1,2],'
                     '"semantics":"numpy"}',
}

# ---- raw bodies: query, NUL, element bytes ------------------------------------


def wire_strings(items):
    return b"".join(struct.pack("<I", len(s)) + s for s in items)


RAW = {
    "float32": ("dtype=float32&shape=2,2&repeats=1,2", struct.pack("<4f", 1, 2.5, -3, 1e30)),
    "strings": ("dtype=str&shape=2&repeats=3", wire_strings([b"ab", "\u00e9t\u00e9".encode()])),
    "bfloat16_numpy": ("dtype=bfloat16&shape=3&semantics=numpy&repeats=2,2", bytes([0x80, 0x3F, 0xC0, 0x7F, 0x80, 0xFF])),
    "complex128": ("dtype=complex128&shape=1&repeats=2", struct.pack("<2d", 1.5, -2)),
    "bool_scalar": ("dtype=bool&shape=&repeats=", b"\x01"),
    "float16_onnx1": ("semantics=onnx1&tiles=2&axis=0&dtype=float16&shape=2", struct.pack("<2e", 0.1, -65504)),
    "int8_directml": ("dtype=int8&shape=2,1&repeats=1,4&semantics=directml", b"\x80\x7f"),
    "uint64_openvino": ("dtype=uint64&shape=2&repeats=2,1,2&semantics=openvino", struct.pack("<2Q", 2**64 - 1, 1)),
    "empty": ("dtype=int16&shape=0,4&repeats=3,1", b""),
    "strings_not_utf8": ("repeats=2&dtype=string&shape=3", wire_strings([b"\xff\xfe", b"", b"ok\x00"])),
    "float64_specials": ("dtype=float64&shape=3&repeats=2",
                         struct.pack("<3d", float("nan"), float("inf"), -0.0) ),
    "int32_onnx_name": ("dtype=INT32&shape=2,1,2&repeats=1,1,1", struct.pack("<4i", -1, 0, 2**31 - 1, -2**31)),
    "complex64_negative_axis": ("dtype=c8&shape=1,2&semantics=onnx&repeats=2,2", struct.pack("<4f", 1, -1, 0.5, 2)),
}

# ---- .npy files ----------------------------------------------------------------


def npy(arr, version=None):
    f = io.BytesIO()
    np.lib.format.write_array(f, arr, version=version, allow_pickle=False)
    return f.getvalue()


def npy_hand(header, data, version=1):
    """A .npy file with a hand-written header dict (padded to 64 bytes)."""
    pre = 10 if version == 1 else 12
    h = header.encode()
    total = (pre + len(h) + 1 + 63) // 64 * 64
    h = h + b" " * (total - pre - len(h) - 1) + b"\n"
    n = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + n + h + data


NPY = {
    "float32_v1": npy(np.arange(6, dtype="<f4").reshape(2, 3)),
    "float64_big_endian": npy(np.array([1.5, -0.0, np.inf, np.nan], dtype=">f8")),
    "int16_fortran": npy(np.asfortranarray(np.arange(12, dtype="<i2").reshape(3, 4))),
    "uint32_be_fortran_3d": npy(np.asfortranarray(np.arange(24, dtype=">u4").reshape(2, 3, 4))),
    "bool": npy(np.array([True, False, True])),
    "complex64_be": npy(np.array([1 + 2j, -3.5j], dtype=">c8")),
    "complex128": npy(np.array([[1 - 1j]], dtype="<c16")),
    "float16_v2": npy(np.array([0.1, 65504, -2], dtype="<f2"), version=(2, 0)),
    "unicode_v3": npy(np.array(["h\u00e9llo", "\U0001F600", ""]), version=(3, 0)),
    "bytes": npy(np.array([b"ab", b"a\x00b", b""], dtype="S3")),
    "unicode_be": npy(np.array(["xy", "z"], dtype=">U2")),
    "scalar_int8": npy(np.array(-5, dtype="i1")),
    "empty_uint64": npy(np.zeros((0, 2), dtype="<u8")),
    "hand_header": npy_hand("{\"descr\":\"<i8\",'shape':(2L,),'fortran_order':False,}", struct.pack("<2q", -1, 2)),
    "hand_v2": npy_hand("{'descr': '=u2', 'fortran_order': True, 'shape': (1, 2, ), }", struct.pack("<2H", 7, 8), 2),
}

# ---- v2 infer requests: header length (2 bytes, 0xFFFF = none), version, body ----


def v2(body, version=13, binary=b""):
    body = json.dumps(body, separators=(",", ":")).encode() if not isinstance(body, bytes) else body
    hl = 0xFFFF if not binary else len(body)
    sel = {13: 0, 6: 1, 1: 2}[version]
    return struct.pack(">HB", hl, sel) + body + binary


def inp(name, dtype, shape, data=None, binary=None):
    d = {"name": name, "datatype": dtype, "shape": shape}
    if binary is not None:
        d["parameters"] = {"binary_data_size": binary}
    else:
        d["data"] = data
    return d


V2 = {
    "fp32_json": v2({"inputs": [inp("input", "FP32", [2, 2], [1, 2, 3, 4]), inp("repeats", "INT64", [2], [1, 2])]}),
    "id_outputs": v2({"id": "r\u00e9q-1", "inputs": [inp("input", "INT32", [3], [1, -2, 3]),
                                                     inp("repeats", "INT32", [1], [2])],
                      "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}),
    "binary_input": v2({"inputs": [inp("input", "UINT8", [3], binary=3), inp("repeats", "INT64", [1], [2])],
                        "parameters": {"binary_data_output": True}}, binary=b"\x01\x02\x03"),
    "binary_both": v2({"inputs": [inp("input", "FP16", [2], binary=4), inp("repeats", "UINT8", [1], binary=1)]},
                      binary=struct.pack("<2e", 1, -0.5) + b"\x03"),
    "bytes_json": v2({"inputs": [inp("input", "BYTES", [2], ["a", "\u00e9\n"]), inp("repeats", "INT64", [1], [2])]}),
    "bytes_binary": v2({"inputs": [inp("input", "BYTES", [2], binary=13), inp("repeats", "INT64", [1], [3])]},
                       binary=wire_strings([b"abc", b"\xff\x00"])),
    "version1": v2({"inputs": [inp("input", "FP64", [2, 1], [[0.5], [1e300]]), inp("tiles", "INT64", [1], [3]),
                               inp("axis", "INT8", [1], [-1])]}, version=1),
    "version6_bool": v2({"inputs": [inp("repeats", "INT64", [2], [2, 2]), inp("input", "BOOL", [1, 2], [True, False])]},
                        version=6),
    "complex64": v2({"inputs": [inp("input", "COMPLEX64", [2], [1, 2, 3, 4]), inp("repeats", "INT64", [1], [2])]}),
    "semantics_numpy": v2({"parameters": {"semantics": "numpy"},
                           "inputs": [inp("input", "INT16", [2], [1, 2]), inp("repeats", "INT64", [2], [2, 3])]}),
    "bf16_specials": v2({"inputs": [inp("input", "BF16", [3], ["NaN", "Infinity", 2]),
                                    inp("repeats", "UINT64", [1], [2])]}),
    "data_first": v2(b'{"inputs":[{"data":[[1,2]],"shape":[1,2],"name":"input","datatype":"INT64"},'
                     b'{"name":"repeats","datatype":"INT64","shape":[2],"data":[2,1]}],'
                     b'"outputs":[{"name":"output"}],"id":""}'),
    "complex128_binary_out": v2({"inputs": [inp("input", "COMPLEX128", [1], [0.5, -1]),
                                            inp("repeats", "INT64", [1], [3])],
                                 "parameters": {"binary_data_output": True}}),
}

# ---- grpc: ModelInferRequest protobuf messages ------------------------------------


def pb_varint(v):
    v &= (1 << 64) - 1
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def pb_len(field, data):
    data = data.encode() if isinstance(data, str) else data
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def pb_packed(field, values):
    return pb_len(field, b"".join(pb_varint(v) for v in values))


def ginp(name, datatype, shape, contents=None):
    m = pb_len(1, name) + pb_len(2, datatype) + (pb_packed(3, shape) if shape else b"")
    return pb_len(5, m + (pb_len(5, contents) if contents is not None else b""))


def gparam(key, string):
    return pb_len(4, pb_len(1, key) + pb_len(2, pb_len(3, string)))


GRPC = {
    "raw_fp32": pb_len(1, "tile") + pb_len(2, "13") + ginp("input", "FP32", [2, 2]) + ginp("repeats", "INT64", [2])
    + pb_len(6, pb_len(1, "output")) + pb_len(7, struct.pack("<4f", 1, 2, 3, 4)) + pb_len(7, struct.pack("<2q", 2, 3)),
    "typed_int": pb_len(1, "tile") + pb_len(3, "id-1") + ginp("input", "INT32", [3], pb_packed(2, [1, -2, 3]))
    + ginp("repeats", "INT64", [1], pb_packed(3, [2])),
    "typed_unpacked_bool": ginp("input", "BOOL", [2], pb_varint(1 << 3) + b"\x01" + pb_varint(1 << 3) + b"\x00")
    + ginp("repeats", "UINT8", [1], pb_packed(4, [3])),
    "typed_fp": ginp("input", "FP64", [1], pb_len(7, struct.pack("<d", 0.5)))
    + ginp("repeats", "INT64", [1], pb_packed(3, [2])) + ginp("x", "FP32", [2], pb_len(6, struct.pack("<2f", 1, -1))),
    "typed_bytes": ginp("input", "BYTES", [2], pb_len(8, "a") + pb_len(8, "\u00e9\n"))
    + ginp("repeats", "INT64", [1], pb_packed(3, [2])) + gparam("semantics", "numpy"),
    "raw_bytes": ginp("input", "BYTES", [2]) + pb_len(7, struct.pack("<I", 1) + b"a" + struct.pack("<I", 0)),
    "raw_fp16": ginp("input", "FP16", [2]) + pb_len(7, struct.pack("<2H", 0x3C00, 0x7E00)),
    "raw_complex": ginp("input", "COMPLEX64", [1, 1]) + pb_len(7, struct.pack("<2f", 1, 2)),
    "scalar_bf16": ginp("input", "BF16", []) + pb_len(7, b"\x80\x3f"),
    # Written by tritonclient.grpc 2.73 and by the protobuf library (tests/api/test_grpc_infer.c).
    "tritonclient_raw": bytes.fromhex(
        "0a0474696c65120231331a02723122140a0973656d616e7469637312071a056e756d70792a110a05696e7075741204465033321a02"
        "02022a130a07726570656174731205494e5436341a01022a0d0a0173120542595445531a010232080a066f75747075743a100000803f"
        "0000004000004040000080403a10020000000000000003000000000000003a0a02000000616200000000"),
    "protobuf_typed": bytes.fromhex(
        "0a0474696c652a230a05696e7075741205494e5431361a01032a10120effffffffffffffffff0102c0b8022a220a07726570656174"
        "73120655494e5436341a01012a0c2a0affffffffffffffffff012a160a0162120542595445531a01022a074201784202797a2a150a"
        "01641204465036342a0a3a08000000000000e0bf"),
}


# ---- lists: max item count byte, then text -----------------------------------------

LISTS = {
    "list_simple": b"\x10" + b"1,2,3",
    "list_spaces": b"\x08" + b" 2 ,\t3 , 0",
    "list_limits": b"\x04" + b"-9223372036854775808,9223372036854775807",
    "list_empty": b"\x02",
    "list_leading_zeros": b"\x40" + b"007,-0,00",
    "int_negative": b"\x01" + b"-42",
    "semantics_onnx1": b"\x01" + b"onnx1",
    "semantics_case": b"\x01" + b"DirectML",
    "dtype_numpy": b"\x01" + b"float32",
    "dtype_kserve": b"\x01" + b"FP32",
    "dtype_alias": b"\x01" + b"bool_",
    "dtype_onnx": b"\x01" + b"COMPLEX128",
    "dtype_question": b"\x01" + b"?",
}


def main():
    for t in ("v1_json", "raw", "npy", "v2", "lists", "grpc"):
        shutil.rmtree(os.path.join(ROOT, t), ignore_errors=True)
    for name, body in V1_JSON.items():
        json.loads(body)  # the seeds themselves must be valid JSON
        write("v1_json", name + ".json", body)
    for name, (query, body) in RAW.items():
        write("raw", name, query.encode() + b"\x00" + body)
    for name, data in NPY.items():
        write("npy", name + ".npy", data)
    for name, data in V2.items():
        write("v2", name, data)
    for name, data in LISTS.items():
        write("lists", name, data)
    for name, data in GRPC.items():
        write("grpc", name, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
