#!/usr/bin/env python3
"""gen_h1_transport_corpus.py - writes the seeds of the h1_transport fuzz
target to fuzz/corpus/h1_transport/.

    build/venv/bin/python fuzz/gen_h1_transport_corpus.py

Each seed is what a client sends on one HTTP/1.1 connection (see
fuzz/fuzz_h1_transport.c): requests of every route and body format, in
pieces separated by the harness's escapes (0xFF then a control byte; a 0xFF
of the stream is doubled). The seeds are committed; this script documents
how they were made and rebuilds them. The bodies are gen_corpus.py's seeds
of the decoders.
"""
import gzip
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_corpus import NPY, RAW, V1_JSON, V2, write_seeds  # noqa: E402

TARGET = "h1_transport"
# The harness's control bytes (fuzz_h1_transport.c).
NOWAIT, WORKERS, PAUSE, DRAIN, STOP, SHUT = 0x01, 0x02, 0x04, 0x08, 0x40, 0x80
TICK, LATE, IDLE = 0x10, 0x20, 0x30  # time passing: 300 ms, 3 s, 60 s


def esc(data):
    return data.replace(b"\xff", b"\xff\xff")


def ctl(c):
    return b"\xff" + bytes([c])


def conn(*parts):
    """A connection: bytes (escaped here) and control bytes (ints) in order."""
    return b"".join(ctl(p) if isinstance(p, int) else esc(p) for p in parts)


def req(method, target, headers=(), body=b"", version=b"HTTP/1.1", host=True, length=True):
    """A request; Content-Length from the body unless `length` is False or a
    framing field is given."""
    if isinstance(body, str):
        body = body.encode()
    lines = [b"%s %s %s" % (method.encode(), target.encode() if isinstance(target, str) else target, version)]
    if host:
        lines.append(b"Host: tiled")
    names = set()
    for h in headers:
        h = h.encode() if isinstance(h, str) else h
        names.add(h.split(b":")[0].lower())
        lines.append(h)
    if length and body and b"content-length" not in names and b"transfer-encoding" not in names:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def chunked(body, sizes, ext=b"", trailer=b""):
    out, at = b"", 0
    for n in sizes:
        out += b"%x%s\r\n" % (n, ext) + body[at:at + n] + b"\r\n"
        at += n
    if at < len(body):
        out += b"%x\r\n" % (len(body) - at) + body[at:] + b"\r\n"
    return out + b"0\r\n" + trailer + b"\r\n"


JSON = "application/json"
OCTET = "application/octet-stream"
NPY_TYPE = "application/x-npy"
TILE_JSON = V1_JSON["float32_onnx"]
# 4,000 float32 repeated: 16 KiB of raw output, streamed (above 4 KiB).
BIG_RAW_QUERY = "/v1/tile?dtype=float32&shape=4&repeats=1000"
BIG_RAW = struct.pack("<4f", 1, 2, 3, 4)
# A body above --inline-max (256 bytes): served by a worker.
WORKER_JSON = json.dumps({"input": {"dtype": "int32", "shape": [80], "data": list(range(80))}, "repeats": [2]})


def json_tile(doc=TILE_JSON, extra=()):
    return req("POST", "/v1/tile", ["Content-Type: " + JSON, *extra], doc)


def raw_tile(query, body, extra=()):
    return req("POST", "/v1/tile?" + query, ["Content-Type: " + OCTET, *extra], body)


def v2_infer(v2_seed, model="tile"):
    """gen_corpus.py's v2 seeds: header length (2 bytes, 0xFFFF = none),
    version selector, JSON, binary data."""
    hl, sel = struct.unpack(">HB", v2_seed[:3])
    rest = v2_seed[3:]
    version = {0: "13", 1: "6", 2: "1"}[sel]
    target = "/v2/models/%s/versions/%s/infer" % (model, version)
    if hl == 0xFFFF:
        return req("POST", target, ["Content-Type: " + JSON], rest)
    return req("POST", target, ["Content-Type: " + OCTET, "Inference-Header-Content-Length: %d" % hl], rest)


def seeds():
    s = {}
    # ---- each route and body format, one request a connection
    for name, doc in V1_JSON.items():
        s["json_" + name] = conn(json_tile(doc))
    for name, (query, body) in RAW.items():
        s["raw_" + name] = conn(raw_tile(query, body))
    for name in ("float32_v1", "float64_big_endian", "unicode_v3", "bytes", "scalar_int8"):
        s["npy_" + name] = conn(req("POST", "/v1/tile?repeats=2,1", ["Content-Type: " + NPY_TYPE], NPY[name]))
    s["npy_accept"] = conn(json_tile(extra=["Accept: application/x-npy"]))
    s["raw_accept_json"] = conn(raw_tile("dtype=int8&shape=2&repeats=3", b"\x01\x02", ["Accept: application/json"]))
    for name, body in V2.items():
        s["v2_" + name] = conn(v2_infer(body))
    s["v2_routes"] = conn(req("GET", "/v2"), req("GET", "/v2/models/tile"), req("GET", "/v2/models/tile/ready"),
                          req("GET", "/v2/models/tile/versions/13/config"), req("GET", "/v2/models/tile/stats"),
                          req("POST", "/v2/repository/index", body=b"{}"),
                          req("GET", "/v2/models/nosuch/ready"))
    s["shm"] = conn(req("GET", "/v2/systemsharedmemory/status"),
                    req("POST", "/v2/systemsharedmemory/region/r/register", ["Content-Type: " + JSON],
                        '{"key":"/k","offset":0,"byte_size":16}'),
                    req("POST", "/v2/cudasharedmemory/region/r/unregister", body=b""))
    s["metrics"] = conn(req("GET", "/metrics"))
    s["health"] = conn(req("GET", "/v2/health/live"), req("GET", "/v2/health/ready"))
    s["openapi"] = conn(req("GET", "/openapi.json"))
    s["options"] = conn(req("OPTIONS", "*"), req("OPTIONS", "/v1/tile"))
    s["not_found"] = conn(req("GET", "/nosuch"), req("DELETE", "/v1/tile"), req("GET", "/v1/tile"),
                          req("POST", "/inference.GRPCInferenceService/ServerLive", body=b"\0\0\0\0\0"))
    # ---- pipelined, in one piece and across pieces cut anywhere
    many = (req("GET", "/v2/health/live") + json_tile() + raw_tile("dtype=uint8&shape=3&repeats=2", b"abc")
            + req("HEAD", "/metrics") + req("GET", "/v2/health/ready", ["X-Request-Id: pipelined-5"]))
    s["pipelined"] = conn(many)
    s["pipelined_cut"] = conn(many[:30], NOWAIT, many[30:31], 0, many[31:200], NOWAIT, many[200:])
    s["pipelined_then_close"] = conn(req("GET", "/v2/health/live"), req("GET", "/v2", ["Connection: close"]),
                                     req("GET", "/metrics"))
    s["pipelined_workers"] = conn(json_tile(WORKER_JSON), NOWAIT, json_tile(WORKER_JSON), NOWAIT | WORKERS,
                                  req("GET", "/v2/health/live"))
    # ---- chunked request bodies
    body = TILE_JSON.encode()
    s["chunked"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Transfer-Encoding: chunked"],
                            chunked(body, [1, 10, 20]), length=False))
    s["chunked_ext_trailer"] = conn(req("POST", "/v1/tile?dtype=float32&shape=2&repeats=2",
                                        ["Content-Type: " + OCTET, "Transfer-Encoding: chunked"],
                                        chunked(struct.pack("<2f", 1, 2), [3], b";x=y", b"X-T: 1\r\n"),
                                        length=False), req("GET", "/v2/health/live"))
    c = req("POST", "/v1/tile", ["Content-Type: " + JSON, "Transfer-Encoding: chunked"], chunked(body, [7, 30]),
            length=False)
    s["chunked_pieces"] = conn(c[:70], 0, c[70:90], NOWAIT, c[90:])
    s["chunked_over_max_body"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Transfer-Encoding: chunked"],
                                          chunked(b" " * 6000, [2000, 2000]), length=False))
    # ---- Expect: 100-continue: the head, then the body once the 100 came
    exp = json_tile(extra=["Expect: 100-continue"])
    head_end = exp.index(b"\r\n\r\n") + 4
    s["expect_continue"] = conn(exp[:head_end], 0, exp[head_end:], 0, req("GET", "/v2/health/live"))
    s["expect_refused"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Expect: 100-continue",
                                                        "Content-Length: 100000"]), b"{}")
    s["expect_http10"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Expect: 100-continue",
                                                       "Content-Length: %d" % len(body)], version=b"HTTP/1.0"), body)
    # ---- HEAD, conditional GET
    s["head"] = conn(req("HEAD", "/openapi.json"), req("HEAD", "/metrics"), req("HEAD", "/v2/health/live"),
                     req("HEAD", "/v1/tile"))
    s["conditional"] = conn(req("GET", "/openapi.json", ['If-None-Match: "x", *']),
                            req("GET", "/openapi.json", ['If-Match: "nope"']),
                            req("HEAD", "/v2/models/tile", ["If-None-Match: *"]),
                            req("GET", "/v2/models/tile/config", ['If-None-Match: W/"1"']))
    # ---- gzip bodies and replies
    gz = gzip.compress(body, mtime=0)
    s["gzip_body"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Content-Encoding: gzip"], gz))
    s["gzip_reply"] = conn(raw_tile(BIG_RAW_QUERY[len("/v1/tile?"):], BIG_RAW, ["Accept-Encoding: gzip, br"]),
                           json_tile(extra=["Accept-Encoding: gzip;q=1, identity;q=0"]))
    s["gzip_bomb"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Content-Encoding: gzip"],
                              gzip.compress(b" " * 200000, mtime=0)))
    s["gzip_bad"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Content-Encoding: gzip"], gz[:-6]),
                         req("POST", "/v1/tile", ["Content-Type: " + JSON, "Content-Encoding: br"], body))
    # ---- streamed replies: a client that pauses, trailers, HTTP/1.0
    big = raw_tile(BIG_RAW_QUERY[len("/v1/tile?"):], BIG_RAW)
    s["streamed"] = conn(big, req("GET", "/v2/health/live"))
    s["streamed_json_trailers"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "TE: trailers"],
                                           json.dumps({"input": {"dtype": "uint8", "shape": [4],
                                                                 "data": [1, 2, 3, 4]}, "repeats": [1500]})))
    s["streamed_paused"] = conn(big, PAUSE, req("GET", "/metrics"), PAUSE, b"", 0, req("GET", "/v2/health/live"))
    s["streamed_http10"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON],
                                    json.dumps({"input": {"dtype": "uint8", "shape": [4], "data": [1, 2, 3, 4]},
                                                "repeats": [1500]}), version=b"HTTP/1.0"))
    s["http10_keep_alive"] = conn(req("GET", "/v2/health/live", ["Connection: keep-alive"], version=b"HTTP/1.0",
                                      host=False), req("GET", "/v2/health/ready", version=b"HTTP/1.0", host=False),
                                  req("GET", "/metrics"))
    s["too_large_output"] = conn(raw_tile("dtype=float64&shape=4&repeats=100000", struct.pack("<4d", 1, 2, 3, 4)))
    # ---- framing refusals, alone and after good requests
    s["refused_cl_te"] = conn(req("GET", "/v2/health/live"),
                              req("POST", "/v1/tile", ["Content-Length: 5", "Transfer-Encoding: chunked"],
                                  b"0\r\n\r\n", length=False), req("GET", "/v2/health/live"))
    s["refused_head"] = conn(req("HEAD", "/v2/health/live"), b"HEAD /x HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n")
    s["refused_version"] = conn(b"GET / HTTP/2.0\r\nHost: t\r\n\r\n")
    s["refused_long_line"] = conn(b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    s["refused_bare_lf"] = conn(req("GET", "/v2/health/live"), b"GET / HTTP/1.1\nHost: t\n\n")
    s["refused_chunk"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Transfer-Encoding: chunked"],
                                  b"5\r\nhello\r\nzz\r\n", length=False))
    s["refused_no_host"] = conn(req("GET", "/v2/health/live", host=False))
    s["refused_many_fields"] = conn(req("GET", "/v2/health/live", ["X-%d: 1" % i for i in range(70)]))
    # ---- body refusals decided by the head, and bodies that never come
    s["over_max_body"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Content-Length: 5000"],
                                  b"{" * 100), req("GET", "/v2/health/live"))
    s["wrong_type"] = conn(req("POST", "/v1/tile", ["Content-Type: text/plain"], body),
                           req("POST", "/v1/tile", [], body))
    s["body_cut"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Content-Length: 500"], body))
    s["body_cut_shut"] = conn(req("POST", "/v1/tile", ["Content-Type: " + JSON, "Content-Length: 500"], body), SHUT)
    # ---- deadlines: a late body (408), a late head, an idle connection
    # A body that stops is cut once late and silent for a second; one that
    # keeps coming, a byte a tick, gets 408 for the piece after its deadline.
    s["late_body"] = conn(exp[:head_end], LATE, exp[head_end:])
    s["late_body_408"] = conn(exp[:head_end], *[p for k in range(9) for p in (TICK, exp[head_end + k:head_end + k + 1])])
    s["late_head"] = conn(b"GET /v2/health/live HTTP/1.1\r\n", LATE, b"Host: t\r\n\r\n")
    s["idle"] = conn(req("GET", "/v2/health/live"), IDLE, req("GET", "/v2/health/live"))
    s["tick"] = conn(req("GET", "/v2/health/live"), TICK, req("GET", "/v2/health/ready"))
    s["paused_idle"] = conn(req("GET", "/openapi.json"), PAUSE | IDLE, b"", 0)
    s["linger"] = conn(req("GET", "/v2/health/live", ["Connection: close"]), PAUSE, b"more bytes", IDLE)
    # ---- drain and stop in the middle of the connection
    s["drain_idle"] = conn(req("GET", "/v2/health/live"), DRAIN, req("GET", "/v2/health/ready"),
                           req("GET", "/metrics"))
    s["drain_worker"] = conn(json_tile(WORKER_JSON), NOWAIT | DRAIN, req("GET", "/v2/health/live"))
    s["drain_pipelined"] = conn(req("GET", "/v2/health/live") + big + req("GET", "/v2"), NOWAIT | DRAIN,
                                b"", 0)
    s["stop_streamed"] = conn(big, NOWAIT | PAUSE, b"", STOP)
    s["stop_worker"] = conn(json_tile(WORKER_JSON), NOWAIT | DRAIN | STOP)
    # ---- the client goes, or shuts its side, while a worker holds its request
    s["gone_with_worker"] = conn(json_tile(WORKER_JSON), NOWAIT)
    s["shut_with_worker"] = conn(json_tile(WORKER_JSON), NOWAIT | SHUT)
    s["shut_pipelined"] = conn(json_tile(WORKER_JSON) + req("GET", "/v2/health/live"), SHUT)
    s["resume_then_read"] = conn(json_tile(WORKER_JSON), NOWAIT, req("GET", "/v2/health/live"),
                                 NOWAIT | WORKERS, b"", 0)
    # ---- CORS, keys, request ids, odd targets
    s["cors"] = conn(req("GET", "/v2/health/live", ["Origin: https://app.example"]),
                     req("OPTIONS", "/v1/tile", ["Origin: https://app.example", "Access-Control-Request-Method: POST",
                                                 "Access-Control-Request-Headers: content-type"]),
                     req("POST", "/v1/tile", ["Origin: https://evil.example", "Content-Type: " + JSON], body))
    s["auth_header"] = conn(req("GET", "/v2/models/tile", ["Authorization: Bearer k"]))
    s["request_id"] = conn(req("GET", "/v2/health/live", [b"X-Request-Id: id \x80\xfe\xff\t1"]),
                           req("GET", "/v2/health/live", ["X-Request-Id: " + "r" * 200]))
    s["odd_targets"] = conn(req("GET", "http://tiled:80/v2/health/live?x=1"),
                            req("GET", "/v2/models/a%0d%0aSet-Cookie:%20x/ready"),
                            req("GET", "/v2/models/%00%ff%zz/config"),
                            req("POST", "/v1/tile?dtype=float32&shape=2&repeats=2&repeats=3&bogus&=x",
                                ["Content-Type: " + OCTET], struct.pack("<2f", 1, 2)))
    s["connection_lists"] = conn(req("GET", "/v2/health/live", ["Connection: keep-alive, Upgrade", "Upgrade: h2c"]),
                                 req("GET", "/v2/health/live", ["Connection: keep-alive", "Connection: close"]),
                                 req("GET", "/v2/health/live"))
    return s


def main():
    write_seeds(TARGET, seeds())
    return 0


if __name__ == "__main__":
    sys.exit(main())
