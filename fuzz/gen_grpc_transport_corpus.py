#!/usr/bin/env python3
"""gen_grpc_transport_corpus.py - writes the seeds of the grpc_transport fuzz
target to fuzz/corpus/grpc_transport/.

    build/venv/bin/python fuzz/gen_grpc_transport_corpus.py

Each seed is what a client sends on one HTTP/2 connection (see
fuzz/fuzz_grpc_transport.c): the preface, SETTINGS, then gRPC calls as
HEADERS (HPACK from the `hpack` package of the test venv, mostly without
Huffman coding so that the dictionary's strings apply) and DATA frames with
length-prefixed messages. The seeds are committed; this script documents
how they were made and rebuilds them. The ModelInfer messages are
gen_corpus.py's gRPC seeds.
"""
import gzip
import os
import struct
import sys

import hpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_corpus import GRPC, pb_len, write_seeds  # noqa: E402

TARGET = "grpc_transport"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 2, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20
# The harness's own bits (fuzz_grpc_transport.c), ignored by HTTP/2 receivers.
NO_WAIT = 0x80000000  # reserved bit of the stream id
DRAIN, SPLIT, PAUSE, WORKERS = 0x40, 0x80, 0x10, 0x02  # frame flags no frame type defines

SERVICE = "/inference.GRPCInferenceService/"
HEALTH = "/grpc.health.v1.Health/Check"
REFLECTION = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def settings(*pairs, flags=0):
    return frame(SETTINGS, flags, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def message(payload, flag=0, length=None):
    """A gRPC Length-Prefixed-Message (`length` overrides the declared one)."""
    return bytes([flag]) + struct.pack(">I", len(payload) if length is None else length) + payload


class Client:
    """One connection's bytes; one HPACK encoder, so later blocks index earlier ones."""

    def __init__(self, huffman=False, *first):
        self.enc, self.huffman = hpack.Encoder(), huffman
        self.out = PREFACE + settings(*first)

    def add(self, *frames):
        self.out += b"".join(frames)
        return self

    def head(self, stream, path, extra=(), flags=END_HEADERS, method="POST", content_type="application/grpc"):
        fields = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "localhost"),
                  ("content-type", content_type), ("te", "trailers"), *extra]
        return frame(HEADERS, flags, stream, self.enc.encode(fields, huffman=self.huffman))

    def call(self, stream, path, msg=b"", extra=()):
        """HEADERS, then the message in one DATA frame that ends the stream."""
        return self.add(self.head(stream, path, extra), frame(DATA, END_STREAM, stream, message(msg)))


def model_ref(name=b"tile", version=b""):
    return pb_len(1, name) + (pb_len(2, version) if version else b"")


INFER = GRPC["raw_fp32"]  # tile, version 13, FP32 [2,2] x repeats [2,3]


def tile_fp32_2x2(r0, r1):
    """ModelInfer: FP32 [2,2] tiled by [r0, r1]."""
    return (pb_len(1, "tile") + pb_len(5, pb_len(1, "input") + pb_len(2, "FP32") + pb_len(3, b"\x02\x02"))
            + pb_len(5, pb_len(1, "repeats") + pb_len(2, "INT64") + pb_len(3, b"\x02"))
            + pb_len(7, struct.pack("<4f", 1, 2, 3, 4)) + pb_len(7, struct.pack("<2q", r0, r1)))


BIG_INFER = tile_fp32_2x2(32, 32)  # 16 KiB: above the harness's 4 KiB stream threshold
HUGE_INFER = tile_fp32_2x2(128, 48)  # 96 KiB: two stream chunks, DATA frames as large as the client takes


def one_stream(path, data, extra=()):
    """One call whose DATA frame carries `data` as it is (a prefix made by hand)."""
    c = Client()
    return c.add(c.head(1, path, extra), frame(DATA, END_STREAM, 1, data)).out


def seeds():
    s = {}
    s["live"] = Client().call(1, SERVICE + "ServerLive").add(settings(flags=ACK)).out
    s["ready_huffman"] = Client(True).call(1, SERVICE + "ServerReady").out
    s["health"] = Client().call(1, HEALTH, pb_len(1, "")).out
    s["infer"] = Client().call(1, SERVICE + "ModelInfer", INFER, [("x-request-id", "seed-1")]).out
    for name in ("tritonclient_raw", "typed_bytes", "typed_int"):
        s["infer_" + name] = Client().call(1, SERVICE + "ModelInfer", GRPC[name]).out
    s["model_rpcs"] = (Client().call(1, SERVICE + "ModelReady", model_ref())
                       .call(3, SERVICE + "ModelMetadata", model_ref(version=b"13"))
                       .call(5, SERVICE + "ModelConfig", model_ref()).call(7, SERVICE + "ServerMetadata")
                       .call(9, SERVICE + "ModelStatistics", model_ref()).call(11, SERVICE + "NoSuchRpc").out)
    # A streamed reply, let through by the client's WINDOW_UPDATEs.
    s["infer_streamed"] = (Client(False, (4, 1 << 20)).add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)))
                           .call(1, SERVICE + "ModelInfer", BIG_INFER).out)
    s["infer_large_frames"] = (Client(False, (4, 1 << 23), (5, (1 << 24) - 1))
                               .add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 24)))
                               .call(1, SERVICE + "ModelInfer", HUGE_INFER).out)
    # The same with the client's window closed: the reply waits until the client goes.
    s["infer_window_zero"] = Client(False, (4, 0)).call(1, SERVICE + "ModelInfer", BIG_INFER).out
    # The message across DATA frames, the prefix itself split, padding, client trailers.
    c = Client()
    m = message(INFER)
    c.add(c.head(1, SERVICE + "ModelInfer"), frame(DATA, 0, 1, m[:3]), frame(DATA, SPLIT, 1, m[3:40]),
          frame(DATA, PADDED, 1, b"\x04" + m[40:] + b"\0" * 4),
          frame(HEADERS, END_HEADERS | END_STREAM, 1, c.enc.encode([("x-trailer", "1")], huffman=False)))
    s["infer_split"] = c.out
    # Streams at once, without waiting for the workers, then cancelled.
    c = Client()
    c.add(c.head(1, SERVICE + "ModelInfer"), frame(DATA, END_STREAM, 1 | NO_WAIT, message(BIG_INFER)),
          frame(RST_STREAM, 0, 1 | NO_WAIT, struct.pack(">I", 8)), c.head(3, SERVICE + "ModelInfer"),
          frame(DATA, END_STREAM, 3 | NO_WAIT, message(INFER)), frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)))
    s["cancel_in_flight"] = c.out
    s["deadline"] = Client().call(1, SERVICE + "ModelInfer", BIG_INFER, [("grpc-timeout", "1n")]).out
    s["deadline_late"] = Client().call(1, SERVICE + "ModelInfer", BIG_INFER, [("grpc-timeout", "99999999H")]).out
    # The harness's clock moves 100 us a turn: 250u passes after the DATA
    # frame's turn, at the PING's, while a worker holds the call.
    c = Client()
    c.add(c.head(1, SERVICE + "ModelInfer", [("grpc-timeout", "250u")]),
          frame(DATA, END_STREAM, 1 | NO_WAIT, message(BIG_INFER)), frame(PING, 0, 0, b"deadline"))
    s["deadline_with_worker"] = c.out
    # A worker finishes while the client resets its call: the loop reads the
    # RST_STREAM before it takes the worker's resume (and a PING before
    # another's).
    c = Client()
    c.add(c.head(1, SERVICE + "ModelInfer"), frame(DATA, END_STREAM, 1 | NO_WAIT, message(BIG_INFER)),
          frame(RST_STREAM, WORKERS, 1, struct.pack(">I", 8)), c.head(3, SERVICE + "ModelInfer"),
          frame(DATA, END_STREAM, 3 | NO_WAIT, message(BIG_INFER)), frame(PING, WORKERS, 0, b"resumed!"))
    s["reset_before_resume"] = c.out
    s["gzip"] = one_stream(SERVICE + "ModelInfer", message(gzip.compress(INFER, mtime=0), flag=1), [("grpc-encoding", "gzip")])
    s["bad_encoding"] = Client().call(1, SERVICE + "ServerLive", b"", [("grpc-encoding", "br")]).out
    s["compressed_identity"] = one_stream(SERVICE + "ServerLive", message(b"", flag=1))
    s["huge_length"] = one_stream(SERVICE + "ModelInfer", message(b"x", length=0xFFFFFFFF))
    s["two_messages"] = one_stream(SERVICE + "ServerLive", message(b"") + message(b""))
    c = Client()
    s["no_message"] = c.add(c.head(1, SERVICE + "ServerLive", flags=END_HEADERS | END_STREAM)).out
    c = Client()
    c.call(1, SERVICE + "ServerLive").add(
        c.head(3, SERVICE + "ServerLive", content_type="application/json", flags=END_HEADERS | END_STREAM),
        c.head(5, "/v2/health/live", method="GET", flags=END_HEADERS | END_STREAM))
    s["not_grpc"] = c.out
    # CONTINUATION, PRIORITY, PING, a SETTINGS flood, WINDOW_UPDATE on a stream.
    c = Client()
    block = c.enc.encode([(":method", "POST"), (":scheme", "http"), (":path", SERVICE + "ServerReady"),
                          (":authority", "localhost"), ("content-type", "application/grpc"),
                          ("authorization", "Bearer k")], huffman=False)
    c.add(frame(PRIORITY, 0, 1, struct.pack(">IB", 0, 15)), frame(HEADERS, PRIO, 1, struct.pack(">IB", 0, 200) + block[:10]),
          frame(CONTINUATION, END_HEADERS, 1, block[10:]), frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 100)),
          frame(PING, 0, 0, b"12345678"), *[settings((4, 65535 + i), (5, 16384)) for i in range(8)],
          frame(DATA, END_STREAM, 1, message(b"")))
    s["control_frames"] = c.out
    s["metadata_overflow"] = Client().call(1, SERVICE + "ServerLive", b"",
                                           [("x-m%d" % i, "v") for i in range(70)]).out
    # Three large replies at once: more output than the connection gathers
    # before it must wait for the socket.
    c = Client(False, (4, 1 << 23), (5, (1 << 24) - 1)).add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 24)))
    for stream in (1, 3, 5):
        c.add(c.head(stream, SERVICE + "ModelInfer"), frame(DATA, END_STREAM, stream | NO_WAIT, message(HUGE_INFER)))
    s["three_large_replies"] = c.add(frame(PING, 0, 0, b"waitdone")).out
    # The server stops while a reply is streamed.
    c = Client(False, (4, 1 << 23)).add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 24)))
    s["stop_mid_stream"] = c.add(c.head(1, SERVICE + "ModelInfer"),
                                 frame(DATA, END_STREAM | DRAIN, 1 | NO_WAIT, message(HUGE_INFER))).out
    # Two calls whose messages (declared sizes) are more than a connection may hold.
    c = Client()
    for stream in (1, 3):
        c.add(c.head(stream, SERVICE + "ModelInfer"), frame(DATA, 0, stream, message(b"\x0a\x04tile", length=30000)))
    s["conn_budget"] = c.add(frame(RST_STREAM, 0, 1, struct.pack(">I", 8)),
                             c.head(5, SERVICE + "ModelInfer"), frame(DATA, 0, 5, message(b"", length=20000))).out
    # Reflection answers each message as it comes, without the client's half-close;
    # each is answered on the same call. ServerReflectionRequest:
    # file_containing_symbol = 4, list_services = 7.
    s["reflection_list"] = Client().call(1, REFLECTION, pb_len(7, "")).out
    c = Client(False, (4, 1 << 20))
    c.add(c.head(1, REFLECTION.replace(".v1.", ".v1alpha.")),
          frame(DATA, 0, 1, message(pb_len(4, "inference.GRPCInferenceService"))),
          frame(DATA, 0, 1, message(pb_len(7, ""))), frame(DATA, END_STREAM, 1))
    s["reflection_open_call"] = c.out
    # A client that does not read while 60 replies of 16 KiB are made, then
    # reads them: the server's output queue holds hundreds of pieces, and is
    # written a socketful at a time.
    c = Client(False, (4, 1 << 23), (5, (1 << 24) - 1)).add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))
    for stream in range(1, 121, 2):
        c.add(c.head(stream, SERVICE + "ModelInfer", flags=END_HEADERS | PAUSE),
              frame(DATA, END_STREAM | PAUSE, stream, message(BIG_INFER)))
    s["unread_replies"] = c.add(frame(PING, 0, 0, b"readnow!")).out
    # ModelStreamInfer: messages in one DATA frame and across frames (an
    # error between), each answered in order; a streamed answer; a message
    # above the limit and a half-close inside a message end the stream; a
    # reset, the stream's deadline and a drain while a worker holds one of
    # its messages; answers piling up while the client does not read.
    stream = SERVICE + "ModelStreamInfer"
    msgs = message(INFER) + message(b"\xff") + message(GRPC["tritonclient_raw"])
    s["stream_infer"] = one_stream(stream, msgs)
    c = Client()
    c.add(c.head(1, stream), frame(DATA, 0, 1, msgs[:7]), frame(DATA, SPLIT, 1, msgs[7:60]),
          frame(DATA, 0, 1, msgs[60:]), frame(DATA, END_STREAM, 1))
    s["stream_split"] = c.out
    c = Client(False, (4, 1 << 20)).add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)))
    s["stream_streamed_answer"] = c.add(c.head(1, stream),
                                        frame(DATA, END_STREAM, 1, message(BIG_INFER) + message(INFER))).out
    s["stream_too_big"] = one_stream(stream, message(INFER) + message(b"x", length=0xFFFFFFFF))
    s["stream_cut"] = one_stream(stream, message(INFER) + message(INFER)[:9])
    c = Client()
    c.add(c.head(1, stream), frame(DATA, 0, 1 | NO_WAIT, message(BIG_INFER) + message(INFER)),
          frame(RST_STREAM, 0, 1 | NO_WAIT, struct.pack(">I", 8)), c.head(3, stream),
          frame(DATA, END_STREAM, 3, message(INFER)))
    s["stream_reset"] = c.out
    c = Client()
    c.add(c.head(1, stream, [("grpc-timeout", "250u")]),
          frame(DATA, 0, 1 | NO_WAIT, message(BIG_INFER) + message(BIG_INFER)), frame(PING, 0, 0, b"deadline"))
    s["stream_deadline"] = c.out
    c = Client()
    c.add(c.head(1, stream), frame(DATA, 0, 1 | NO_WAIT, message(BIG_INFER)),
          frame(DATA, DRAIN, 1, message(INFER)), frame(DATA, END_STREAM, 1))
    s["stream_drain"] = c.out
    c = Client(False, (4, 1 << 23)).add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))
    c.add(c.head(1, stream, flags=END_HEADERS | PAUSE),
          *[frame(DATA, PAUSE, 1, message(BIG_INFER)) for _ in range(8)], frame(DATA, END_STREAM, 1))
    s["stream_unread"] = c.add(frame(PING, 0, 0, b"readnow!")).out
    # A stream's answers beside unary replies the client does not read: each
    # answer is admitted to the connection's budget as a unary reply is.
    c = Client(False, (4, 1 << 23)).add(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))
    for sid in (1, 3):
        c.add(c.head(sid, SERVICE + "ModelInfer", flags=END_HEADERS | PAUSE),
              frame(DATA, END_STREAM | PAUSE, sid, message(BIG_INFER)))
    c.add(c.head(5, stream, flags=END_HEADERS | PAUSE),
          frame(DATA, END_STREAM | PAUSE, 5, message(BIG_INFER) + message(BIG_INFER)))
    s["stream_budget"] = c.add(frame(PING, 0, 0, b"readnow!")).out
    # Drain begins before the second call: it gets UNAVAILABLE.
    c = Client()
    c.call(1, SERVICE + "ServerLive").add(frame(PING, DRAIN, 0, b"drainnow"))
    s["drain"] = c.call(3, SERVICE + "ModelInfer", INFER).call(5, HEALTH).out
    return s


def main():
    write_seeds(TARGET, seeds())
    return 0


if __name__ == "__main__":
    sys.exit(main())
