"""Accept and Accept-Encoding, differentially: tiled's reader (server/service/accept.c)
and both negotiations built on it -- the /v1 response format (server/handlers/v1.c,
tiled_negotiate_format) and the response coding (server/service/compress.c,
tiled_coding_negotiate) -- against werkzeug's RFC 9110 reading of the same headers
(werkzeug.http.parse_accept_header, MIMEAccept.quality / Accept.quality, PyPI).

A seeded generator writes header values that tiled's own clients never send: SP and
HTAB around ';' and ',' (and before '='), empty elements and empty parameters, upper-case
Q, weights at and beyond the qvalue grammar, parameters before and after the weight,
quoted strings holding ',', ';', 'q=0' and backslash escapes, duplicate and wildcard
elements, case variants of every name. Each value goes to a running daemon in a /v1
request whose answer is over 1 KiB in every format (and in GET /metrics for the
coding), and to werkzeug. The rule:

  * the answer's Content-Type is one of the formats werkzeug weighs highest, or 406
    when werkzeug weighs them all 0 (ties are the server's to break: RFC 9110 12.5.1);
  * the answer's Content-Encoding is gzip when werkzeug's gzip weight is above 0 and
    not below deflate's, deflate when deflate's is above both, none when both are 0
    (tiled's policy, compress.c, over werkzeug's weights), gzip's weight being the
    higher of werkzeug's weights for gzip and x-gzip (RFC 9110 8.4.1.3);

except for the documented classes below, where RFC 9110 leaves the choice open or
werkzeug reads the header otherwise than accept.h documents. For each, werkzeug is
asked about the header as tiled documents reading it, so tiled's documented behaviour
is what is asserted; the figures per class are printed.

    cd tests/server && TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest -v test_accept_differential

ACCEPTDIFF_HEADERS (default 2000) sets how many header pairs are generated,
ACCEPTDIFF_SEED the seed.
"""
import collections
import http.client
import io
import json
import os
import random
import re
import unittest
import zlib

import numpy as np
from werkzeug.datastructures import Accept, MIMEAccept
from werkzeug.http import parse_accept_header, parse_options_header

from harness.daemon import Daemon  # noqa: E402

COUNT = int(os.environ.get("ACCEPTDIFF_HEADERS", "2000"))
SEED = int(os.environ.get("ACCEPTDIFF_SEED", "20261126"))

# RFC 9110 12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")

# The documented classes: name -> why werkzeug is not asked about the header as sent.
CLASSES = {
    # accept.h: a weight that is not a qvalue makes its element unacceptable (q 0).
    # werkzeug drops such an element (q=1.5, q=1e0, q=nan, q=.5), takes some as
    # numbers (q=0.5000, q=1.0000, q=-0, q=01, q="0.5") and ignores a q without a
    # token value (q=, q= 0.5). werkzeug is given q=0 for it.
    "weight-not-a-qvalue": "an invalid weight is q 0 (accept.h); werkzeug is given q=0",
    # RFC 9110 allows "0." and "1." (0*3DIGIT); werkzeug's -?\d+(\.\d+)? refuses them
    # and drops the element. werkzeug is given the same weight without the dot.
    "qvalue-empty-fraction": "q=0. and q=1. are qvalues (RFC 9110 12.4.2); werkzeug is given q=0 / q=1",
    # RFC 9110 does not say which of two elements naming the same range or coding
    # counts; tiled takes the first (accept.h's reader, v1.c, compress.c), werkzeug the
    # heaviest. werkzeug is given the header without the later ones.
    "duplicate": "the first of two elements naming one range or coding counts; werkzeug is given only the first",
    # A media range's (or coding's) parameters other than the weight: tiled's formats
    # have none to match, and tiled reads the range without them (tile_format_from_
    # media_type); werkzeug matches "application/json;level=1" only to a representation
    # with that parameter. werkzeug's elements are taken without their parameters (its
    # own parse_options_header strips them, quoted strings and all).
    "media-range-parameters": "parameters other than q are not matched; werkzeug's ranges are taken without them",
    # RFC 9110 12.5.3: "*" matches any coding not listed. tiled compresses only for a
    # coding named (identity, which "*" also allows, stays acceptable) and never
    # refuses identity. werkzeug is given the header without its "*" elements.
    "coding-wildcard": "\"*\" does not make tiled compress; werkzeug is given the header without it",
}

FORMATS = {"json": "application/json", "raw": "application/octet-stream", "npy": "application/x-npy"}

# The names tiled knows come up more often than the rest.
MEDIA_NAMES = ["application/json", "application/octet-stream", "application/x-npy", "*/*", "application/*"] * 3 + [
               "text/html", "text/*", "image/png", "application/xml", "application/jsonx", "application/x-npy2",
               "*/json", "*", "json", "application/json-seq", "application"]
CODING_NAMES = ["gzip", "deflate"] * 3 + ["br", "zstd", "compress", "identity", "*", "x-gzip", "gzipx", "deflat", "x"]

VALID_Q = ["0", "0.0", "0.000", "1", "1.0", "1.000", "0.5", "0.25", "0.001", "0.999", "0.1", "0.8", "0.30", "0.75"]
EMPTY_FRACTION_Q = ["0.", "1."]
INVALID_Q = ["1.0000", "0.5000", "0.0000", ".5", "1.5", "2", "-0", "-0.5", "1e0", "nan", "", " 0.5", "01", "00.5",
             '"0.5"', "0.5x", "1.001", "inf", "+0.5", "0.5.5", "1.0e0"]
# Parameters other than the weight: tokens, quoted strings with the list's and the
# parameter list's separators inside, escapes, a name without a value, an empty value.
PARAMS = ["level=1", 'charset="utf-8;q=0"', 'x="a,b"', 'x="q=0"', "foo", "a=", 'x="b\\",c;q=0"',
          'x="\\\\"', "xq=0", "charset=utf-8", 'y=","', 'z=";"', "v=\"\"", "Q1=0"]
OWS = ["", "", "", " ", "\t", "  ", " \t", "\t "]


def random_case(rng, s):
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in s)


class Elem:
    """One generated list element; rendered for the wire and, with the documented
    classes applied, for the reference."""

    def __init__(self, rng, names):
        name = rng.choice(names)
        if name not in ("*", "*/*") and rng.random() < 0.3:
            name = random_case(rng, name)
        self.name = name
        self.params = [rng.choice(PARAMS) for _ in range(rng.choice([0, 0, 0, 1, 1, 2]))]
        self.q = None
        self.qkey = "q"
        self.q_space_before_eq = False
        r = rng.random()
        if r < 0.45:
            self.q = rng.choice(VALID_Q)
        elif r < 0.55:
            self.q = rng.choice(EMPTY_FRACTION_Q)
        elif r < 0.75:
            self.q = rng.choice(INVALID_Q)
        if self.q is not None:
            self.qkey = rng.choice(["q", "q", "Q"])
            # "q =0.5" is a parameter named "q " to both readers, not a weight.
            self.q_space_before_eq = rng.random() < 0.05
            self.qpos = rng.randint(0, len(self.params))
        self.seps = [(rng.choice(OWS), rng.choice(OWS)) for _ in range(len(self.params) + 2)]
        self.empty_param = rng.random() < 0.05  # an empty parameter: "a;;q=1"

    def classes(self):
        out = set()
        if self.q is not None and not self.q_space_before_eq:
            if self.q in EMPTY_FRACTION_Q:
                out.add("qvalue-empty-fraction")
            elif not QVALUE.fullmatch(self.q):
                out.add("weight-not-a-qvalue")
        if self.params:
            out.add("media-range-parameters")
        return out

    def render(self, for_reference):
        parts = list(self.params)
        if self.q is not None:
            q = self.q
            if for_reference and not self.q_space_before_eq:
                if q in EMPTY_FRACTION_Q:
                    q = q[0]
                elif not QVALUE.fullmatch(q):
                    q = "0"
            parts.insert(self.qpos, self.qkey + (" =" if self.q_space_before_eq else "=") + q)
        if self.empty_param:
            parts.insert(0, "")
        out = self.name
        for i, p in enumerate(parts):
            pre, post = self.seps[i % len(self.seps)]
            out += pre + ";" + post + p
        return out

    def key(self):
        """The range or coding it names, as both readers compare names."""
        return self.name.lower()


class Header:
    """A generated Accept or Accept-Encoding value: its elements and the separators
    and empty elements between them."""

    def __init__(self, rng, names, wildcard_class=None):
        self.elems = [Elem(rng, names) for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 7]))]
        self.glue = []
        for _ in range(len(self.elems) + 1):
            g = rng.choice(OWS) + "," + rng.choice(OWS)
            if rng.random() < 0.1:
                g += rng.choice([",", " ,", ", ,\t", ",,"]) + rng.choice(OWS)
            self.glue.append(g)
        self.lead = rng.choice(["", "", "", " ", ",", " , "])
        self.trail = rng.choice(["", "", "", " ", ",", ", "])
        self.wildcard_class = wildcard_class

    def wire(self):
        return self.lead + self._join([e.render(False) for e in self.elems]) + self.trail

    def _join(self, rendered):
        out = ""
        for i, r in enumerate(rendered):
            out += (self.glue[i] if i else "") + r
        return out

    def reference(self):
        """(the value werkzeug is given, the documented classes that shaped it)."""
        classes = set()
        seen = set()
        kept = []
        for e in self.elems:
            if self.wildcard_class and e.name == "*":
                classes.add(self.wildcard_class)
                continue
            if e.key() in seen:
                classes.add("duplicate")
                continue
            seen.add(e.key())
            classes |= e.classes()
            kept.append(e.render(True))
        # A field value has no leading or trailing whitespace (RFC 9110 5.5): what
        # the HTTP layer hands the reader.
        return (self.lead + self._join(kept) + self.trail).strip(" \t"), classes


def without_parameters(accept, cls):
    """werkzeug's elements with their parameters taken off by werkzeug's own
    parse_options_header (class media-range-parameters)."""
    return cls([(parse_options_header(item)[0], q) for item, q in accept])


def reference_formats(value):
    """{format: weight} as werkzeug reads `value`, or None when it reads no Accept."""
    acc = parse_accept_header(value, MIMEAccept)
    if not acc.provided:
        return None
    acc = without_parameters(acc, MIMEAccept)
    return {f: acc.quality(mt) for f, mt in FORMATS.items()}


def reference_coding(value):
    """tiled's policy (compress.c) over werkzeug's weights for gzip and deflate."""
    acc = without_parameters(parse_accept_header(value, Accept), Accept)
    gz, df = max(acc.quality("gzip"), acc.quality("x-gzip")), acc.quality("deflate")
    if gz <= 0 and df <= 0:
        return None
    return "gzip" if gz >= df else "deflate"


# Headers every run starts with: shapes the generator reaches only by chance, and the
# ones that found bugs (a quoted ',' or ';' split an element; a wildcard outweighed a
# more specific range). A tuple is (value, what werkzeug is given, its class).
FIXED_ACCEPT = [
    "", " ", ",", " , ,, ", "application/json;q=0, */*", "*/*;q=0.9, application/json;q=0.5",
    "application/x-npy;q=0, application/*", "application/*;q=0, */*", "*/*;q=0",
    'application/json;charset="utf-8;q=0", application/x-npy;q=0.5',
    'application/x-npy;x="a,application/json";q=0.9, text/html',
    'text/html;x="b\\",application/json;q=1", application/x-npy;q=0.2',
    "Application/JSON;Q=0.2, application/OCTET-STREAM;q=0.1",
    "application/json ;\tq = 0.5, application/x-npy;q=0.9",
    "application/json;level=1;q=0.3, application/x-npy;q=0.2;level=1",
    ("application/json;q=1.5, application/x-npy;q=0.1", "application/json;q=0, application/x-npy;q=0.1",
     "weight-not-a-qvalue"),
    ("application/json;q=0.5000, application/x-npy;q=0.1", "application/json;q=0, application/x-npy;q=0.1",
     "weight-not-a-qvalue"),
    ("application/json;q=.5, */*;q=0.1", "application/json;q=0, */*;q=0.1", "weight-not-a-qvalue"),
    ("application/json;q=, application/x-npy;q=0.1", "application/json;q=0, application/x-npy;q=0.1",
     "weight-not-a-qvalue"),
    ("application/json;q=-0, */*;q=0.1", "application/json;q=0, */*;q=0.1", "weight-not-a-qvalue"),
    ("application/json;q=1e0", "application/json;q=0", "weight-not-a-qvalue"),
    ("application/json;q=nan, */*;q=0.2", "application/json;q=0, */*;q=0.2", "weight-not-a-qvalue"),
    ("*/*;q=1.0000", "*/*;q=0", "weight-not-a-qvalue"),
    ("*/*;q=1.", "*/*;q=1", "qvalue-empty-fraction"),
    ("application/json;q=0.1, application/json, application/x-npy;q=0.2",
     "application/json;q=0.1, application/x-npy;q=0.2", "duplicate"),
]
FIXED_CODING = [
    "", "gzip", "deflate", "gzip;q=0.5, deflate", "GZIP;Q=0.1", "gzip;q=0, deflate;q=0", "identity;q=0",
    'gzip;x="a,deflate";q=0.1, br', 'deflate;x="q=0;"', "gzip;q=1.0, deflate;q=1.000",
    "gzip ; q=0.3 ,\tdeflate\t;\tq=0.4", "gzip;q =0.5", "gzip;level=9;q=0.4, deflate;q=0.3;level=1", "x-gzip, gzipx",
    ("*", "", "coding-wildcard"), ("*;q=0", "", "coding-wildcard"), ("gzip;q=0.5, *", "gzip;q=0.5", "coding-wildcard"),
    ("gzip;q=1.5, deflate;q=0.1", "gzip;q=0, deflate;q=0.1", "weight-not-a-qvalue"),
    ("gzip;q=0.5000, deflate;q=0.4", "gzip;q=0, deflate;q=0.4", "weight-not-a-qvalue"),
    ("gzip;q= 0.5, deflate;q=0.1", "gzip;q=0, deflate;q=0.1", "weight-not-a-qvalue"),
    ("deflate;q=1., gzip;q=0.999", "deflate;q=1, gzip;q=0.999", "qvalue-empty-fraction"),
    ("gzip;q=0.2, gzip;q=0.9, deflate;q=0.5", "gzip;q=0.2, deflate;q=0.5", "duplicate"),
]


class FixedHeader:
    """A hand-written value, with what werkzeug is given for it when a documented
    class applies."""

    def __init__(self, entry):
        self.value, self.ref, self.classes = entry if isinstance(entry, tuple) else (entry, entry, None)

    def wire(self):
        return self.value

    def reference(self):
        return self.ref.strip(" \t"), {self.classes} if self.classes else set()


class AcceptDifferential(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()
        cls.conn = None
        cls.a = np.arange(64, dtype=np.int16) * 37
        cls.want = np.tile(cls.a, 32)  # 2048 elements: over 1 KiB in every format
        buf = io.BytesIO()
        np.save(buf, cls.a)
        cls.bodies = {
            "json": ("/v1/tile", "application/json",
                     json.dumps({"input": {"dtype": "int16", "shape": [64], "data": cls.a.tolist()},
                                 "repeats": [32]}).encode()),
            "raw": ("/v1/tile?dtype=int16&shape=64&repeats=32", "application/octet-stream", cls.a.tobytes()),
            "npy": ("/v1/tile?repeats=32", "application/x-npy", buf.getvalue()),
        }

    @classmethod
    def tearDownClass(cls):
        if cls.conn:
            cls.conn.close()
        assert cls.d.stop() == 0, "daemon exit status"

    def request(self, method, path, body, headers):
        """One request on a kept-alive connection (a new one if the server closed it)."""
        for attempt in (0, 1):
            if self.conn is None:
                type(self).conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=60)
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp, resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                type(self).conn = None
                if attempt:
                    raise

    def decoded(self, resp, data):
        coding = resp.getheader("Content-Encoding")
        if coding == "gzip":
            return zlib.decompress(data, 31)
        if coding == "deflate":
            return zlib.decompress(data)
        self.assertIsNone(coding)
        return data

    def check_body(self, fmt, body, what):
        if fmt == "raw":
            got = np.frombuffer(body, np.int16)
        elif fmt == "npy":
            got = np.load(io.BytesIO(body))
        else:
            got = np.array(json.loads(body)["output"]["data"], np.int16)
        self.assertTrue(np.array_equal(got, self.want), what)

    def compare(self, accept, coding, infmt, figures):
        """Sends one /v1 request; asserts its format and coding against the reference."""
        path, ctype, body = self.bodies[infmt]
        headers = {"Content-Type": ctype}
        if accept is not None:
            headers["Accept"] = accept.wire()
        if coding is not None:
            headers["Accept-Encoding"] = coding.wire()
        resp, data = self.request("POST", path, body, headers)
        what = f"Accept {headers.get('Accept')!r}, Accept-Encoding {headers.get('Accept-Encoding')!r}, input {infmt}"

        weights, classes = None, set()
        if accept is not None:
            ref_value, classes = accept.reference()
            weights = reference_formats(ref_value)
            what += f"; werkzeug was given Accept {ref_value!r} ({sorted(classes)}), weighs {weights}"
        for c in classes:
            figures["Accept " + c] += 1
        if weights is None:
            expected = {infmt}
        else:
            best = max(weights.values())
            expected = {f for f, w in weights.items() if w == best and w > 0}
        if not expected:
            figures["406"] += 1
            self.assertEqual(resp.status, 406, what)
            self.assertEqual(resp.getheader("Content-Type"), "application/json", what)
            self.assertIn("Accept", json.loads(data)["error"], what)
            return
        self.assertEqual(resp.status, 200, f"{what}: {data[:200]!r}")
        media = resp.getheader("Content-Type", "").split(";")[0].strip()
        got = [f for f, mt in FORMATS.items() if mt == media]
        self.assertEqual(len(got), 1, f"{what}: Content-Type {media!r}")
        self.assertIn(got[0], expected, what)
        figures["formats compared"] += 1
        figures["ties"] += len(expected) > 1
        self.check_coding(resp, coding, figures, what)
        self.check_body(got[0], self.decoded(resp, data), what)

    def check_coding(self, resp, coding, figures, what):
        ref_value, classes = coding.reference() if coding is not None else ("", set())
        for c in classes:
            figures["Accept-Encoding " + c] += 1
        want = reference_coding(ref_value)
        self.assertEqual(resp.getheader("Content-Encoding"), want,
                         f"{what}; werkzeug was given Accept-Encoding {ref_value!r} ({sorted(classes)})")
        figures["codings compared"] += 1
        figures[f"coding {want or 'identity'}"] += 1

    def report(self, name, figures):
        print(f"\n{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(figures.items())))

    def test_v1_format_and_coding(self):
        """Content-Type (or 406) and Content-Encoding of /v1 answers against werkzeug."""
        rng = random.Random(SEED)
        figures = collections.Counter()
        cases = [(FixedHeader(a), None) for a in FIXED_ACCEPT]
        cases += [(None, FixedHeader(c)) for c in FIXED_CODING]
        for _ in range(COUNT):
            accept = Header(rng, MEDIA_NAMES) if rng.random() < 0.95 else None
            coding = Header(rng, CODING_NAMES, "coding-wildcard") if rng.random() < 0.9 else None
            cases.append((accept, coding))
        for i, (accept, coding) in enumerate(cases):
            with self.subTest(case=i):
                self.compare(accept, coding, ("json", "raw", "npy")[i % 3], figures)
        self.report("v1", figures)
        # Every path was taken: the generator reaches each outcome and class.
        for k in ["406", "ties", "coding gzip", "coding deflate", "coding identity", "Accept-Encoding coding-wildcard",
                  *("Accept " + c for c in CLASSES if c != "coding-wildcard")]:
            self.assertGreater(figures[k], 0, k)

    def test_metrics_coding(self):
        """Content-Encoding of GET /metrics (ops.c's path to compress.c)."""
        rng = random.Random(SEED + 1)
        figures = collections.Counter()
        cases = [FixedHeader(c) for c in FIXED_CODING]
        cases += [Header(rng, CODING_NAMES, "coding-wildcard") for _ in range(COUNT // 4)]
        for i, coding in enumerate(cases):
            with self.subTest(case=i):
                resp, data = self.request("GET", "/metrics", None, {"Accept-Encoding": coding.wire()})
                what = f"Accept-Encoding {coding.wire()!r}"
                self.assertEqual(resp.status, 200, what)
                self.check_coding(resp, coding, figures, what)
                self.assertGreater(len(data), 0, what)
                self.assertIn(b"\ntiled_", self.decoded(resp, data), what)
        self.report("metrics", figures)
        for k in ["coding gzip", "coding deflate", "coding identity",
                  *("Accept-Encoding " + c for c in CLASSES)]:
            self.assertGreater(figures[k], 0, k)


if __name__ == "__main__":
    unittest.main()
