#!/usr/bin/env python3
"""Instructions per small HTTP request, as the figures of docs/performance.md and
docs/operations.md are measured.

The daemon runs under callgrind with one worker; a kept-alive connection
sends the small JSON POST /v1/tile 200 times (warm-up), callgrind's counters
are dumped and zeroed, 2,000 more are sent and dumped again:
(Ir at 2,200 requests - Ir at 200) / 2000 is the second dump's total / 2000.

  python3 bench/callgrind_request.py build/tiled [--profile]

--kind raw|npy|v2 sends that kind's small request instead of the JSON /v1
one (the kinds of bench-peers' service table); --peers sends each kind as
`make bench-peers` does (its bodies, and wrk's head: no Accept-Encoding).

--profile also prints the second dump's functions by their own (self) cost
per request, and the share of each library (callgrind_annotate).

--cache runs callgrind's cache and branch simulation too (its 32 KiB L1
caches; slower) and prints, per request, the instruction-cache and
data-cache misses and the mispredicted branches: how much code a request
runs through, not only how many instructions (docs/performance.md, "A
seventh round").

  python3 bench/callgrind_request.py build/tiled --grpc [--profile]

counts a gRPC ModelInfer instead (the daemon given --grpc-port 0), as the
README's gRPC figure is measured: the same tile (float32 [2,2] by [1,2],
binary tensor contents) sent by h2load on one connection, 8 streams in
flight (-m 8), 200 calls then 2,000.
"""
import glob
import http.client
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

BODY = b'{"input":{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]},"repeats":[1,2]}'
# The small request of each kind (--kind; json by default): target, content type, body.
NPY_HEAD = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
NPY_HEAD += b" " * (-(10 + len(NPY_HEAD) + 1) % 64) + b"\n"  # the magic, version and length, then 64-byte aligned
NPY = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(NPY_HEAD)) + NPY_HEAD + struct.pack("<4f", 1, 2, 3, 4)
KINDS = {
    "json": ("/v1/tile", "application/json", BODY),
    "raw": ("/v1/tile?dtype=float32&shape=2,2&repeats=1,2", "application/octet-stream", struct.pack("<4f", 1, 2, 3, 4)),
    "npy": ("/v1/tile?repeats=1,2", "application/x-npy", NPY),
    "v2": ("/v2/models/tile/infer", "application/json",
           b'{"inputs":[{"name":"input","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]},'
           b'{"name":"repeats","shape":[2],"datatype":"INT64","data":[1,2]}]}'),
}
# --peers: the bodies `make bench-peers` sends (bench/peers/run.py, small_requests: Python's json.dumps,
# a space after ':' and ',', repeats [2,2]) with the head wrk sends (Host, Content-Type, Content-Length).
PEERS = "--peers" in sys.argv
if PEERS:
    _x = {"dtype": "float32", "shape": [2, 2], "data": [1, 2, 3, 4]}
    KINDS["json"] = ("/v1/tile", "application/json", json.dumps({"input": _x, "repeats": [2, 2]}).encode())
    KINDS["raw"] = ("/v1/tile?dtype=float32&shape=2,2&repeats=2,2",) + KINDS["raw"][1:]
    KINDS["npy"] = ("/v1/tile?repeats=2,2",) + KINDS["npy"][1:]
    KINDS["v2"] = ("/v2/models/tile/infer", "application/json", json.dumps({"inputs": [
        {"name": "input", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "repeats", "shape": [2], "datatype": "INT64", "data": [2, 2]}]}).encode())
KIND = sys.argv[sys.argv.index("--kind") + 1] if "--kind" in sys.argv else "json"


def send(conn, n):
    target, ctype, body = KINDS[KIND]
    for _ in range(n):
        if PEERS:
            conn.putrequest("POST", target, skip_accept_encoding=True)
            conn.putheader("Content-Type", ctype)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
        else:
            conn.request("POST", target, body, {"Content-Type": ctype})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status


def dump(pid, tmp, before):
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    files = set(glob.glob(os.path.join(tmp, "cg.out.*.*"))) - before  # cg.out.PID.N: the Nth dump
    assert len(files) == 1, files
    (f,) = files
    with open(f) as fh:
        total = int(re.search(r"^(?:summary|totals): (\d+)", fh.read(), re.M).group(1))
    return f, total


def profile(f, total):
    """Self cost per request of the top functions, and per object file."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", f], capture_output=True,
                         text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(\S.*?):(\S+)(?: \[(.*)\])?$", line)
        if m and int(m.group(1).replace(",", "")) < total * 0.99:  # not the thread entry points' totals
            rows.append((int(m.group(1).replace(",", "")), m.group(3), os.path.basename(m.group(4) or m.group(2))))
    by_obj = {}
    for ir, fn, obj in rows:
        by_obj[obj] = by_obj.get(obj, 0) + ir
    print("\nby object (instructions per request, share):")
    for obj, ir in sorted(by_obj.items(), key=lambda kv: -kv[1])[:8]:
        print("  %-28s %7d  %4.1f%%" % (obj, ir // 2000, 100.0 * ir / total))
    print("\ntop functions (self):")
    for ir, fn, obj in sorted(rows, key=lambda r: -r[0])[:25]:
        print("  %-40s %-24s %6d  %4.1f%%" % (fn[:40], obj[:24], ir // 2000, 100.0 * ir / total))


def cache_misses(f):
    """The simulation's totals per request: I1 misses, D1 read and write misses, mispredicted branches."""
    with open(f) as fh:
        text = fh.read()
    names = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    counts = [int(v) for v in re.search(r"^(?:summary|totals): (.*)$", text, re.M).group(1).split()]
    ev = dict(zip(names, counts + [0] * (len(names) - len(counts))))
    return ("  per request: %.0f instruction-cache (I1) misses, %.0f + %.0f data-cache (D1) read + write misses, "
            "%.0f + %.0f mispredicted conditional + indirect branches"
            % tuple(ev.get(k, 0) / 2000 for k in ("I1mr", "D1mr", "D1mw", "Bcm", "Bim")))


def grpc_message(tmp):
    """The gRPC message (length-prefixed ModelInferRequest) in a file, for h2load -d."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_grpc import ld, tensor  # the protobuf wire format, written field by field
    data = struct.pack("<4f", 1, 2, 3, 4)
    reps = struct.pack("<2q", 1, 2)
    msg = (ld(1, b"tile") + ld(5, tensor("input", "FP32", [2, 2])) + ld(5, tensor("repeats", "INT64", [2]))
           + ld(7, data) + ld(7, reps))
    path = os.path.join(tmp, "small.grpc")
    with open(path, "wb") as f:
        f.write(b"\0" + struct.pack(">I", len(msg)) + msg)
    return path


def send_grpc(port, body, n):
    r = subprocess.run(["h2load", "-n", str(n), "-c", "1", "-m", "8", "-d", body, "-H", "content-type: application/grpc",
                        "-H", "te: trailers", "http://127.0.0.1:%d/inference.GRPCInferenceService/ModelInfer" % port],
                       capture_output=True, text=True, timeout=900)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", r.stdout)
    assert r.returncode == 0 and done and int(done.group(1)) == int(done.group(2)) == n, r.stdout[-2000:]


def main():
    binary = sys.argv[1]
    grpc = "--grpc" in sys.argv
    tmp = tempfile.mkdtemp(prefix="tiled-cg-")
    cache = ["--cache-sim=yes", "--branch-sim=yes"] if "--cache" in sys.argv else []
    p = subprocess.Popen(["valgrind", "--tool=callgrind"] + cache +
                         ["--callgrind-out-file=" + os.path.join(tmp, "cg.out.%p"),
                          binary, "serve", "--port", "0", "--workers", "1", "--log-level", "info"] +
                         (["--grpc-port", "0"] if grpc else []),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = int(re.search(rb":(\d+)", p.stdout.readline()).group(1))
        if grpc:
            port = int(re.search(rb":(\d+)", p.stdout.readline()).group(1))
            body = grpc_message(tmp)
            send_grpc(port, body, 200)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            send(conn, 200)
        f1, _ = dump(p.pid, tmp, set())
        if grpc:
            send_grpc(port, body, 2000)
        else:
            send(conn, 2000)
        f2, total = dump(p.pid, tmp, {f1})
        print("%s: %d instructions per %s" % (binary, total // 2000, "gRPC call" if grpc else KIND + " request"))
        if cache:
            print(cache_misses(f2))
        if os.environ.get("CG_KEEP"):
            print("dump:", f2)
        if "--profile" in sys.argv:
            profile(f2, total)
    finally:
        p.terminate()
        p.wait(300)


if __name__ == "__main__":
    main()
