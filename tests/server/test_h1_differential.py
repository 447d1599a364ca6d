"""HTTP/1.1 framing, differentially: tiled's framer against llhttp (Node.js's parser,
through PyPI httptools) and h11.

A seeded generator writes request streams: valid requests in unusual but legal forms
(case of names, OWS around values, leading zeros, chunk extensions, trailers,
pipelining, absolute-form and asterisk-form targets, empty lines before a request, a
minor version above 1) and
the smuggling-class mutations of them (CL+TE, duplicated and obfuscated
Transfer-Encoding, folded lines, whitespace before a colon, bare CR and LF, NUL,
invalid Host, overflowing chunk sizes, ...). Each stream goes to server/http/h1wire.c
through its filter, build*/tests/h1wire_dump (harness/h1wire_dump.c, which also checks
that feeding it byte by byte and in steps gives what feeding it whole gives), and to
both reference parsers. The rule:

  * whenever tiled ACCEPTS a message, each reference accepts it too and frames it the
    same way: same method and target, same body bytes, same byte where the next
    request starts (apart from the reference quirks listed in REFERENCE_QUIRKS);
  * tiled may refuse more than a reference (it is stricter by design), but every
    refusal must belong to one of the documented classes, REFUSAL_CLASSES (docs/security.md,
    "## HTTP framing").

    cd tests/server && TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest -v test_h1_differential

H1DIFF_STREAMS (default 1500) sets how many streams each test generates, H1DIFF_SEED
the seed; the long mode is e.g. H1DIFF_STREAMS=200000. The figures are printed.
"""
import collections
import os
import random
import re
import subprocess
import unittest

import h11
import httptools

BIN = os.environ.get("TILED_BIN", "../../build/tiled")
STREAMS = int(os.environ.get("H1DIFF_STREAMS", "1500"))
SEED = int(os.environ.get("H1DIFF_SEED", "20261126"))
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

# tiled's refusals, by what its message says (h1wire.c): the framer is stricter than
# RFC 9112 where a repair another party might do differently could smuggle a request.
REFUSAL_CLASSES = {
    "both-framing-headers": "both Content-Length and Transfer-Encoding",
    "te-malformed": "malformed Transfer-Encoding",  # empty elements, trailing OWS, chunked;params
    "te-chunked-not-final": "chunked is not the final transfer coding",
    "te-chunked-twice": "applied more than once",
    "te-unsupported-coding": "unsupported transfer coding",
    "te-in-http10": "Transfer-Encoding in an HTTP/1.0 request",
    "te-several-lines": "Transfer-Encoding over several lines",
    "cl-not-digits": "is not a number of bytes",  # sign, list, hex, trailing OWS, empty
    "cl-several-lines": "Content-Length headers; send one",
    "cl-too-large": "is too large",  # also chunk sizes of 16 hex digits and more
    "obs-fold": "obs-fold",
    "space-before-colon": "and its colon",
    "control-byte": "the control byte",  # NUL, bare CR, DEL, other CTLs in a name, value or target
    "bare-lf": "a line ends in a bare LF",
    "malformed-field": re.compile(r"malformed (header|trailer) line"),
    "malformed-request-line": "malformed request line",
    "target-form": "the request target must be",
    "target-byte": "the request target contains",
    "http-version": "HTTP version",
    "host-count": re.compile(r"the request has \d+ Host headers"),
    "host-missing": "the Host header is missing",
    "host-invalid": "invalid Host header",
    "chunk-size-line": "malformed chunk size line",
    "chunk-ext": "chunk extension",
    "chunk-data-longer": "longer than its size",
    "limits": re.compile(r"over \d+ bytes|more than \d+ header lines"),
}

# Where a reference refuses what RFC 9112 allows and tiled accepts: not a framing
# difference (the reference reads nothing else instead), named so that it is not
# silently lost. Each is (reference, what); a generated request that has one is not
# compared with that reference (its other reference still is).
REFERENCE_QUIRKS = {
    # RFC 9112 2.2: a server SHOULD ignore at least one empty line before a request line;
    # h11 refuses them ("no request line received").
    ("h11", "empty lines before a request"),
    # A method is any token (RFC 9110 9.1); llhttp knows only registered ones, by case.
    ("llhttp", "a method it does not know"),
    # RFC 9110 2.5: a recipient SHOULD process a higher minor version (HTTP/1.2) as the
    # highest it implements, 1.1; llhttp refuses it ("Invalid HTTP version").
    ("llhttp", "a minor version above 1"),
}


def classify(message):
    for name, pat in REFUSAL_CLASSES.items():
        if (pat.search(message) if isinstance(pat, re.Pattern) else pat in message):
            return name
    return None


# ---------------------------------------------------------------- the generator

METHODS = [b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"HEAD"]
TCHAR = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Req:
    """One request as parts, so that a mutation can change one of them."""

    def __init__(self):
        self.leading = b""
        self.method, self.target, self.version = b"GET", b"/", b"HTTP/1.1"
        self.sp1 = self.sp2 = b" "
        self.fields = []  # whole field lines, without CRLF
        self.body = b""   # the bytes after the head, exactly as sent
        self.eol = b"\r\n"
        self.quirks = set()

    def raw(self):
        lines = [self.method + self.sp1 + self.target + self.sp2 + self.version] + self.fields
        return self.leading + b"".join(x + self.eol for x in lines) + self.eol + self.body


def rcase(rng, s):
    return bytes(c ^ 0x20 if 97 <= (c | 0x20) <= 122 and rng.random() < 0.4 else c for c in s)


def ows(rng):
    return rng.choice([b"", b" ", b" ", b"\t", b"  ", b" \t "])


def field(rng, name, value, trailing=True):
    return rcase(rng, name) + b":" + ows(rng) + value + (ows(rng) if trailing else b"")


def chunked_body(rng):
    parts, trailers = [], []
    for _ in range(rng.randint(0, 3)):
        data = bytes(rng.choice(b"abcxyz\r\n0;") for _ in range(rng.randint(1, 40)))
        size = b"%x" % len(data)
        size = rng.choice([b"", b"0", b"000"]) + (size.upper() if rng.random() < 0.5 else size)
        ext = rng.choice([b"", b"", b";a", b";a=b", b';name="v a"', b";x=1;y", b';q="\\"z\\""'])
        parts.append(size + ext + b"\r\n" + data + b"\r\n")
    last = rng.choice([b"0", b"00", b"0000"]) + rng.choice([b"", b";x", b";x=y"])
    for _ in range(rng.choice([0, 0, 1, 2])):
        trailers.append(field(rng, rng.choice([b"X-Trailer", b"Expires", b"x-t"]), b"v 1") + b"\r\n")
    return b"".join(parts) + last + b"\r\n" + b"".join(trailers) + b"\r\n"


def valid_request(rng, last):
    r = Req()
    r.method = rng.choice(METHODS)
    r.target = rng.choice([b"/", b"/v2/health/live", b"/a/b?c=d&e=%20f", b"/p;q=1/r?s#t", b"/~u/!$&'()*+,;=:@",
                           b"http://t/v2", b"HTTP://T:8080/a?b", b"https://[::1]:8443/x"])
    if r.method == b"OPTIONS" and rng.random() < 0.3:
        r.target = b"*"
    if last and rng.random() < 0.1:
        r.version = b"HTTP/1.0"  # HTTP/1.0 closes: only as the last request of a stream
    if r.version == b"HTTP/1.1" or rng.random() < 0.5:
        host = rng.choice([b"t", b"t:8080", b"example.com", b"[::1]:80", b"a-b.c_d~e", b"", b"127.0.0.1:1"])
        r.fields.append(field(rng, b"Host", host))
    for _ in range(rng.randint(0, 3)):
        name = bytes(rng.choice(TCHAR) for _ in range(rng.randint(1, 12)))
        value = rng.choice([b"1", b"a b  c", b"\"q,s\"", b"x\ty", b"\xc3\xa9t\xe9", b"", b"(c) <d>"])
        r.fields.insert(rng.randrange(len(r.fields) + 1), field(rng, b"X-" + name, value))
    kind = rng.choice(["none", "none", "cl", "cl0", "chunked"]) if r.version == b"HTTP/1.1" else \
        rng.choice(["none", "cl"])
    if kind.startswith("cl"):
        r.body = b"" if kind == "cl0" else bytes(rng.choice(b"ab\r\nGET /x HTTP/1.1") for _ in range(rng.randint(1, 30)))
        r.fields.insert(rng.randrange(len(r.fields) + 1),
                        field(rng, b"Content-Length", rng.choice([b"", b"0", b"00"]) + b"%d" % len(r.body), False))
    elif kind == "chunked":
        r.body = chunked_body(rng)
        r.fields.insert(rng.randrange(len(r.fields) + 1),
                        field(rng, b"Transfer-Encoding", rcase(rng, b"chunked"), False))
    if rng.random() < 0.1:
        r.leading = b"\r\n" * rng.randint(1, 2)
        r.quirks.add(("h11", "empty lines before a request"))
    if r.version == b"HTTP/1.1" and rng.random() < 0.05:
        r.version = rng.choice([b"HTTP/1.2", b"HTTP/1.9"])  # read as HTTP/1.1
        r.quirks.add(("llhttp", "a minor version above 1"))
    return r


def _framing_index(r, name):
    for i, f in enumerate(r.fields):
        if f.lower().startswith(name + b":"):
            return i
    return None


def _sub_field(r, name, fn):
    i = _framing_index(r, name)
    if i is None:
        return False
    r.fields[i] = fn(r.fields[i])
    return True


def mutations():
    """name -> function(rng, request) that changes it (False: does not apply)."""
    def add(line):
        return lambda rng, r: r.fields.insert(rng.randrange(len(r.fields) + 1), line)

    def te_value(v):
        return lambda rng, r: r.fields.append(b"Transfer-Encoding: " + v) or setattr(r, "body", b"0\r\n\r\n")

    def cl_value(v):
        return lambda rng, r: r.fields.append(b"Content-Length: " + v) or setattr(r, "body", b"hello")

    def on_chunked(fn):
        def m(rng, r):
            r.fields = [f for f in r.fields if not f.lower().startswith((b"content-length:", b"transfer-encoding:"))]
            r.fields.append(b"Transfer-Encoding: chunked")
            r.body = fn(rng)
        return m

    def host(v):
        def m(rng, r):
            r.fields = [f for f in r.fields if not f.lower().startswith(b"host:")]
            r.fields.append(b"Host: " + v)
        return m

    smuggled = b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"
    return {
        "cl_te": lambda rng, r: r.fields.extend([b"Content-Length: %d" % len(smuggled), b"Transfer-Encoding: chunked"])
        or setattr(r, "body", smuggled),
        "te_cl": lambda rng, r: r.fields.extend([b"Transfer-Encoding: chunked", b"Content-Length: 3"])
        or setattr(r, "body", smuggled),
        "te_cl_obfuscated": lambda rng, r: r.fields.extend([b"Content-Length: 5", b"Transfer-Encoding: xchunked"])
        or setattr(r, "body", b"0\r\n\r\nX"),
        "te_two_lines": lambda rng, r: r.fields.extend([b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked"])
        or setattr(r, "body", b"0\r\n\r\n"),
        "te_two_lines_identity": lambda rng, r: r.fields.extend([b"Transfer-Encoding: identity",
                                                                 b"Transfer-Encoding: chunked"])
        or setattr(r, "body", b"0\r\n\r\n"),
        "te_chunked_twice": te_value(b"chunked, chunked"),
        "te_xchunked": te_value(b"xchunked"),
        "te_chunked_identity": te_value(b"chunked, identity"),
        "te_gzip_chunked": te_value(b"gzip, chunked"),
        "te_identity_chunked": te_value(b"identity, chunked"),
        "te_leading_comma": te_value(b", chunked"),
        "te_trailing_comma": te_value(b"chunked,"),
        "te_trailing_space": te_value(b"chunked "),
        "te_trailing_tab": te_value(b"chunked\t"),
        "te_quoted": te_value(b"\"chunked\""),
        "te_param": te_value(b"chunked;q=1"),
        "te_vtab": te_value(b"\x0bchunked"),
        "te_ff": te_value(b"chunked\x0c"),
        "te_nul": te_value(b"chunked\x00"),
        "te_space_colon": lambda rng, r: r.fields.append(b"Transfer-Encoding : chunked") or setattr(r, "body", b"0\r\n\r\n"),
        "te_tab_colon": lambda rng, r: r.fields.append(b"Transfer-Encoding\t: chunked") or setattr(r, "body", b"0\r\n\r\n"),
        "te_underscore": lambda rng, r: r.fields.append(b"Transfer_Encoding: chunked"),
        "te_folded": lambda rng, r: r.fields.extend([b"Transfer-Encoding:", b" chunked"]) or setattr(r, "body", b"0\r\n\r\n"),
        "te_http10": lambda rng, r: r.fields.append(b"Transfer-Encoding: chunked") or setattr(r, "version", b"HTTP/1.0")
        or setattr(r, "body", b"0\r\n\r\n"),
        "cl_folded": lambda rng, r: r.fields.extend([b"Content-Length:", b" 5"]) or setattr(r, "body", b"hello"),
        "cl_plus": cl_value(b"+5"),
        "cl_minus": cl_value(b"-5"),
        "cl_list": cl_value(b"5, 5"),
        "cl_hex": cl_value(b"0x5"),
        "cl_trailing_space": cl_value(b"5 "),
        "cl_space_inside": cl_value(b"5 5"),
        "cl_empty": cl_value(b""),
        "cl_huge": cl_value(b"18446744073709551621"),
        "cl_two_equal": lambda rng, r: r.fields.extend([b"Content-Length: 5", b"Content-Length: 5"])
        or setattr(r, "body", b"hello"),
        "cl_two_differ": lambda rng, r: r.fields.extend([b"Content-Length: 5", b"content-length: 6"])
        or setattr(r, "body", b"hello!"),
        "cl_space_colon": lambda rng, r: r.fields.append(b"Content-Length : 5") or setattr(r, "body", b"hello"),
        "fold": lambda rng, r: r.fields.insert(len(r.fields), b"X-A: 1") or r.fields.append(rng.choice([b" 2", b"\t2"])),
        "first_line_folded": lambda rng, r: r.fields.insert(0, b" X-A: 1"),
        "space_before_colon": add(b"X-A : 1"),
        "no_colon": add(b"X-A 1"),
        "empty_name": add(b": 1"),
        "bare_cr_value": add(b"X-A: a\rb"),
        "nul_value": add(b"X-A: a\x00b"),
        "nul_name": add(b"X\x00A: 1"),
        "ctl_value": add(b"X-A: a\x01b"),
        "del_value": add(b"X-A: a\x7f"),
        "bare_lf_line": lambda rng, r: setattr(r, "eol", b"\n"),
        "bare_lf_inside": add(b"X-A: 1\nX-B: 2"),
        "host_missing": lambda rng, r: setattr(r, "fields", [f for f in r.fields if not f.lower().startswith(b"host:")])
        or setattr(r, "version", b"HTTP/1.1"),
        "host_two": lambda rng, r: r.fields.extend([b"Host: a", b"Host: b"]),
        "host_space": host(b"a b"),
        "host_slash": host(b"a/b"),
        "host_userinfo": host(b"u@a"),
        "host_port": host(b"a:8x"),
        "host_bracket": host(b"[::1"),
        "host_comma": host(b"a, b"),
        "chunk_overflow": on_chunked(lambda rng: b"1" + b"0" * 16 + b"5\r\nhello\r\n0\r\n\r\n"),
        "chunk_16_digits": on_chunked(lambda rng: b"ffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
        "chunk_space_ext": on_chunked(lambda rng: b"5 ;a=b\r\nhello\r\n0\r\n\r\n"),
        "chunk_space_size": on_chunked(lambda rng: b"5 \r\nhello\r\n0\r\n\r\n"),
        "chunk_minus": on_chunked(lambda rng: b"-5\r\nhello\r\n0\r\n\r\n"),
        "chunk_0x": on_chunked(lambda rng: b"0x5\r\nhello\r\n0\r\n\r\n"),
        "chunk_lf_only": on_chunked(lambda rng: b"5\nhello\r\n0\r\n\r\n"),
        "chunk_data_lf_only": on_chunked(lambda rng: b"5\r\nhello\n0\r\n\r\n"),
        "chunk_data_long": on_chunked(lambda rng: b"3\r\nhello\r\n0\r\n\r\n"),
        "chunk_data_short": on_chunked(lambda rng: b"7\r\nhello\r\n0\r\n\r\n"),
        "chunk_ext_nul": on_chunked(lambda rng: b"5;a\x00\r\nhello\r\n0\r\n\r\n"),
        "chunk_ext_cr": on_chunked(lambda rng: b"5;a\rb\r\nhello\r\n0\r\n\r\n"),
        "chunk_ext_junk": on_chunked(lambda rng: rng.choice([b"5;@\r\n", b"5;a b\r\n", b"5;a=\r\n", b"5;=b\r\n",
                                                              b"5;a=\"b\r\n", b"5; a\r\n", b"5;a=b c\r\n"])
                                     + b"hello\r\n0\r\n\r\n"),
        "trailer_fold": on_chunked(lambda rng: b"0\r\nX-T: 1\r\n 2\r\n\r\n"),
        "trailer_no_colon": on_chunked(lambda rng: b"0\r\nX-T\r\n\r\n"),
        "trailer_nul": on_chunked(lambda rng: b"0\r\nX-T: \x00\r\n\r\n"),
        "trailer_bare_lf": on_chunked(lambda rng: b"0\r\nX-T: 1\n\r\n"),
        "version_2": lambda rng, r: setattr(r, "version", b"HTTP/2.0"),
        "version_lower": lambda rng, r: setattr(r, "version", b"http/1.1"),
        "version_space": lambda rng, r: setattr(r, "version", b"HTTP/1.1 "),
        "two_spaces": lambda rng, r: setattr(r, "sp1", b"  "),
        "tab_separator": lambda rng, r: setattr(r, "sp2", b"\t"),
        "target_relative": lambda rng, r: setattr(r, "target", b"v2/health"),
        "target_nul": lambda rng, r: setattr(r, "target", b"/a\x00b"),
        "target_obs_text": lambda rng, r: setattr(r, "target", b"/caf\xc3\xa9"),
        "target_ftp": lambda rng, r: setattr(r, "target", b"ftp://t/a"),
        "target_asterisk": lambda rng, r: setattr(r, "target", b"*") or setattr(r, "method", b"GET"),
        "method_lower": lambda rng, r: setattr(r, "method", b"get") or r.quirks.add(("llhttp", "a method it does not know")),
        "method_token": lambda rng, r: setattr(r, "method", b"X-M!") or r.quirks.add(("llhttp", "a method it does not know")),
        "bare_lf_before": lambda rng, r: setattr(r, "leading", b"\n"),
        "many_fields": lambda rng, r: r.fields.extend(b"X-%d: 1" % i for i in range(101)),
        "long_line": lambda rng, r: setattr(r, "target", b"/" + b"a" * 8200),
    }


MUTATIONS = mutations()


def gen_stream(rng, mutate):
    n = rng.randint(1, 3)
    reqs = [valid_request(rng, i == n - 1) for i in range(n)]
    name = None
    if mutate:
        name = rng.choice(sorted(MUTATIONS))
        MUTATIONS[name](rng, reqs[rng.randrange(n)])
    return name, reqs


# ---------------------------------------------------------------- the parsers

class Msg(collections.namedtuple("Msg", "method target body end")):
    pass


def run_tiled(streams):
    """One h1wire_dump process for all streams: [(status, message, same, msgs, complete)]."""
    data = b"".join(b"%d\n" % len(s) + s for s in streams)
    out = subprocess.run([DUMP], input=data, capture_output=True, check=True, timeout=600).stdout
    results = []
    for s, line in zip(streams, out.decode("latin-1").splitlines()):
        left, message = line.split(" | ", 1)
        status, _accepted, pos, same, *events = left.split(" ")
        msgs, head, body = [], None, b""
        for ev in events:
            kind, rest = ev[0], ev[1:]
            if kind == "H":
                rng, mlen, tgt = rest.split(":")
                h0 = int(rng.split("-")[0])
                t0, t1 = (int(x) for x in tgt.split("-"))
                head, body = (s[h0:h0 + int(mlen)], s[t0:t1]), b""
            elif kind == "D":
                a, b = (int(x) for x in rest.split("-"))
                body += s[a:b]
            else:
                msgs.append(Msg(head[0], head[1], body, int(rest.split("-")[1])))
        results.append((int(status), message, same == "1", msgs, int(pos)))
    assert len(results) == len(streams), "h1wire_dump answered %d of %d streams" % (len(results), len(streams))
    return results


def run_h11(s):
    """(messages, error or None) as h11 reads the stream."""
    c = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    c.receive_data(s)
    c.receive_data(b"")  # the client is done: what is incomplete is an error
    msgs, req, body = [], None, b""
    try:
        while True:
            e = c.next_event()
            if e is h11.NEED_DATA or e is h11.PAUSED or isinstance(e, h11.ConnectionClosed):
                return msgs, None if not c.trailing_data[0] else "unread bytes"
            if isinstance(e, h11.Request):
                req, body = e, b""
            elif isinstance(e, h11.Data):
                body += e.data
            elif isinstance(e, h11.EndOfMessage):
                msgs.append(Msg(req.method, req.target, body, len(s) - len(c.trailing_data[0])))
                c.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                c.send(h11.EndOfMessage())
                if c.our_state is not h11.DONE or c.their_state is not h11.DONE:
                    return msgs, None if not c.trailing_data[0] else "connection closes"
                c.start_next_cycle()
    except h11.RemoteProtocolError as ex:
        return msgs, str(ex) or "error"


class _Llhttp:
    def __init__(self):
        self.msgs, self.url, self.body, self.at, self.method = [], b"", b"", 0, b""
        self.p = httptools.HttpRequestParser(self)

    def on_message_begin(self):
        self.url, self.body = b"", b""

    def on_url(self, url):
        self.url += url

    def on_headers_complete(self):
        self.method = self.p.get_method()

    def on_body(self, body):
        self.body += body

    def on_message_complete(self):
        self.msgs.append(Msg(self.method, self.url, self.body, self.at + 1))


def run_llhttp(s):
    """(messages, error or None) as llhttp reads the stream, fed byte by byte so that each
    message's end is known to the byte."""
    p = _Llhttp()
    try:
        for i in range(len(s)):
            p.at = i
            p.p.feed_data(s[i:i + 1])
    except httptools.HttpParserUpgrade:
        return p.msgs, "upgrade"
    except httptools.HttpParserError as ex:
        return p.msgs, str(ex) or type(ex).__name__
    return p.msgs, None


REFERENCES = {"llhttp": run_llhttp, "h11": run_h11}


def _dump_path():
    d = os.path.dirname(os.path.abspath(BIN))
    return os.path.join(d, "tests", "h1wire_dump"), d


DUMP, _BUILD_DIR = _dump_path()


class Differential(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The filter of this build, brought up to date with the framer (make all builds it; an
        # ASan one is made by path; an old one would judge with an old framer).
        b = os.path.basename(_BUILD_DIR)
        san = b[len("build-"):] if b.startswith("build-") else ""
        subprocess.run(["make", "-C", ROOT, "--no-print-directory", "SAN=" + san, "BUILD=" + b,
                        os.path.join(b, "tests", "h1wire_dump")], check=True, capture_output=True)

    def compare(self, streams, labels, quirks):
        """Applies the rule to each stream; returns the counts it saw."""
        counts = collections.Counter()
        stricter = collections.Counter()
        failures = []
        for s, label, q, (status, message, same, msgs, pos) in zip(streams, labels, quirks, run_tiled(streams)):
            if not same:
                failures.append((label, s, "h1wire: feeding it in pieces gave another verdict or boundaries"))
                continue
            if status:
                cls = classify(message)
                if cls is None:
                    failures.append((label, s, "a refusal in no documented class: " + message))
                    continue
                counts["tiled refused"] += 1
                counts["class " + cls] += 1
            else:
                counts["tiled accepted"] += 1
                counts["messages"] += len(msgs)
                if pos != len(s) or (msgs and msgs[-1].end != len(s)):
                    failures.append((label, s, "a generated stream left incomplete (pos %d of %d)" % (pos, len(s))))
                    continue
            for ref, run in REFERENCES.items():
                assert q <= REFERENCE_QUIRKS, q
                if any(r == ref for r, _ in q):
                    counts["quirk skipped: %s" % ref] += 1
                    continue
                rmsgs, err = run(s)
                for i, m in enumerate(msgs):
                    if i >= len(rmsgs):
                        failures.append((label, s, "%s refuses message %d that tiled accepts (%s): %r"
                                         % (ref, i, err, m)))
                        break
                    if rmsgs[i] != m:
                        failures.append((label, s, "%s frames message %d as %r, tiled as %r" % (ref, i, rmsgs[i], m)))
                        break
                else:
                    if status:
                        if len(rmsgs) > len(msgs):
                            stricter["%s accepts what tiled refuses: %s" % (ref, classify(message))] += 1
                    elif err is not None or len(rmsgs) != len(msgs):
                        failures.append((label, s, "%s: %s after %d messages, tiled accepts all %d"
                                         % (ref, err, len(rmsgs), len(msgs))))
        return counts, stricter, failures

    def report(self, title, counts, stricter, failures):
        print("\n%s (seed %d, %d streams):" % (title, SEED, STREAMS))
        for k, v in sorted(counts.items()):
            print("  %-48s %d" % (k, v))
        for k, v in sorted(stricter.items()):
            print("  stricter: %-38s %d" % (k, v))
        if failures:
            seen = set()
            lines = []
            for label, s, why in failures:
                if (label, why[:40]) in seen:
                    continue
                seen.add((label, why[:40]))
                lines.append("%s: %s\n    %r" % (label, why, s[:300]))
            self.fail("%d streams break the rule; first of each kind:\n%s" % (len(failures), "\n".join(lines[:30])))

    def test_valid_requests_in_unusual_forms_frame_alike(self):
        """Legal requests, pipelined: tiled accepts them all, and both references read the same
        messages with the same boundaries."""
        rng = random.Random(SEED)
        streams, labels, quirks = [], [], []
        for k in range(STREAMS):
            _, reqs = gen_stream(rng, False)
            streams.append(b"".join(r.raw() for r in reqs))
            labels.append("valid#%d" % k)
            quirks.append(set().union(*(r.quirks for r in reqs)))
        counts, stricter, failures = self.compare(streams, labels, quirks)
        self.report("valid streams", counts, stricter, failures)
        # Legal forms are accepted, not just compared: a framer that refused them all would pass the rule.
        self.assertEqual(counts["tiled refused"], 0, counts)
        self.assertGreaterEqual(counts["messages"], STREAMS)

    def test_smuggling_mutations_are_refused_or_framed_alike(self):
        """Each stream has one request mutated into a smuggling-class form: tiled refuses it in a
        documented class, or frames it exactly as both references do."""
        rng = random.Random(SEED + 1)
        streams, labels, quirks = [], [], []
        for k in range(STREAMS):
            name, reqs = gen_stream(rng, True)
            streams.append(b"".join(r.raw() for r in reqs))
            labels.append("%s#%d" % (name, k))
            quirks.append(set().union(*(r.quirks for r in reqs)))
        counts, stricter, failures = self.compare(streams, labels, quirks)
        self.report("mutated streams", counts, stricter, failures)
        self.assertGreater(counts["tiled refused"], STREAMS // 2, counts)

    def test_every_mutation_is_refused_alone(self):
        """Each mutation applied to a plain request alone: tiled refuses it (the mutations are the
        smuggling classes), in a documented class."""
        rng = random.Random(SEED + 2)
        streams, names = [], []
        for name in sorted(MUTATIONS):
            r = Req()
            r.method, r.target, r.fields = b"POST", b"/t", [b"Host: t"]
            MUTATIONS[name](rng, r)
            probe = b"GET /probe HTTP/1.1\r\nHost: t\r\n\r\n"
            streams.append(r.raw() + probe)
            names.append(name)
        # Forms tiled accepts because they frame alike everywhere: checked by the rule above.
        accepted_by_design = {
            "te_underscore",  # an unknown field name, not Transfer-Encoding
            "method_lower", "method_token",  # any token is a method (RFC 9110 9.1)
        }
        for name, s, (status, message, same, msgs, _) in zip(names, streams, run_tiled(streams)):
            self.assertTrue(same, name)
            if name in accepted_by_design:
                self.assertEqual(status, 0, (name, message))
                continue
            self.assertNotEqual(status, 0, (name, s))
            self.assertIsNotNone(classify(message), (name, message))
            self.assertFalse([m for m in msgs if m.target == b"/probe"], name)


if __name__ == "__main__":
    unittest.main()
