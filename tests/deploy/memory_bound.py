"""The most memory a tiled daemon may hold, from its effective configuration
(`tiled serve --print-config`, sizes in bytes): the sum docs/operations.md,
Memory, explains term by term. test_k8s.sh and test_kserve.py check a pod's
memory limit against it; `python3 tests/deploy/memory_bound.py` reads a
--print-config output on stdin and prints the terms."""
import os
import sys

KIB, MIB = 1 << 10, 1 << 20
# Bytes of decoded input per byte of body at most: a JSON string element ""
# with its comma (3 bytes) becomes a 16-byte reference; string references
# from binary, .npy and gRPC bodies are bounded at 5 bytes per byte of
# --max-body (api/request.c, decoded_bound), their bytes at one.
EXPANSION = 6
# Per connection (docs/operations.md, Memory), what no budget counts: an
# HTTP/1.1 connection's state (10.8 KiB, its input buffer most of it), the
# copy of a head of up to 8 KiB while its request is served, the reply's
# head (its output buffer, 4 KiB kept) and the request struct (under 1 KiB):
# 14.8 KiB measured per kept-alive connection after a 7 KB head, 24 KiB at
# most; over TLS a GnuTLS session besides (2.2 KiB idle) and the record it
# holds while the socket is full (up to 16.4 KiB). An idle nghttp2 session
# with its HPACK tables (20 KiB), rounded up. A request's work record and a
# gRPC call's state are counted by --max-memory.
HTTP_CONNECTION = 24 * KIB
TLS_SESSION = 24 * KIB
GRPC_CONNECTION = 64 * KIB
# Code, libraries, thread stacks touched, allocator arenas (6 MiB idle).
PROCESS = 32 * MIB


def terms(cfg):
    """(name, bytes) of each term; None as bytes when nothing bounds it."""
    n = {k: int(v) for k, v in cfg.items() if v.lstrip("-").isdigit()}
    body, threshold, chunk = n["max-body"], n["stream-threshold"], n["stream-chunk"]
    budget, workers = n["max-memory"], n["workers"] or os.cpu_count()  # 0: one per CPU
    alone = (2 + EXPANSION) * body + max(threshold, 2 * chunk)
    grpc = n["grpc-port"] >= 0
    out = [
        ("requests: max(--max-memory, one request alone)", max(budget, alone) if budget else None),
        ("workers' uncounted copies: workers x max(decoded body, reply)", workers * max(EXPANSION * body, threshold)),
        ("--body-cache", n["body-cache"]),
        ("connections: --max-connections x per connection",
         n["max-connections"] * (HTTP_CONNECTION + (TLS_SESSION if cfg.get("tls-cert") else 0)
                                 + (GRPC_CONNECTION if grpc else 0))),
        ("shared memory: --shm-max-bytes", n["shm-max-bytes"] if cfg.get("shared-memory") == "system" else 0),
        ("the process", PROCESS),
    ]
    return out


def worst_case(cfg):
    """The sum of the terms, or None when one is unbounded (--max-memory 0)."""
    t = terms(cfg)
    return None if any(v is None for _, v in t) else sum(v for _, v in t)


if __name__ == "__main__":
    cfg = dict(line.split(" = ", 1) for line in sys.stdin.read().splitlines() if " = " in line)
    for name, v in terms(cfg):
        print("%-70s %s" % (name, "unbounded" if v is None else "%.0f MiB" % (v / MIB)))
    w = worst_case(cfg)
    print("%-70s %s" % ("at most", "unbounded (set --max-memory)" if w is None else "%.0f MiB" % (w / MIB)))
