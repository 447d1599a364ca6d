#!/usr/bin/env python3
"""gen_h1wire_corpus.py - seeds for fuzz_h1wire (fuzz/corpus/h1wire/): request
streams in every framing the framer accepts, pipelined, and one of each
refusal class (the smuggling rows of tests/server/test_framing.py).

    python3 fuzz/gen_h1wire_corpus.py fuzz/corpus/h1wire
"""
import os
import sys

H = b"Host: t\r\n"


def req(head=b"", body=b"", method=b"POST", target=b"/t", version=b"HTTP/1.1", host=H):
    return method + b" " + target + b" " + version + b"\r\n" + host + head + b"\r\n" + body


TE = b"Transfer-Encoding: chunked\r\n"
SEEDS = {
    "get": req(method=b"GET"),
    "get_http10": req(method=b"GET", version=b"HTTP/1.0", host=b""),
    "absolute_form": req(method=b"GET", target=b"http://t:80/a?b=c"),
    "asterisk": req(method=b"OPTIONS", target=b"*"),
    "ipv6_host": req(host=b"Host: [::1]:8080\r\n"),
    "ows_values": req(b"X-A: \t v \t\r\nContent-Length:\t 3\r\n", b"abc", host=b"hOsT:  t  \r\n"),
    "cl_body": req(b"Content-Length: 5\r\n", b"hello"),
    "cl_leading_zeros": req(b"Content-Length: 0005\r\n", b"hello"),
    "chunked": req(TE, b"5\r\nhello\r\n0\r\n\r\n"),
    "chunked_ext_trailer": req(b"Transfer-Encoding: Chunked\r\n", b"5;a=b;c=\"d e\"\r\nhello\r\n00A\r\n0123456789\r\n"
                               b"0;x\r\nX-T: 1\r\nX-U: 2\r\n\r\n"),
    "pipelined": req(method=b"GET") + req(b"Content-Length: 3\r\n", b"abc") + b"\r\n" + req(TE, b"1\r\nq\r\n0\r\n\r\n")
    + req(method=b"GET", version=b"HTTP/1.0", host=b""),
    "partial": req(b"Content-Length: 10\r\n", b"abc"),
    "cl_te": req(b"Content-Length: 50\r\n" + TE, b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"),
    "te_cl": req(TE + b"Content-Length: 4\r\n", b"5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n"),
    "te_space_colon": req(b"Transfer-Encoding : chunked\r\n", b"0\r\n\r\n"),
    "te_xchunked": req(b"Transfer-Encoding: xchunked\r\n", b"0\r\n\r\n"),
    "te_list": req(b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"),
    "te_two_lines": req(TE + b"Transfer-Encoding: identity\r\n", b"0\r\n\r\n"),
    "te_folded": req(b"Transfer-Encoding:\r\n chunked\r\n", b"0\r\n\r\n"),
    "te_vtab": req(b"Transfer-Encoding:\x0bchunked\r\n", b"0\r\n\r\n"),
    "cl_folded": req(b"Content-Length:\r\n 3\r\n", b"abc"),
    "cl_two": req(b"Content-Length: 3\r\nContent-Length: 4\r\n", b"abcd"),
    "cl_plus": req(b"Content-Length: +3\r\n", b"abc"),
    "cl_huge": req(b"Content-Length: 18446744073709551616\r\n", b"x"),
    "nul_value": req(b"X-A: a\x00b\r\n"),
    "bare_lf": b"GET / HTTP/1.1\nHost: t\n\n",
    "bare_cr": req(b"X-A: a\rb\r\n"),
    "obs_fold": req(b"X-A: 1\r\n 2\r\n"),
    "invalid_host": req(host=b"Host: a/b\r\n"),
    "two_hosts": req(host=b"Host: a\r\nHost: b\r\n"),
    "http2": req(version=b"HTTP/2.0"),
    "chunk_overflow": req(TE, b"10000000000000005\r\nhello\r\n0\r\n\r\n"),
    "chunk_space": req(TE, b"5 ;a\r\nhello\r\n0\r\n\r\n"),
    "chunk_too_long": req(TE, b"3\r\nhello\r\n0\r\n\r\n"),
    "trailer_fold": req(TE, b"0\r\nX: 1\r\n 2\r\n\r\n"),
    "long_line": b"GET /" + b"a" * 8200 + b" HTTP/1.1\r\nHost: t\r\n\r\n",
    "long_head": req(b"X-A: " + b"a" * 16400 + b"\r\n"),
    "many_fields": req(b"".join(b"X-%d: 1\r\n" % i for i in range(101))),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/h1wire"
    os.makedirs(out, exist_ok=True)
    for name, raw in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(raw)


if __name__ == "__main__":
    main()
