"""The JSON request decoders against Python's json module.

The /v1 body decoder (tile_v1_json_decode) and the Open Inference Protocol
infer decoder (tile_v2_decode), through build/tests/decode_dump, are fed
documents written in ways tiled's own encoder never writes (whitespace
between every token, \\u escapes and surrogate pairs in keys and values,
permuted keys, every spelling of a number, long mantissas, huge and tiny
exponents, integers at and past the 64-bit limits, wrong nesting) and
broken ones (trailing commas, leading zeros, '.5', '1.', '+1', NaN
literals, raw control characters, lone surrogates, bad UTF-8, truncation,
duplicate keys, random byte changes). Python's strict json (no NaN
literals, duplicate keys seen through object_pairs_hook, numbers kept as
their text) is the reference for the syntax; the element values expected
are computed exactly from the decimal text (fractions.Fraction, rounded to
nearest even at each dtype's width: float16, bfloat16, float32, float64).

For each document: when Python refuses it, tiled must refuse it ("invalid");
when Python accepts it, tiled must give the expected request bit for bit,
or refuse it for one of the documented reasons of REFUSALS below, which the
run counts. Anything else fails the test with the document shown.

The decoders read the layout clients write in one pass (api/jsonquick.h)
and hand anything else to their general reader; decode_dump decodes every
document both ways, and the two must give the same line. A share of the
documents is written in that layout (then written noisily or broken like
the rest), and the run checks that the one-pass reader accepted some.

TILED_JSON_DIFF_DOCS sets the documents per decoder (default 2500);
TILED_JSON_DIFF_SEED the seed (default fixed).
"""

import decimal
import json
import os
import random
import re
import subprocess
import sys
import unittest
from collections import Counter
from decimal import Decimal
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = os.environ.get("TILED_DECODE_DUMP", os.path.join(HERE, "..", "..", "build", "tests", "decode_dump"))
NDOCS = int(os.environ.get("TILED_JSON_DIFF_DOCS", "2500"))
SEED = int(os.environ.get("TILED_JSON_DIFF_SEED", "20261126"))
MAX_RANK = 64  # the daemon's default --max-rank (the harness uses the defaults)
MAX_DEPTH = 80  # --max-json-depth

# Documented reasons for tiled to refuse a document Python's json accepts.
# Each is a rule of tiled's request format (docs/protocols.md, api/*.h), or
# a place where RFC 8259 leaves the behaviour open; the run counts each.
REFUSALS = {
    # RFC 8259 section 4: names SHOULD be unique, and with duplicates
    # "the behavior ... is unpredictable"; docs/protocols.md: duplicate keys
    # are refused (v2: of the keys tiled reads; unknown ones are skipped).
    "duplicate-key",
    # RFC 8259 section 8.2: a lone surrogate escape (\ud800) is not a
    # Unicode character; jsonlex.h refuses it (Python keeps it).
    "lone-surrogate",
    # docs/protocols.md: /v1 is strict, an unknown key is a 400.
    "unknown-key",
    # A required member missing (input, dtype, data; v2: name, shape,
    # datatype, inputs, the model's inputs), or a member of the wrong JSON
    # type (jsonread.h: "repeats must be an array of integers, not a string").
    "missing-or-wrong-type",
    # jsonread.c: integer fields (shape, repeats, tiles, axis, binary sizes)
    # are plain JSON integers in the int64 range: 1.0, 1e0 are refused there
    # ("repeats[0] must be an integer, got 1.0"); shape dimensions >= 0.
    "int-field",
    # docs/protocols.md: dtype / datatype / semantics names from the lists.
    "unknown-name",
    # numfmt.h: integer elements must be exactly integral and in the
    # dtype's range (1.0 and 1e2 are fine, 1.5 and 256 for uint8 are not).
    "int-element",
    # numfmt.h: a finite number beyond the dtype's largest finite value
    # (after rounding) is out of range (1e400 for float64, 65520 float16).
    "float-range",
    # numfmt.h: bool is true/false only, numbers need numbers, strings
    # strings; only the NaN/Infinity spellings stand for floats.
    "element-type",
    # jsondata.h: ragged data, data not nested like the shape, element count
    # not the shape's, complex pairs (v1) / interleaved counts (v2) wrong.
    "shape",
    # The daemon's limits: --max-rank 64, --max-json-depth 80.
    "limit",
    # v2.c / v2_model.c: the model's rules (model_name 'tile', at most 3
    # inputs, one of data / binary_data_size, repeats an integer rank-1
    # tensor, an output named 'output', semantics onnx1 only on version 1).
    "v2-model",
    # jsonread.c: a string field longer than its buffer ("id" 256 bytes,
    # names and datatypes 32 or 64 bytes), counted unescaped.
    "string-length",
}


class Refuse(Exception):
    def __init__(self, cls):
        assert cls in REFUSALS, cls
        super().__init__(cls)
        self.cls = cls


class Num:
    """A JSON number kept as its text."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return "Num(%s)" % self.text


class Obj(list):
    """An object's members as (key, value) pairs in order, duplicates kept."""


def _no_constant(name):
    raise ValueError("not JSON: " + name)


def python_parse(doc):
    """The reference parse, or None when Python's strict json refuses."""
    try:
        text = doc.decode("utf-8")  # strict: no encoded surrogates, no overlongs
        return json.loads(text, parse_constant=_no_constant, parse_float=Num, parse_int=Num,
                          object_pairs_hook=Obj)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


# ---- exact rounding -------------------------------------------------------

# (exponent bits, mantissa bits) of each float width.
FORMATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}
WIDTH = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def dec(text):
    """A JSON number's exact value; an exponent beyond what Decimal holds is
    clamped (the value is then zero, or beyond every range either way)."""
    m = re.fullmatch(r"(-?[0-9.]+)(?:[eE]([+-]?[0-9]+))?", text)
    exp = int(m.group(2) or "0")
    exp = max(-10 ** 8, min(10 ** 8, exp))
    return Decimal(m.group(1)).scaleb(exp, decimal.Context(Emax=10 ** 9, Emin=-10 ** 9, prec=100000))


def round_float(text, fmt):
    """The bits of the decimal `text` rounded to nearest even, or None when
    it overflows."""
    ebits, mbits = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    emin, emax = 1 - bias, bias
    d = dec(text)
    sign = 1 if d.is_signed() else 0
    d = d.copy_abs()  # abs() would round to the context precision
    if d == 0 or d.adjusted() < -500:
        return sign << (ebits + mbits)
    if d.adjusted() > 500:
        return None
    v = Fraction(d)
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    if e < emin:
        e = emin
    q = v / Fraction(2) ** (e - mbits)
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    if n == 1 << (mbits + 1):
        n >>= 1
        e += 1
    if e > emax:
        return None
    if n < 1 << mbits:
        return (sign << (ebits + mbits)) | n
    return (sign << (ebits + mbits)) | ((e + bias) << mbits) | (n - (1 << mbits))


SPECIAL = re.compile(r"[+-]?(nan|inf|infinity)", re.I)


def float_bits(tok, fmt):
    """("bits", b) or ("nan", None) for a float element, or raises Refuse."""
    ebits, mbits = FORMATS[fmt]
    if isinstance(tok, Num):
        b = round_float(tok.text, fmt)
        if b is None:
            raise Refuse("float-range")
        return ("bits", b)
    if isinstance(tok, str) and SPECIAL.fullmatch(tok):
        if tok.lower().lstrip("+-") == "nan":
            return ("nan", None)
        sign = 1 if tok.startswith("-") else 0
        return ("bits", (sign << (ebits + mbits)) | (((1 << ebits) - 1) << mbits))
    raise Refuse("element-type")


INT_RANGE = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
    "uint8": (0, 255), "uint16": (0, 65535), "uint32": (0, (1 << 32) - 1), "uint64": (0, (1 << 64) - 1),
}
INT_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8}


def int_element(tok, dtype):
    if not isinstance(tok, Num):
        raise Refuse("element-type")
    d = dec(tok.text)
    if d != 0 and d.adjusted() > 40:
        raise Refuse("int-element")  # beyond any range (integral or not)
    if d != 0 and d.adjusted() < -5:
        raise Refuse("int-element")
    if d != d.to_integral_value():
        raise Refuse("int-element")
    v = int(d)
    lo, hi = INT_RANGE[dtype]
    if not lo <= v <= hi:
        raise Refuse("int-element")
    return (v & ((1 << (8 * INT_SIZE[dtype])) - 1)).to_bytes(INT_SIZE[dtype], "little")


PLAIN_INT = re.compile(r"-?(0|[1-9][0-9]*)")


def int_field(v, nonneg=False):
    """An integer member (shape, repeats, tiles, axis): a plain JSON integer."""
    if not isinstance(v, Num):
        raise Refuse("missing-or-wrong-type")
    if not PLAIN_INT.fullmatch(v.text):
        raise Refuse("int-field")
    n = int(v.text)
    if not -(1 << 63) <= n < (1 << 63):
        raise Refuse("int-field")
    if nonneg and n < 0:
        raise Refuse("int-field")
    return n


def int_list(v, maxn, nonneg=False):
    if not isinstance(v, list) or isinstance(v, Obj):
        raise Refuse("missing-or-wrong-type")
    if len(v) > maxn:
        raise Refuse("limit")
    return [int_field(x, nonneg) for x in v]


def string_field(v, cap):
    if not isinstance(v, str):
        raise Refuse("missing-or-wrong-type")
    b = v.encode("utf-8")
    if len(b) > cap:
        raise Refuse("string-length")
    return b


# ---- tensor data ----------------------------------------------------------


def is_arr(x):
    return isinstance(x, list) and not isinstance(x, Obj)


def infer(x, pair_leaf, depth, out):
    """The dims of nested data (numpy.array's rule), collecting leaves."""
    if depth > MAX_RANK:
        raise Refuse("limit")
    if not is_arr(x) or (pair_leaf and x and not is_arr(x[0])):
        if isinstance(x, Obj):
            raise Refuse("element-type")
        out.append(x)
        return []
    if depth == MAX_RANK:
        raise Refuse("limit")
    dims = None
    for c in x:
        d = infer(c, pair_leaf, depth + 1, out)
        if dims is None:
            dims = d
        elif d != dims:
            raise Refuse("shape")
    return [len(x)] + (dims if dims is not None else [])


def encode_elements(dtype, leaves, pairs):
    raw = b""
    strings = None
    nan_at = []
    if dtype == "str":
        strings = []
        for t in leaves:
            if not isinstance(t, str):
                raise Refuse("element-type")
            strings.append(t.encode("utf-8"))
        return raw, strings, nan_at
    if dtype == "bool":
        for t in leaves:
            if t is True or t is False:
                raw += bytes([t is True])
            else:
                raise Refuse("element-type")
        return raw, None, nan_at
    if dtype in INT_RANGE:
        return b"".join(int_element(t, dtype) for t in leaves), None, nan_at
    parts = []
    if dtype.startswith("complex"):
        fmt = "float32" if dtype == "complex64" else "float64"
        if pairs:
            for t in leaves:
                if not (is_arr(t) and len(t) == 2 and not is_arr(t[1])):
                    raise Refuse("shape")
                parts += t
        else:
            parts = leaves
    else:
        fmt = dtype
        parts = leaves
    w = WIDTH[fmt]
    for t in parts:
        kind, b = float_bits(t, fmt)
        if kind == "nan":
            nan_at.append((len(raw), w, fmt))
            b = 0
        raw += b.to_bytes(w, "little")
    return raw, None, nan_at


def expect_data(dtype, data, shape, complex_form):
    """(shape, bytes, strings, nan positions) of a tensor's data."""
    pairs = complex_form == "pairs" and dtype.startswith("complex")
    leaves = []
    dims = infer(data, pairs, 0, leaves)
    raw, strings, nan_at = encode_elements(dtype, leaves, pairs)
    have = len(leaves)
    if dtype.startswith("complex") and not pairs:
        if not dims or dims[-1] % 2:
            raise Refuse("shape")
        dims = dims[:-1] + [dims[-1] // 2]
        have //= 2
    if shape is None:
        return dims, raw, strings, nan_at
    need = 1
    for s in shape:
        need *= s
    if have != need:
        raise Refuse("shape")
    if len(dims) > 1:
        same = len(dims) <= len(shape) and dims == shape[:len(dims)]
        if not (same and (len(dims) == len(shape) or dims[-1] == 0)):
            raise Refuse("shape")
    return list(shape), raw, strings, nan_at


# ---- the request formats --------------------------------------------------

SEMANTICS = ["onnx", "onnx1", "numpy", "openvino", "directml"]


def members(obj, known, strict):
    """{key: value} of an object's known members; refuses duplicates of the
    keys read, and unknown keys when `strict`."""
    if not isinstance(obj, Obj):
        raise Refuse("missing-or-wrong-type")
    out = {}
    for k, v in obj:
        if k not in known:
            if strict:
                raise Refuse("unknown-key")
            continue
        if k in out:
            raise Refuse("duplicate-key")
        out[k] = v
    return out


def check_surrogates(x):
    if isinstance(x, str):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in x):
            raise Refuse("lone-surrogate")
    elif isinstance(x, Obj):
        for k, v in x:
            check_surrogates(k)
            check_surrogates(v)
    elif isinstance(x, list):
        for v in x:
            check_surrogates(v)


def has_duplicates(x):
    if isinstance(x, Obj):
        keys = [k for k, _ in x]
        return len(set(keys)) != len(keys) or any(has_duplicates(v) for _, v in x)
    if isinstance(x, list):
        return any(has_duplicates(v) for v in x)
    return False


def max_depth(x):
    if isinstance(x, list):  # Obj too
        vals = [v for _, v in x] if isinstance(x, Obj) else x
        return 1 + max([max_depth(v) for v in vals] or [0])
    return 0


class DtypeNames:
    def __init__(self):
        out = subprocess.run([DUMP, "dtypes"], check=True, capture_output=True, text=True).stdout
        self.v1 = {}
        self.kserve = {}
        for line in out.splitlines():
            f = line.split()
            for n in f[:3] + f[3:]:
                if n != "-":
                    self.v1[n.lower()] = f[0]
            self.kserve[f[2]] = f[0]
        self.canonical = sorted(set(self.v1.values()))


def expect_v1(doc, names):
    check_surrogates(doc)
    if max_depth(doc) > MAX_DEPTH:
        raise Refuse("limit")
    top = members(doc, {"input", "repeats", "semantics", "tiles", "axis"}, True)
    res = {"repeats": None, "has_semantics": False, "semantics": "onnx", "tiles": None, "axis": None}
    if "input" not in top:
        raise Refuse("missing-or-wrong-type")
    inp = members(top["input"], {"dtype", "shape", "data"}, True)
    if "dtype" not in inp or "data" not in inp:
        raise Refuse("missing-or-wrong-type")
    name = string_field(inp["dtype"], 64).decode("utf-8").lower()
    if name not in names.v1:
        raise Refuse("unknown-name")
    dtype = names.v1[name]
    shape = int_list(inp["shape"], MAX_RANK, nonneg=True) if "shape" in inp else None
    res["dtype"] = dtype
    res["shape"], res["raw"], res["strings"], res["nan_at"] = expect_data(dtype, inp["data"], shape, "pairs")
    if "repeats" in top:
        res["repeats"] = int_list(top["repeats"], MAX_RANK)
    if "semantics" in top:
        s = string_field(top["semantics"], 64).decode("utf-8").lower()
        if s not in SEMANTICS:
            raise Refuse("unknown-name")
        res["semantics"], res["has_semantics"] = s, True
    for k in ("tiles", "axis"):
        if k in top:
            res[k] = int_field(top[k])
    return res


def expect_v2(doc, names, version=13):
    check_surrogates(doc)
    if max_depth(doc) > MAX_DEPTH:
        raise Refuse("limit")
    top = members(doc, {"id", "parameters", "inputs", "outputs", "model_name", "model_version"}, False)
    res = {"semantics": "onnx", "id": None, "tiles": None, "axis": None}
    if "id" in top:
        res["id"] = string_field(top["id"], 256)
    binary_all = False
    if "parameters" in top:
        par = members(top["parameters"], {"semantics", "binary_data_output"}, False)
        if "semantics" in par:
            s = string_field(par["semantics"], 32).decode("utf-8").lower()
            if s not in SEMANTICS:
                raise Refuse("unknown-name")
            res["semantics"] = s
        if "binary_data_output" in par:
            if not isinstance(par["binary_data_output"], bool):
                raise Refuse("missing-or-wrong-type")
            binary_all = par["binary_data_output"]
    if "model_name" in top and string_field(top["model_name"], 64) != b"tile":
        raise Refuse("v2-model")
    if "model_version" in top and string_field(top["model_version"], 24) not in (b"", str(version).encode()):
        raise Refuse("v2-model")
    binary_output = None
    if "outputs" in top:
        outs = top["outputs"]
        if not is_arr(outs):
            raise Refuse("missing-or-wrong-type")
        for o in outs:
            om = members(o, {"name", "parameters"}, False)
            if "name" in om and string_field(om["name"], 64) != b"output":
                raise Refuse("v2-model")
            if "parameters" in om:
                pm = members(om["parameters"], {"binary_data", "shared_memory_region", "shared_memory_offset",
                                                "shared_memory_byte_size"}, False)
                if set(pm) - {"binary_data"}:
                    raise Refuse("v2-model")  # shared memory is not generated
                if "binary_data" in pm:
                    if not isinstance(pm["binary_data"], bool):
                        raise Refuse("missing-or-wrong-type")
                    binary_output = pm["binary_data"]
    if "inputs" not in top or not is_arr(top["inputs"]):
        raise Refuse("missing-or-wrong-type")
    if len(top["inputs"]) > 4:
        raise Refuse("v2-model")
    inputs = {}
    for i in top["inputs"]:
        im = members(i, {"name", "shape", "datatype", "parameters", "data"}, False)
        if "name" not in im or "shape" not in im or "datatype" not in im:
            raise Refuse("missing-or-wrong-type")
        nm = string_field(im["name"], 32)
        shape = int_list(im["shape"], MAX_RANK, nonneg=True)
        dt = string_field(im["datatype"], 32).decode("utf-8")
        if dt not in names.kserve:
            raise Refuse("unknown-name")
        if "parameters" in im:
            pm = members(im["parameters"], {"binary_data_size", "shared_memory_region", "shared_memory_offset",
                                            "shared_memory_byte_size"}, False)
            if pm:
                raise Refuse("v2-model")  # binary data and shared memory are not generated
        if im.get("data") is None:
            raise Refuse("v2-model")
        inputs.setdefault(nm, []).append((names.kserve[dt], shape, im["data"]))
    decoded = {}
    for nm, lst in inputs.items():
        for dtype, shape, data in lst:
            decoded.setdefault(nm, []).append((dtype,) + tuple(expect_data(dtype, data, shape, "interleaved")))
    for nm, lst in decoded.items():
        if nm not in (b"input", b"repeats") or len(lst) > 1:
            raise Refuse("v2-model")
    if b"input" not in decoded or b"repeats" not in decoded:
        raise Refuse("v2-model")
    if res["semantics"] == "onnx1":
        raise Refuse("v2-model")
    if version == 6 and decoded[b"input"][0][0] == "bfloat16":
        raise Refuse("v2-model")  # ONNX Tile-6 has no bfloat16
    rdt, rshape, rraw, _, _ = decoded[b"repeats"][0]
    if rdt not in INT_RANGE or len(rshape) != 1 or rshape[0] > MAX_RANK:
        raise Refuse("v2-model")
    size = INT_SIZE[rdt]
    reps = []
    for k in range(rshape[0]):
        v = int.from_bytes(rraw[k * size:(k + 1) * size], "little", signed=rdt.startswith("int"))
        if v > (1 << 63) - 1:
            raise Refuse("v2-model")
        reps.append(v)
    res["repeats"] = reps
    res["dtype"], res["shape"], res["raw"], res["strings"], res["nan_at"] = decoded[b"input"][0]
    res["binary_output"] = binary_all if binary_output is None else binary_output
    return res


# ---- writing documents ----------------------------------------------------

WS = " \t\r\n"
SHORT_ESC = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Writer:
    """Writes a value tree as JSON text: compact (the fast path's form) or
    noisy (whitespace between every token, and unless `escapes` is false,
    escapes everywhere)."""

    def __init__(self, rnd, noisy, escapes=True):
        self.r = rnd
        self.noisy = noisy
        self.escapes = escapes

    def ws(self):
        if not self.noisy or self.r.random() < 0.3:
            return ""
        return "".join(self.r.choice(WS) for _ in range(self.r.randint(1, 3)))

    def u(self, code):
        h = "%04x" % code
        return "\\u" + (h.upper() if self.r.random() < 0.5 else h)

    def string(self, s):
        out = ['"']
        for c in s:
            o = ord(c)
            esc = self.noisy and self.escapes and self.r.random() < 0.3
            if c in '"\\' or o < 0x20:
                esc = True
            if not esc:
                out.append(c)
            elif o > 0xFFFF:
                o -= 0x10000
                out.append(self.u(0xD800 + (o >> 10)) + self.u(0xDC00 + (o & 0x3FF)))
            elif c in SHORT_ESC and self.r.random() < 0.6:
                out.append(SHORT_ESC[c])
            else:
                out.append(self.u(o))
        out.append('"')
        return "".join(out)

    def write(self, v):
        w = self.ws
        if isinstance(v, Raw):
            return v.text
        if isinstance(v, Num):
            return v.text
        if v is True:
            return "true"
        if v is False:
            return "false"
        if v is None:
            return "null"
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, Obj):
            items = [w() + self.string(k) + w() + ":" + w() + self.write(x) + w() for k, x in v]
            return "{" + (",".join(items) if items else w()) + "}"
        items = [w() + self.write(x) + w() for x in v]
        return "[" + (",".join(items) if items else w()) + "]"


class Raw:
    """Text written as is (tokens that are not JSON)."""

    def __init__(self, text):
        self.text = text


# ---- generating documents -------------------------------------------------

INT_SPELLINGS = ["0", "-0", "1", "-1", "7", "1.0", "1e0", "1E+0", "10e-1", "0.1e1", "100e-2", "-0.0", "0e9",
                 "0e999999999", "2.50e1", "1.5", "1e-400", "1e400", "127", "128", "-128", "-129", "255", "256",
                 "32767", "32768", "65535", "65536", "2147483647", "2147483648", "-2147483648", "-2147483649",
                 "4294967295", "4294967296", "9223372036854775807", "9223372036854775808",
                 "-9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
                 "999999999999999", "1000000000000000", "-999999999999999", "123456789012345678",
                 "1234567890123456789", "9223372036854775807.0", "9.223372036854775807e18", "1.8446744073709551615e19",
                 "0.00000000000000000000000000000000000000001e41", "100000000000000000000000000000000000000000e-41"]
FLOAT_SPELLINGS = ["0", "-0", "-0.0", "0.0", "1", "1.0", "1e0", "1E+0", "10e-1", "0.1e1", "0.1", "0.2", "0.3",
                   "1e400", "-1e400", "1e-400", "-1e-400", "4.9e-324", "5e-324", "2.4703282292062327e-324",
                   "2.4703282292062328e-324", "2.2250738585072011e-308", "2.2250738585072014e-308",
                   "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
                   "3.4028234663852886e38", "3.4028235677973366e38", "3.4028235677973367e38",
                   "1.401298464324817e-45", "7.006492321624085e-46", "7.006492321624086e-46",
                   "65504", "65519", "65520", "65519.999", "6.103515625e-05", "5.960464477539063e-08",
                   "2.9802322387695312e-08", "2.9802322387695313e-08", "3.3895313892515355e38",
                   "3.3961775292304957e38", "1.0000000000000002", "1.00000000000000011102230246251565404",
                   "9007199254740993", "9007199254740992.5", "16777217", "16777216.000000000001",
                   "3.14159265358979323846264338327950288419716939937510", "1e23", "8.98846567431158e307",
                   "0.000000000000000000000000000000000000000000000000000001", "123456789012345",
                   "1234567890123456", "-123456789012345", "1e999999999", "1e-999999999"]
SPECIALS = ["NaN", "nan", "Infinity", "-Infinity", "inf", "-inf", "+inf", "INF", "-nan", "infinity", "Inf!",
            "NaNa", "1.0", ""]
STRINGS = ["", "a", "input", "\u00e9t\u00e9", "\u4e2d\u6587", "\U0001F600", "tab\there", "quote\"back\\slash",
           "nul\u0000byte", "line\nfeed", "slash/", "\u2028\u2029", "\uffff", "\U0010FFFF", "\x7f"]


def rand_num(rnd):
    c = rnd.random()
    if c < 0.3:
        return str(rnd.randint(-10 ** rnd.randint(1, 18), 10 ** rnd.randint(1, 18)))
    if c < 0.45:  # long mantissas
        digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(17, 45)))
        digits = digits.lstrip("0") or "0"
        cut = rnd.randint(1, len(digits))
        frac = digits[cut:]
        return ("-" if rnd.random() < 0.3 else "") + digits[:cut] + ("." + frac if frac else "") + (
            "e%d" % rnd.randint(-330, 310) if rnd.random() < 0.5 else "")
    if c < 0.65:
        m = rnd.choice(["1", "9", "2.5", "1.17549435", "6.5504", "3.4028235", "4.9", "2.2250738585072011"])
        return ("-" if rnd.random() < 0.3 else "") + m + rnd.choice("eE") + rnd.choice(["", "+", "-"]) + str(
            rnd.randint(0, 420))
    if c < 0.85:
        return repr(rnd.uniform(-1e6, 1e6)) if rnd.random() < 0.5 else repr(rnd.random() * 10 ** rnd.randint(-40, 40))
    return rnd.choice(INT_SPELLINGS + FLOAT_SPELLINGS)


def rand_element(rnd, dtype):
    c = rnd.random()
    if c < 0.04:  # the wrong kind of element now and then
        return rnd.choice([True, False, None, Num("1"), "x", Obj(), "NaN"])
    if dtype == "bool":
        return rnd.random() < 0.5
    if dtype == "str":
        return "".join(rnd.choice(STRINGS) for _ in range(rnd.randint(0, 3)))
    if dtype in INT_RANGE:
        if rnd.random() < 0.5:
            lo, hi = INT_RANGE[dtype]
            v = rnd.randint(lo, hi)
            return Num(rnd.choice([str(v), str(v) + ".0", str(v) + "e0", "%de-1" % (v * 10)]))
        return Num(rnd.choice(INT_SPELLINGS))
    if rnd.random() < 0.05:
        return rnd.choice(SPECIALS)
    if rnd.random() < 0.3:
        return Num(rnd.choice(FLOAT_SPELLINGS))
    return Num(rand_num(rnd))


def nest(flat, dims):
    if not dims:
        return flat[0]
    if len(dims) == 1:
        return list(flat)
    step = len(flat) // dims[0] if dims[0] else 0
    return [nest(flat[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])]


def rand_shape(rnd):
    rank = rnd.choice([0, 1, 1, 1, 2, 2, 3])
    return [rnd.choice([0, 1, 1, 2, 2, 3, 4]) if rnd.random() < 0.97 else 0 for _ in range(rank)]


def rand_data(rnd, dtype, shape, form):
    n = 1
    for s in shape:
        n *= s
    per = 2 if dtype.startswith("complex") and form == "interleaved" else 1
    flat = [rand_element(rnd, dtype) for _ in range(n * per)]
    if dtype.startswith("complex") and form == "pairs":
        flat = [[rand_element(rnd, dtype), rand_element(rnd, dtype)] for _ in range(n)]
    c = rnd.random()
    if per == 2 and shape:
        dims = shape[:-1] + [shape[-1] * 2]
    else:
        dims = shape
    if c < 0.5 and dims:
        data = nest(flat, dims)
    elif c < 0.8 or not dims:
        data = list(flat) if dims or rnd.random() < 0.3 else flat[0]
    elif c < 0.9:  # wrong depth
        data = [nest(flat, dims)]
    else:  # ragged or short
        data = nest(flat, dims)
        if isinstance(data, list) and data:
            data = data[:-1] if rnd.random() < 0.5 else data + [data[0]]
    return data


def client_data(rnd, dtype, shape, form):
    """Mostly the flat list clients send; otherwise any of rand_data's forms."""
    if rnd.random() < 0.2:
        return rand_data(rnd, dtype, shape, form)
    n = 1
    for s in shape:
        n *= s
    per = 2 if dtype.startswith("complex") and form == "interleaved" else 1
    if dtype.startswith("complex") and form == "pairs":
        return [[rand_element(rnd, dtype), rand_element(rnd, dtype)] for _ in range(n)]
    return [rand_element(rnd, dtype) for _ in range(n * per)]


def shuffled(rnd, obj):
    items = list(obj)
    rnd.shuffle(items)
    return Obj(items)


def casing(rnd, s):
    return "".join(c.upper() if rnd.random() < 0.3 else c for c in s) if rnd.random() < 0.3 else s


def gen_v1(rnd, names):
    dtype = rnd.choice(names.canonical)
    shape = rand_shape(rnd)
    if rnd.random() < 0.4:  # as clients write it: the layout the decoders read in one pass (jsonquick.h)
        inp = Obj([("dtype", rnd.choice([k for k, v in names.v1.items() if v == dtype])),
                   ("shape", [Num(str(s)) for s in shape]), ("data", client_data(rnd, dtype, shape, "pairs"))])
        top = [("input", inp), ("repeats", [Num(rnd.choice(REPEATS if rnd.random() < 0.2 else ["1", "2", "3"]))
                                            for _ in shape])]
        if rnd.random() < 0.3:
            top.append(("semantics", casing(rnd, rnd.choice(SEMANTICS + ["numpy2"]))))
        return shuffled(rnd, top)
    top = []
    inp = []
    if rnd.random() < 0.97:
        inp.append(("dtype", casing(rnd, rnd.choice([k for k, v in names.v1.items() if v == dtype]))))
    if rnd.random() < 0.8:
        inp.append(("shape", [Num(str(s)) for s in shape]))
    if rnd.random() < 0.98:
        inp.append(("data", rand_data(rnd, dtype, shape, "pairs")))
    if rnd.random() < 0.02:  # nesting at and past --max-rank 64 (and --max-json-depth 80)
        depth = rnd.choice([63, 64, 65, 78, 79, 80])
        data = rand_element(rnd, dtype)
        for _ in range(depth):
            data = [data]
        inp = [("dtype", dtype), ("data", data)]
    top.append(("input", shuffled(rnd, inp)))
    if rnd.random() < 0.9:
        top.append(("repeats", [Num(rnd.choice(REPEATS if rnd.random() < 0.2 else ["1", "2", "3"]))
                                for _ in shape]))
    if rnd.random() < 0.3:
        top.append(("semantics", casing(rnd, rnd.choice(SEMANTICS + ["numpy2"]))))
    if rnd.random() < 0.1:
        top.append(("tiles", Num(rnd.choice(REPEATS))))
        top.append(("axis", Num(rnd.choice(REPEATS))))
    if rnd.random() < 0.03:
        top.append((rnd.choice(["extra", "Input", "inputs"] + STRINGS), Num("1")))
    if rnd.random() < 0.03:
        top.append(rnd.choice(top))  # a duplicate key
    return shuffled(rnd, top)


# Integer fields: the 18-digit fast path of jsonread.c and the general one.
REPEATS = ["1", "2", "0", "-1", "3", "1", "2", "-0", "1.0", "1e0", "999999999999999999", "-999999999999999999",
           "1000000000000000000", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
           "-9223372036854775809", "18446744073709551616", "00"]

KSERVE_INT = ["INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"]


def gen_v2(rnd, names):
    kserve = rnd.choice(sorted(names.kserve))
    dtype = names.kserve[kserve]
    shape = rand_shape(rnd)
    if rnd.random() < 0.4:  # as clients write it: the layout the decoders read in one pass (jsonquick.h)
        rdt = rnd.choice(KSERVE_INT) if rnd.random() < 0.3 else "INT64"
        reps = [Num(rnd.choice(["1", "2", "0", "3", "1.0", "-1"]) if rnd.random() < 0.2 else "2") for _ in shape]
        inputs = [Obj([("name", "input"), ("shape", [Num(str(s)) for s in shape]), ("datatype", kserve),
                       ("data", client_data(rnd, dtype, shape, "interleaved"))]),
                  Obj([("name", "repeats"), ("shape", [Num(str(len(reps)))]), ("datatype", rdt), ("data", reps)])]
        rnd.shuffle(inputs)
        top = [("inputs", inputs)]
        if rnd.random() < 0.3:
            top.append(("id", "".join(rnd.choice(STRINGS) for _ in range(rnd.randint(0, 3)))))
        c = rnd.random()  # tritonclient names the output, or asks for JSON output in the parameters
        if c < 0.3:
            out = [("name", rnd.choice(["output", "output", "outputs"]))]
            if rnd.random() < 0.7:
                out.append(("parameters", Obj([("binary_data", rnd.random() < 0.5)])))
            top.append(("outputs", [shuffled(rnd, out)]))
        elif c < 0.6:
            top.append(("parameters", Obj([("binary_data_output", rnd.random() < 0.5)])))
        if rnd.random() < 0.3:  # KServe's client names the model, sometimes the version
            top.append(("model_name", rnd.choice(["tile", "tile", "tilE"])))
            if rnd.random() < 0.3:
                top.append(("model_version", rnd.choice(["", "13", "6", "013"])))
        return shuffled(rnd, top)
    inp = [("name", "input"), ("datatype", kserve), ("shape", [Num(str(s)) for s in shape]),
           ("data", rand_data(rnd, dtype, shape, "interleaved"))]
    if rnd.random() < 0.2:
        inp.append(("parameters", Obj([("content_type", "x"), ("note", [Num("1"), None])])))
    rdt = rnd.choice(KSERVE_INT) if rnd.random() < 0.7 else "INT64"
    reps = [rnd.choice(["1", "2", "0", "3", "1.0", "-1"]) for _ in shape]
    rep = [("name", "repeats"), ("datatype", rdt), ("shape", [Num(str(len(reps)))]),
           ("data", [Num(x) for x in reps])]
    inputs = [shuffled(rnd, inp), shuffled(rnd, rep)]
    rnd.shuffle(inputs)
    top = [("inputs", inputs)]
    if rnd.random() < 0.5:
        top.append(("id", "".join(rnd.choice(STRINGS) for _ in range(rnd.randint(0, 3)))))
    if rnd.random() < 0.4:
        top.append(("model_name", rnd.choice(["tile", "tile", "tilE"])))
    if rnd.random() < 0.2:
        top.append(("model_version", rnd.choice(["", "13", "6"])))
    if rnd.random() < 0.3:
        top.append(("parameters", shuffled(rnd, [("binary_data_output", rnd.random() < 0.5),
                                                 ("semantics", rnd.choice(["onnx", "NumPy", "onnx1"])),
                                                 ("unknown", Obj([("a", Num("1"))]))][:rnd.randint(1, 3)])))
    if rnd.random() < 0.3:
        top.append(("outputs", [Obj([("name", "output"),
                                     ("parameters", Obj([("binary_data", rnd.random() < 0.5)]))])]))
    if rnd.random() < 0.2:
        top.append((rnd.choice(["unknown_key"] + STRINGS), [Num("1"), Obj([("x", "y")])]))
    if rnd.random() < 0.03:
        top.append(rnd.choice(top))
    return shuffled(rnd, top)


BREAKERS = [",]", ",}", "01", "-01", ".5", "1.", "+1", "-", "1e", "1e+", "1.e3", "NaN", "Infinity",
            "-Infinity", "tru", "nul", "'a'", "0x10", "1_0", "\u00a0", "\x0b", "\x0c", "//", "\ufeff"]


def breaks(rnd, text):
    """Damages a document's text (bytes), most of the time into non-JSON."""
    b = text.encode("utf-8")
    c = rnd.random()
    if c < 0.15:
        return b[:rnd.randint(0, max(0, len(b) - 1))]  # truncated
    if c < 0.3:  # a trailing comma
        ends = [i for i, ch in enumerate(b) if ch in b"]}"]
        if ends:
            i = rnd.choice(ends)
            return b[:i] + b"," + b[i:]
    if c < 0.5:  # a bad token in place of a number or literal
        spots = [m.start() for m in re.finditer(rb"-?[0-9][0-9.eE+-]*|true|false|null", b)]
        if spots:
            i = rnd.choice(spots)
            m = re.compile(rb"-?[0-9][0-9.eE+-]*|true|false|null").match(b, i)
            return b[:i] + rnd.choice(BREAKERS).encode("utf-8") + b[m.end():]
    if c < 0.65:  # inside a string: a raw control character, a lone surrogate, bad UTF-8
        quotes = [i for i, ch in enumerate(b) if ch == 0x22]
        if quotes:
            i = rnd.choice(quotes) + 1
            bad = rnd.choice([b"\x01", b"\t", b"\n", b"\x1f", b"\\ud800", b"\\udc00", b"\\ud83d\\u0041",
                              b"\\uD834", b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80",
                              b"\\x41", b"\\U0041", b"\\u12", b"\\", b"\x7f", b"\xc3\xa9"])
            return b[:i] + bad + b[i:]
    if c < 0.8:  # one byte changed
        if b:
            i = rnd.randrange(len(b))
            return b[:i] + bytes([rnd.choice(b'{}[],:"\\ 0123456789.-eEtfn\x00\x80a')]) + b[i + 1:]
    if c < 0.9:  # something after the value
        return b + rnd.choice([b" x", b"{}", b",", b"\x00", b" \n", b"]", b"\x0c"])
    return rnd.choice([b"", b" ", b"[]", b"null", b"\"input\"", b"{", b"{}"]) if rnd.random() < 0.3 else b


def documents(rnd, gen, names, n):
    out = []
    for k in range(n):
        tree = gen(rnd, names)
        w = Writer(rnd, noisy=rnd.random() < 0.6, escapes=rnd.random() < 0.5)
        text = w.ws() + w.write(tree) + w.ws()
        if k % 4 == 3:
            out.append(breaks(rnd, text))
        else:
            out.append(text.encode("utf-8"))
    return out


# ---- comparison -----------------------------------------------------------


def run_dump(args, docs):
    stdin = b"".join(b"%d\n" % len(d) + d for d in docs)
    p = subprocess.run([DUMP] + args, input=stdin, capture_output=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError("decode_dump %s exited %d: %s" % (args, p.returncode, p.stderr.decode(errors="replace")))
    lines = p.stdout.decode("utf-8").split("\n")[:-1]  # not splitlines(): messages may hold U+2028
    if len(lines) != len(docs):
        raise AssertionError("decode_dump gave %d lines for %d documents" % (len(lines), len(docs)))
    return [json.loads(line) for line in lines]


def same_data(exp, got):
    raw = bytearray(bytes.fromhex(got["data"]))
    want = bytearray(exp["raw"])
    for off, w, fmt in exp["nan_at"]:  # any NaN is a NaN (docs: sign and payload not kept)
        ebits, mbits = FORMATS[fmt] if fmt in FORMATS else (0, 0)
        v = int.from_bytes(raw[off:off + w], "little")
        exp_all = ((1 << ebits) - 1) << mbits
        if (v & exp_all) != exp_all or not (v & ((1 << mbits) - 1)):
            return False
        raw[off:off + w] = bytes(w)
    return bytes(raw) == bytes(want)


def compare(exp, got, v2):
    """None when tiled's request is the one expected, else what differs."""
    if got["dtype"] != exp["dtype"]:
        return "dtype %s, expected %s" % (got["dtype"], exp["dtype"])
    if got["shape"] != exp["shape"]:
        return "shape %s, expected %s" % (got["shape"], exp["shape"])
    if exp["strings"] is not None:
        if [bytes.fromhex(s) for s in got["strings"]] != exp["strings"]:
            return "strings %s, expected %s" % (got["strings"], [s.hex() for s in exp["strings"]])
    elif not same_data(exp, got):
        return "data %s, expected %s" % (got["data"], exp["raw"].hex())
    if got["repeats"] != exp["repeats"]:
        return "repeats %s, expected %s" % (got["repeats"], exp["repeats"])
    if got["semantics"] != exp["semantics"]:
        return "semantics %s, expected %s" % (got["semantics"], exp["semantics"])
    if not v2:
        for k in ("has_semantics", "tiles", "axis"):
            if got[k] != exp[k]:
                return "%s %s, expected %s" % (k, got[k], exp[k])
    else:
        gid = None if got["id"] is None else bytes.fromhex(got["id"])
        if gid != exp["id"]:
            return "id %r, expected %r" % (gid, exp["id"])
        if got["binary_output"] != exp["binary_output"]:
            return "binary_output %s, expected %s" % (got["binary_output"], exp["binary_output"])
    return None


def differential(gen, expect, args, names, n, seed):
    rnd = random.Random(seed)
    docs = documents(rnd, gen, names, n)
    got = run_dump(args, docs)
    counts = Counter()
    bad = []
    for doc, g in zip(docs, got):
        if not g["ok"] and g["code"] == "readers-disagree":
            bad.append((doc, "the one-pass reader gave %s, the general reader %s" % (g["message"], g["general"])))
            continue
        tree = python_parse(doc)
        if tree is None:
            counts["python refuses"] += 1
            if g["ok"] or g["code"] != "invalid":
                bad.append((doc, "Python's json refuses it; tiled gave %s" % g))
            continue
        try:
            exp = expect(tree, names)
        except Refuse as r:
            counts["refused: " + r.cls] += 1
            if g["ok"]:
                bad.append((doc, "expected a refusal (%s); tiled accepted it: %s" % (r.cls, g)))
            continue
        counts["accepted"] += 1
        if g.get("quick"):
            counts["accepted in one pass"] += 1
        if not g["ok"]:
            bad.append((doc, "valid; tiled refused it: %s" % g["message"]))
            continue
        diff = compare(exp, g, args[0] == "v2")
        if diff:
            bad.append((doc, diff))
    return counts, bad


class JsonDifferential(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(DUMP, os.X_OK):
            raise AssertionError("%s is missing: run `make all`" % DUMP)
        cls.names = DtypeNames()

    def check(self, gen, expect, args, seed):
        counts, bad = differential(gen, expect, args, self.names, NDOCS, seed)
        sys.stderr.write("\n%s: %d documents: %s\n" % (" ".join(args), NDOCS, dict(sorted(counts.items()))))
        for doc, why in bad[:10]:
            sys.stderr.write("DISAGREEMENT: %s\n  document: %r\n" % (why, doc))
        if bad:
            self.fail("%d disagreements with Python's json (the first 10 above)" % len(bad))
        # The run tried both sides: documents accepted, refused by Python,
        # and refused by tiled for documented reasons.
        self.assertGreater(counts["accepted"], NDOCS // 10)
        # and the decoders' one-pass reader took part of them (jsonquick.h)
        self.assertGreater(counts["accepted in one pass"], NDOCS // 20)
        self.assertGreater(counts["python refuses"], NDOCS // 20)
        self.assertTrue(any(k.startswith("refused: ") for k in counts))

    def test_v1(self):
        self.check(gen_v1, expect_v1, ["v1"], SEED)

    def test_v2(self):
        self.check(gen_v2, expect_v2, ["v2", "13"], SEED + 1)

    def test_v2_version6(self):
        self.check(gen_v2, lambda doc, names: expect_v2(doc, names, 6), ["v2", "6"], SEED + 2)

    def test_rounding_reference(self):
        """The exact rounder agrees with Python's float() (correctly rounded)
        at float64, so the expected bits of the narrower widths are trusted."""
        import struct
        rnd = random.Random(SEED)
        for _ in range(3000):
            t = rand_num(rnd)
            b = round_float(t, "float64")
            f = float(t)
            if b is None:
                self.assertTrue(f in (float("inf"), float("-inf")), t)
            else:
                self.assertEqual(b, struct.unpack("<Q", struct.pack("<d", f))[0], t)
        try:
            import numpy
        except ImportError:
            return
        for _ in range(2000):  # float16 through numpy from the float64 when that is exact enough
            t = repr(rnd.uniform(-70000, 70000) * 10 ** rnd.randint(-8, 0))
            b = round_float(t, "float16")
            with numpy.errstate(over="ignore"):
                h = numpy.float16(numpy.float64(t))  # double rounding only differs on near-ties
            if b is not None and numpy.isfinite(h):
                self.assertLessEqual(abs(int(h.view(numpy.uint16)) - b), 1, t)


if __name__ == "__main__":
    unittest.main()
