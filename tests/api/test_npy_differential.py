"""The .npy decoder against numpy's own reader.

tiled's .npy decoder (tile_npy_decode, api/npy.c) reads the header dict
with a parser of its own. Here it is fed, through build/tests/decode_dump,
files tiled's writer never produces: every dtype numpy writes in both byte
orders, C and Fortran order, format versions 1.0, 2.0 and 3.0, headers
spelled by hand (keys in any order, either quote, whitespace between every
token, trailing commas or none, Python 2's long suffix, no padding), and
broken or exotic ones; then random changes to the header's bytes.

numpy.load (allow_pickle=False) is the reference. For each file:

- a case numpy reads (class "agree") must read in tiled as numpy reads
  it: the same dtype, shape and element bytes (strings: the same values),
  whatever the file's order and byte order;
- a case numpy refuses ("refused") must be refused by tiled;
- a case of STRICT (tiled refuses what numpy reads, by a documented rule)
  must be refused by tiled, whatever numpy does;
- a random change ("mutated"): when tiled reads the file, numpy must read
  it the same way; tiled refusing what numpy reads is counted, not failed
  (the generator cannot tell an exotic spelling from a plain one).

TILED_NPY_DIFF_MUTATIONS sets the mutated files (default 4000);
TILED_NPY_DIFF_SEED the seed (default fixed). The suites run it with
Debian's numpy (1.24); it passes with numpy 2.4 as well (build/venv).
"""

import io
import itertools
import json
import os
import random
import subprocess
import unittest
import warnings
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = os.environ.get("TILED_DECODE_DUMP", os.path.join(HERE, "..", "..", "build", "tests", "decode_dump"))
NMUT = int(os.environ.get("TILED_NPY_DIFF_MUTATIONS", "4000"))
SEED = int(os.environ.get("TILED_NPY_DIFF_SEED", "20261127"))

# Where tiled refuses a file numpy reads (docs/protocols.md, ".npy bodies").
STRICT = {
    # Bytes after the array's data: numpy ignores them; in a request body
    # they mean the body is not what its sender thinks, so tiled refuses.
    "trailing-data",
    # A dict literal naming a key twice: Python keeps the last value.
    # Ambiguous, refused.
    "duplicate-key",
    # Python literal syntax beyond what any .npy writer uses: escapes in
    # strings, comments, line continuations, string prefixes and implicit
    # concatenation, parenthesised values, integers in hex, octal, binary,
    # with '_' or a sign '+', Python 2's long suffix apart from its digits.
    "literal-syntax",
    # descr spellings other than [byte order] kind item-size ('float32',
    # 'd', '<q', 'i'): numpy's type codes, which differ between platforms.
    "descr-spelling",
    # Dtypes tiled has no type for: long double, void, datetime, timedelta,
    # structured (a list descr).
    "unsupported-dtype",
    # Around the dict: a carriage return not followed by a line feed (no
    # writer's line end; Python takes it for one in some places and not in
    # others), a form feed or an indent on the dict's line, spaces after
    # the last line end. Python refuses some of these and reads others,
    # and reads 1.0 and 2.0 headers a second time, tokenized, when the
    # first reading fails: tiled keeps to what every version reads.
    "line-ends",
    # 'U' elements that are not Unicode scalar values (surrogates): they
    # have no UTF-8 form.
    "not-unicode",
}

PREFIX = b"\x93NUMPY"


def npy(header, data=b"", version=1, length=None):
    """A .npy file with this header text, as given (no padding added)."""
    h = header.encode("latin1" if version < 3 else "utf-8")
    n = len(h) if length is None else length
    return PREFIX + bytes([version, 0]) + n.to_bytes(2 if version == 1 else 4, "little") + h + data


def pad(header, version=1):
    """The header as numpy pads it: spaces and a newline to 64 bytes."""
    pre = 10 if version == 1 else 12
    total = pre + len(header) + 1
    return header + " " * (-total % 64) + "\n"


def numpy_write(a, version, fortran=False):
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asfortranarray(a) if fortran else a, version=version, allow_pickle=False)
    return b.getvalue()


def numpy_read(doc):
    """numpy's reading of `doc` as the harness prints tiled's, or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Python 2 headers warn
            a = np.load(io.BytesIO(doc), allow_pickle=False, max_header_size=1 << 20)
    except Exception:  # numpy raises ValueError, TypeError, SyntaxError, OSError...
        return None
    if not isinstance(a, np.ndarray):
        return None
    k, size = a.dtype.kind, a.dtype.itemsize
    names = {("b", 1): "bool", ("f", 2): "float16", ("f", 4): "float32", ("f", 8): "float64",
             ("c", 8): "complex64", ("c", 16): "complex128"}
    if k in "iu" and size in (1, 2, 4, 8):
        name = ("int%d" if k == "i" else "uint%d") % (8 * size)
    elif k in "SU":
        name = "str"
    else:
        name = names.get((k, size), "unsupported:" + a.dtype.str)
    out = {"dtype": name, "shape": list(a.shape)}
    if k == "S":
        out["strings"] = [bytes(x) for x in a.ravel(order="C").tolist()]
    elif k == "U":
        try:
            out["strings"] = [x.encode("utf-8") for x in a.ravel(order="C").tolist()]
        except (UnicodeEncodeError, ValueError, SystemError):  # past U+10FFFF: SystemError
            out["dtype"] = "unsupported:not-unicode"
    elif not name.startswith("unsupported"):
        out["data"] = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    return out


def run_dump(docs):
    stdin = b"".join(b"%d\n" % len(d) + d for d in docs)
    p = subprocess.run([DUMP, "npy"], input=stdin, capture_output=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError("decode_dump npy exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace")))
    lines = p.stdout.decode("utf-8").split("\n")[:-1]
    if len(lines) != len(docs):
        raise AssertionError("decode_dump gave %d lines for %d files" % (len(lines), len(docs)))
    return [json.loads(line) for line in lines]


def difference(ref, got):
    """None when tiled read the file as numpy did, else what differs."""
    if got["dtype"] != ref["dtype"]:
        return "dtype %s, numpy %s" % (got["dtype"], ref["dtype"])
    if got["shape"] != ref["shape"]:
        return "shape %s, numpy %s" % (got["shape"], ref["shape"])
    if "strings" in ref:
        mine = [bytes.fromhex(s) for s in got["strings"]]
        return None if mine == ref["strings"] else "strings %r, numpy %r" % (mine[:8], ref["strings"][:8])
    return None if bytes.fromhex(got["data"]) == ref["data"] else "data %s, numpy %s" % (
        got["data"][:64], ref["data"].hex()[:64])


# ---- the files -----------------------------------------------------------

NUMERIC = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"]
SHAPES = [(), (0,), (1,), (5,), (2, 3), (3, 0), (2, 3, 4), (1, 1, 1, 1, 1), (2, 1, 3, 1, 2), (1,) * 31 + (2,)]


def random_array(rng, descr, shape):
    n = int(np.prod(shape, dtype=np.int64))
    dt = np.dtype(descr)
    if dt.kind == "U":
        cps = [0x41, 0xE9, 0x3B1, 0x4E2D, 0x1F600, 0x10FFFF, 0xFFFD, 0]
        vals = ["".join(chr(rng.choice(cps)) for _ in range(rng.randrange(dt.itemsize // 4 + 1))) for _ in range(n)]
        return np.array(vals, dtype=dt).reshape(shape)
    if dt.kind == "S":
        vals = [bytes(rng.choice([0, 0x41, 0xFF, 0x80, 0x20]) for _ in range(rng.randrange(dt.itemsize + 1)))
                for _ in range(n)]
        return np.array(vals, dtype=dt).reshape(shape)
    raw = bytearray(rng.getrandbits(8) for _ in range(n * dt.itemsize))
    if dt.kind == "b":
        raw = bytearray(b & 1 for b in raw)
    a = np.frombuffer(bytes(raw), dtype=dt.newbyteorder("<")).astype(dt).reshape(shape)
    if dt.kind in "fc" and n:  # the values that trip converters: NaN payloads, -0, inf, subnormals
        flat = a.reshape(-1)  # a view: astype made a fresh contiguous array
        specials = [np.nan, -0.0, np.inf, -np.inf, np.finfo(dt).tiny / 2]
        for i in range(min(n, 3)):
            flat[rng.randrange(n)] = rng.choice(specials)
    return a


def writer_cases(rng):
    """Files numpy writes, in every dtype and byte order, shape, order and version."""
    cases = []
    for base in NUMERIC + ["S1", "S5", "U1", "U4"]:
        orders = ["|"] if base in ("?", "i1", "u1") or base.startswith("S") else ["<", ">"]
        for bo in orders:
            descr = base if bo == "|" else bo + base
            for shape in SHAPES:
                a = random_array(rng, descr, shape)
                version = rng.choice([(1, 0), (2, 0), (3, 0)])
                fortran = a.ndim > 1 and rng.random() < 0.5
                cases.append(("agree", "numpy %s %s v%d%s" % (descr, shape, version[0], " F" if fortran else ""),
                              numpy_write(a, version, fortran)))
    return cases


def dict_text(items, sep=" ", quote="'", trailing=True):
    body = ("," + sep).join("%s%s%s:%s%s" % (quote, k, quote, sep, v) for k, v in items)
    return "{" + body + ("," + sep if trailing else "") + "}"


def spelling_cases(rng):
    """Headers numpy reads, written as other writers and people write them."""
    a = np.arange(6, dtype="<i4").reshape(2, 3)
    c_data, f_data = a.tobytes(order="C"), a.tobytes(order="F")
    base = [("descr", "'<i4'"), ("fortran_order", "False"), ("shape", "(2, 3)")]
    cases = []
    for perm in itertools.permutations(base):
        for sep in ["", " ", "  ", "\t", "\n", " \r\n ", "\r", "\x0c"]:
            for quote in ["'", '"']:
                items = [(k, v.replace("'", quote)) for k, v in perm]
                for trailing in (True, False):
                    h = dict_text(items, sep, quote, trailing)
                    for v in (1, 3):  # Python reads 1.0 and 2.0 headers twice, the second time tokenized
                        cases.append(("agree", "spelling v%d %r" % (v, h), npy(pad(h, v), c_data, version=v)))
    shapes = {"()": b"\x07\0\0\0", "(1,)": b"\x07\0\0\0", "(1, )": b"\x07\0\0\0", "( 1 ,)": b"\x07\0\0\0",
              "(2,3)": c_data, "(2, 3,)": c_data, "(2 ,3 , )": c_data, "(0,)": b"", "(-0, 3)": b"",
              "(2,\n3)": c_data, "(00, 3)": b""}
    shapes["(0, 288230376151711744, 4)"] = b""  # empty, within 2^63 - 1 bytes: numpy reads it
    for t, data in shapes.items():
        h = "{'descr': '<i4', 'fortran_order': False, 'shape': %s, }" % t
        cases.append(("agree", "shape %s" % t, npy(pad(h), data)))
    for v in (1, 2):  # Python 2's long suffix, read by numpy in versions 1.0 and 2.0
        h = "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }"
        cases.append(("agree", "long suffix v%d" % v, npy(pad(h, v), c_data, version=v)))
    h = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }"
    cases.append(("agree", "fortran order", npy(pad(h), f_data)))
    cases.append(("agree", "fortran order read from C bytes", npy(pad(h), c_data)))
    for descr in ["i4", "=i4", "|i4"]:  # no byte order, native, 'not applicable': this host's (little-endian)
        h = "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }" % descr
        cases.append(("agree", "descr %s" % descr, npy(pad(h), c_data)))
    for descr, data in [("<b1", b"\x01\x00"), ("b1", b"\x00\x01"), (">u1", b"\x05\x06"), ("<i1", b"\xff\x01"),
                        (">b1", b"\x01\x01"), ("<S2", b"ab\0c"), ("=U1", b"A\0\0\0B\0\0\0"), ("|S0", b""),
                        ("<U0", b"")]:
        h = "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }" % descr
        cases.append(("agree", "descr %s" % descr, npy(pad(h), data)))
    h = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"
    for name, text in [("no padding", h), ("padding without newline", h + "    "), ("newline only", h + "\n"),
                       ("CRLF", h + "\r\n"), ("tabs", h + "\t\t\n"), ("leading spaces", "   " + h + "\n"),
                       ("leading newline", "\n" + h), ("form feed", h + "\x0c\n"), ("long padding", h + " " * 5000),
                       ("blank lines before", " \n\t\r\n\x0c \n" + h), ("blank lines after", h + "\n \r\n\t\n"),
                       ("leading tab", "\t" + h + "\n"), ("form feed after", h + " \x0c")]:
        for v in (1, 2, 3):
            cases.append(("agree", "%s v%d" % (name, v), npy(text, c_data, version=v)))
    # Unicode in a version 3.0 header (numpy writes it for unicode field names).
    cases.append(("agree", "v3 utf-8 padding", npy(h + " \u00e9"[:1] + "\n", c_data, version=3)))
    return cases


def strict_cases():
    """Files numpy reads (or may) and tiled refuses by rule (STRICT)."""
    one = b"\x07\0\0\0"
    std = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }"
    out = [("trailing-data", "one byte after the data", npy(pad(std), one + b"\0")),
           ("trailing-data", "a second array after the first", npy(pad(std), one) + npy(pad(std), one)),
           ("duplicate-key", "descr twice", npy(pad("{'descr': '<f4', 'descr': '<i4', 'fortran_order': False, "
                                                   "'shape': (1,), }"), one)),
           ("duplicate-key", "shape twice", npy(pad("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), "
                                                   "'shape': (1,)}"), one))]
    syntax = ["{'descr': '\\x3ci4', 'fortran_order': False, 'shape': (1,), }",
              "{'descr': '<i\\64', 'fortran_order': False, 'shape': (1,), }",
              "{'desc\\\nr': '<i4', 'fortran_order': False, 'shape': (1,), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), } # a comment",
              "{'descr': '<i4', # a comment\n 'fortran_order': False, 'shape': (1,), }",
              "{'descr': '<i4', \\\n'fortran_order': False, 'shape': (1,), }",
              "{'descr': u'<i4', 'fortran_order': False, 'shape': (1,), }",
              "{'descr': r'<i4', 'fortran_order': False, 'shape': (1,), }",
              "{'descr': '<' 'i4', 'fortran_order': False, 'shape': (1,), }",
              "{'descr': ('<i4'), 'fortran_order': False, 'shape': (1,), }",
              "{'descr': '<i4', 'fortran_order': (False), 'shape': (1,), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': ((1,)), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (0x1,), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (0o1,), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (0b1,), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (+1,), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (1_0,), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (- 0, 1), }",
              "{'descr': '<i4', 'fortran_order': False, 'shape': (1 L,), }",
              "{\"descr\": '''<i4''', 'fortran_order': False, 'shape': (1,), }"]
    for h in syntax:
        data = one * 10 if "1_0" in h else one
        out.append(("literal-syntax", h, npy(pad(h), b"" if "- 0" in h else data)))
    for descr, width in [("int32", 4), ("i", 4), ("<q", 8), ("d", 8), ("float32", 4), ("?", 1), ("b", 1),
                         ("B", 1), ("<l", 8), ("bool", 1), ("<f", 4), ("h", 2)]:
        h = "{'descr': '%s', 'fortran_order': False, 'shape': (1,), }" % descr
        out.append(("descr-spelling", descr, npy(pad(h), b"\x01" * width)))
    for descr, width in [("<f16", 16), ("|V4", 4), ("<M8[s]", 8), ("<m8[s]", 8)]:
        h = "{'descr': '%s', 'fortran_order': False, 'shape': (1,), }" % descr
        out.append(("unsupported-dtype", descr, npy(pad(h), b"\x01" * width)))
    for name, text in [("CR at the end", std + "\r"), ("CR CR", std + "\r\r"), ("CR then LF later", std + "\r \n"),
                       ("form feed line", "\n\x0c" + std), ("form feed first", "\x0c" + std),
                       ("spaces after the last line end", std + "\n  "), ("CR before the dict", "\r" + std)]:
        for v in (1, 3):
            out.append(("line-ends", "%s v%d" % (name, v), npy(text, one, version=v)))
    h = "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }"
    out.append(("unsupported-dtype", "structured", npy(pad(h), one)))
    for cp in (0xD800, 0xDFFF):
        h = "{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }"
        out.append(("not-unicode", "U+%04X" % cp, npy(pad(h), cp.to_bytes(4, "little"))))
    return out


def refused_cases():
    """Files numpy refuses: tiled must refuse them too."""
    one = b"\x07\0\0\0"
    std = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }"

    def h(**kw):
        items = {"descr": "'<i4'", "fortran_order": "False", "shape": "(1,)"}
        items.update(kw)
        return pad(dict_text([(k, v) for k, v in items.items() if v is not None]))
    out = [("bad magic", b"\x93NUMPX\x01\0" + npy(pad(std), one)[8:]),
           ("version 1.1", b"\x93NUMPY\x01\x01" + npy(pad(std), one)[8:]),
           ("version 4.0", npy(pad(std), one)[:6] + b"\x04\0" + npy(pad(std), one, version=3)[8:]),
           ("version 0.0", npy(pad(std), one)[:6] + b"\x00\0" + npy(pad(std), one)[8:]),
           ("truncated data", npy(pad(std), one[:3])),
           ("no data", npy(pad(std))),
           ("header length past the end", npy(pad(std), one, length=len(pad(std)) + 10)),
           ("truncated header", npy(pad(std), one)[:20]),
           ("empty", b""),
           ("magic only", PREFIX),
           ("no descr", npy(h(descr=None), one)),
           ("no shape", npy(h(shape=None), one)),
           ("no fortran_order", npy(h(fortran_order=None), one)),
           ("unknown key", npy(pad(std[:-1] + "'extra': 1}"), one)),
           ("fortran_order 1", npy(h(fortran_order="1"), one)),
           ("fortran_order 'False'", npy(h(fortran_order="'False'"), one)),
           ("fortran_order None", npy(h(fortran_order="None"), one)),
           ("shape an integer", npy(h(shape="(1)"), one)),
           ("shape a list", npy(h(shape="[1]"), one)),
           ("shape negative", npy(h(shape="(-1,)"), one)),
           ("shape a float", npy(h(shape="(1.0,)"), one)),
           ("shape a bool", npy(h(shape="(True,)"), one)),
           ("shape a string", npy(h(shape="('1',)"), one)),
           ("descr empty", npy(h(descr="''"), one)),
           ("descr object", npy(h(descr="'|O'"), b"\0" * 8)),
           ("descr unknown", npy(h(descr="'<x4'"), one)),
           ("descr bytes literal", npy(h(descr="b'<i4'"), one)),
           ("long suffix in version 3.0", npy(pad("{'descr': '<i4', 'fortran_order': False, 'shape': (1L,), }"),
                                              one, version=3)),
           ("lowercase long suffix", npy(h(shape="(1l,)"), one)),
           ("leading zero", npy(h(shape="(01,)"), one)),
           ("leading zeros", npy(h(shape="(0001,)"), one)),
           ("NUL in the header", npy(std + "\0\n", one)),
           ("CR then a space", npy(std + "\r ", one)),
           ("indented after a line end", npy("\n " + std, one, version=3)),
           ("indented after a form feed", npy("\x0c " + std, one, version=3)),
           ("spaces after the last line end, v3", npy(std + "\n  ", one, version=3)),
           ("vertical tab in the header", npy(std + "\v\n", one)),
           ("not a dict", npy(pad("['<i4', False, (1,)]"), one)),
           ("unterminated string", npy(pad("{'descr': '<i4, 'fortran_order': False, 'shape': (1,), }"), one)),
           ("unclosed dict", npy(pad("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), "), one)),
           ("missing comma", npy(pad("{'descr': '<i4' 'fortran_order': False, 'shape': (1,), }"), one)),
           ("missing colon", npy(pad("{'descr' '<i4', 'fortran_order': False, 'shape': (1,), }"), one)),
           ("too big", npy(h(shape="(0, 9223372036854775808)"))),
           ("empty, the other dims past 64 bits", npy(h(shape="(3, 80000000000000003, 8000000000000000, 0)"))),
           ("empty, past 2^63 bytes", npy(h(shape="(0, 2305843009213693952)"))),
           ("beyond numpy's dimension", npy(h(shape="(4611686018427387904, 4)"), one))]
    return [("refused", name, doc) for name, doc in out]


ALPHABET = "{}()[]':,\"<>|=0123456789LlTrueFalsfidcbuSUOV \t\n\r-+_x.#\\"


def mutate(rng, doc):
    """One to three changes inside the header (its text, its length, its version)."""
    b = bytearray(doc)
    lenbytes = 2 if b[6] == 1 else 4
    start = 8 + lenbytes
    for _ in range(rng.randrange(1, 4)):
        r = rng.random()
        hlen = int.from_bytes(b[8:start], "little")
        if r < 0.05:
            b[6] = rng.choice([1, 2, 3, 4, 0])
        elif r < 0.10:
            b[8] = (b[8] + rng.choice([-2, -1, 1, 2])) & 0xFF
        elif hlen == 0:
            continue
        elif len(b) > start:
            at = start + rng.randrange(min(hlen, len(b) - start))
            op = rng.random()
            if op < 0.4:
                b[at] = ord(rng.choice(ALPHABET))
            elif op < 0.7:  # insert, the length kept right
                b.insert(at, ord(rng.choice(ALPHABET)))
                b[8:start] = (hlen + 1).to_bytes(lenbytes, "little")
            elif hlen > 1:  # delete
                del b[at]
                b[8:start] = (hlen - 1).to_bytes(lenbytes, "little")
    return bytes(b)


# ---- the test --------------------------------------------------------------


class NpyDifferential(unittest.TestCase):
    maxDiff = None

    def check(self, cases):
        """Runs (class, name, doc) cases; returns Counter of outcomes."""
        got = run_dump([doc for _, _, doc in cases])
        seen = Counter()
        failures = []
        for (cls, name, doc), mine in zip(cases, got):
            ref = numpy_read(doc)
            numpy_reads = ref is not None and not ref["dtype"].startswith("unsupported")
            if cls in STRICT:
                seen["%s: numpy %s" % (cls, "reads" if ref else "refuses")] += 1
                if mine["ok"]:
                    failures.append("%s (%s): tiled reads it as %s %s" % (cls, name, mine["dtype"], mine["shape"]))
                continue
            if cls == "agree" and not numpy_reads:
                failures.append("agree (%s): numpy does not read it: the case is wrong" % name)
                continue
            if cls == "refused" and ref is not None:
                failures.append("refused (%s): numpy reads it: the case is wrong" % name)
                continue
            if not mine["ok"]:
                if numpy_reads:
                    if cls == "agree":
                        failures.append("agree (%s): tiled refuses it: %s" % (name, mine["message"]))
                    seen["numpy reads, tiled refuses"] += 1
                else:
                    seen["both refuse"] += 1
                continue
            if not numpy_reads:
                failures.append("%s (%s): tiled reads it as %s %s, numpy %s" % (
                    cls, name, mine["dtype"], mine["shape"], "refuses it" if ref is None else ref["dtype"]))
                continue
            diff = difference(ref, mine)
            if diff:
                failures.append("%s (%s): %s" % (cls, name, diff))
            seen["both read alike"] += 1
        if failures:
            self.fail("%d of %d files:\n  %s" % (len(failures), len(cases), "\n  ".join(failures[:30])))
        return seen

    def test_files_numpy_writes(self):
        cases = writer_cases(random.Random(SEED))
        self.assertEqual(self.check(cases)["both read alike"], len(cases))

    def test_headers_spelled_by_hand(self):
        cases = spelling_cases(random.Random(SEED))
        self.assertEqual(self.check(cases)["both read alike"], len(cases))

    def test_strict_rules(self):
        cases = strict_cases()
        self.assertEqual({c for c, _, _ in cases}, STRICT)
        seen = self.check(cases)
        # The rules are tiled's, not numpy's: numpy reads most of these files.
        self.assertGreater(sum(n for k, n in seen.items() if k.endswith("numpy reads")), len(cases) // 2)

    def test_files_both_refuse(self):
        cases = refused_cases()
        seen = self.check(cases)
        self.assertEqual(seen["both refuse"], len(cases))

    def test_random_changes(self):
        rng = random.Random(SEED + 1)
        seeds = [doc for cls, _, doc in writer_cases(rng) + spelling_cases(rng) if len(doc) < 4096]
        cases = [("mutated", "change %d" % i, mutate(rng, rng.choice(seeds))) for i in range(NMUT)]
        seen = self.check(cases)
        print("\n.npy random changes: %s" % dict(seen))
        self.assertGreater(seen["both read alike"], NMUT // 20)
        self.assertGreater(seen["both refuse"], NMUT // 20)


if __name__ == "__main__":
    unittest.main()
