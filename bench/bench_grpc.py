#!/usr/bin/env python3
"""bench_grpc.py - the Open Inference Protocol over gRPC against the same
daemon over HTTP with binary tensor data, same run, same layout: the daemon
(--workers 1) on core 0, the client on core 1, loopback only.

  1. small: float32 [2,2] x [2,2] by perf_analyzer 2.60.0 (unmodified,
     scripts/perf_analyzer.sh), -i grpc against -i http (binary in and out)
     at concurrency 16 and 64: infer/s and p99, the two protocols alternating
     for ROUNDS rounds; medians, and the gRPC/HTTP ratio of the medians.
     Then a 64 MiB output (float32 [256,256] x [16,16]) by perf_analyzer at
     concurrency 1, MiB/s from its infer/s: Triton's own clients (libcurl,
     gRPC's C++ core) and what they do with 64 MiB are most of that time.
  2. the 64 MiB output fetched by a lighter client,
     curl (libcurl with nghttp2): a gRPC ModelInfer over h2c against the HTTP
     binary stream of /v2/models/tile/infer, alternating, ROUNDS*2 of each;
     median GB/s and their ratio.
  3. both again with h2load (nghttp2's C load generator, the "ghz-style" load:
     a client that is not itself the limit): the same small request as a gRPC
     message over 4 connections x c/4 streams against HTTP/1.1 binary over c
     connections for 3 s each, p99 from its per-request log; and the 64 MiB
     output, 10 requests each, h2load taking DATA frames of up to 16 MiB. The
     daemon's own statistics must count every request as a success.

The targets (issue 17): gRPC >= 1.0x HTTP's infer/s and p99 <= 2 ms on the
small request, >= 0.8x on 64 MiB. The machine's load average is printed
before and after: both cores are shared, and the ratios are what one run says.

Reproduce: make bench   (or: python3 bench/bench_grpc.py build/tiled [window-ms] [rounds])
"""
import csv
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def start_daemon(tiled, work):
    out = open(os.path.join(work, "tiled.out"), "w+")
    proc = subprocess.Popen(["taskset", "-c", "0", tiled, "serve", "--port", "0", "--grpc-port", "0",
                             "--workers", "1", "--log-level", "warn"], stdout=out, stderr=subprocess.DEVNULL)
    for _ in range(200):
        out.seek(0)
        text = out.read()
        http = re.search(r"listening on http://([0-9.:]+)", text)
        grpc = re.search(r"listening on grpc://([0-9.:]+)", text)
        if http and grpc:
            return proc, http.group(1), grpc.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"the daemon ({tiled}) did not print its HTTP and gRPC addresses")


def perf_analyzer(protocol, url, data, concurrency, window_ms, work, shape="2,2"):
    """(infer/s, p99 us) of one perf_analyzer run on core 1; exits on any error."""
    csv_path = os.path.join(work, f"pa-{protocol}-{concurrency}.csv")
    cmd = ["taskset", "-c", "1", "sh", "scripts/perf_analyzer.sh", "-m", "tile", "-x", "13", "-i", protocol,
           "-u", url, "--input-data", data, "--shape", f"input:{shape}", "--concurrency-range", str(concurrency),
           "--measurement-interval", str(window_ms), "-s", "1000", "-r", "3", "-f", csv_path]
    if protocol == "http":
        cmd += ["--input-tensor-format", "binary", "--output-tensor-format", "binary"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or "error" in (r.stdout + r.stderr).lower():
        sys.exit(f"perf_analyzer -i {protocol} -c {concurrency} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    with open(csv_path) as f:
        row = next(csv.DictReader(f))
    return float(row["Inferences/Second"]), int(row["p99 latency"])


# A ModelInferRequest, written field by field (the protobuf wire format:
# tag = number << 3 | wire type; 2 = length-delimited).
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def ld(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def tensor(name, datatype, shape):
    return ld(1, name.encode()) + ld(2, datatype.encode()) + ld(3, b"".join(varint(d) for d in shape))


def write_requests(work, name, shape, repeats):
    """A float32 `shape` input tiled by `repeats` as an HTTP binary body
    (work/NAME.http) and a length-prefixed gRPC message (work/NAME.grpc);
    returns the HTTP body's JSON header length."""
    n = 1
    for d in shape:
        n *= d
    data = struct.pack(f"<{n}f", *[float(i % 251) for i in range(n)])
    reps = struct.pack(f"<{len(repeats)}q", *repeats)
    header = json.dumps({"inputs": [
        {"name": "input", "shape": shape, "datatype": "FP32", "parameters": {"binary_data_size": len(data)}},
        {"name": "repeats", "shape": [len(repeats)], "datatype": "INT64",
         "parameters": {"binary_data_size": len(reps)}}],
        "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    with open(os.path.join(work, name + ".http"), "wb") as f:
        f.write(header + data + reps)
    msg = (ld(1, b"tile") + ld(5, tensor("input", "FP32", shape)) + ld(5, tensor("repeats", "INT64", [len(repeats)]))
           + ld(7, data) + ld(7, reps))
    with open(os.path.join(work, name + ".grpc"), "wb") as f:
        f.write(b"\0" + struct.pack(">I", len(msg)) + msg)
    return len(header)


def curl(args, work):
    """GB/s of one curl transfer on core 1 and the response size."""
    r = subprocess.run(["taskset", "-c", "1", "curl", "-s", "-o", "/dev/null", "-D", os.path.join(work, "head"),
                        "-w", "%{size_download} %{time_total}", *args], capture_output=True, text=True, timeout=300)
    size, seconds = r.stdout.split()
    with open(os.path.join(work, "head")) as f:
        head = f.read()
    return int(size) / float(seconds) / 1e9, int(size), head


def successes(http_url):
    """(success, fail) counts of the model's statistics (the daemon's own count)."""
    with urllib.request.urlopen(f"http://{http_url}/v2/models/tile/versions/13/stats", timeout=30) as r:
        stats = json.load(r)["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def h2load(protocol, http_url, grpc_url, name, header_len, work, args):
    """One h2load run on core 1: (requests done, seconds, per-request microseconds).
    Exits unless every request got a 2xx and the daemon counted each as a success."""
    log = os.path.join(work, f"h2load-{protocol}.log")
    if protocol == "grpc":
        target = ["-d", os.path.join(work, name + ".grpc"), "-H", "content-type: application/grpc",
                  "-H", "te: trailers", f"http://{grpc_url}/inference.GRPCInferenceService/ModelInfer"]
    else:
        target = ["--h1", "-d", os.path.join(work, name + ".http"), "-H",
                  f"Inference-Header-Content-Length: {header_len}", f"http://{http_url}/v2/models/tile/infer"]
    before = successes(http_url)
    r = subprocess.run(["taskset", "-c", "1", "h2load", *args, "--log-file", log, *target],
                       capture_output=True, text=True, timeout=600)
    after = successes(http_url)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored",
                     r.stdout)
    took = re.search(r"finished in ([0-9.]+)(ms|s),", r.stdout)
    if r.returncode != 0 or not done or not took or int(done.group(1)) != int(done.group(2)):
        sys.exit(f"h2load {protocol} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    n = int(done.group(1))
    if after[1] != before[1] or after[0] - before[0] < n:
        sys.exit(f"h2load {protocol}: {n} requests answered, the daemon counted {after[0] - before[0]} successes "
                 f"and {after[1] - before[1]} failures")
    seconds = float(took.group(1)) / (1000 if took.group(2) == "ms" else 1)
    with open(log) as f:
        times = sorted(int(line.split()[2]) for line in f if line.strip())
    return n, seconds, times


def h2load_figures(http_url, grpc_url, small_header, big_header, rounds, work):
    print("the same with h2load (nghttp2 1.52's C load generator on core 1), medians of "
          f"{rounds} alternating 3 s runs; gRPC: 4 connections x c/4 streams, HTTP/1.1: c connections")
    print("| concurrency | HTTP binary req/s | gRPC req/s | ratio gRPC/HTTP | HTTP p99 ms | gRPC p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for c in (16, 64):
        got = {"http": [], "grpc": []}
        for _ in range(rounds):
            for protocol, args in (("http", ["-c", str(c), "-D", "3"]),
                                   ("grpc", ["-c", "4", "-m", str(c // 4), "-D", "3"])):
                n, seconds, times = h2load(protocol, http_url, grpc_url, "small", small_header, work, args)
                got[protocol].append((n / seconds, times[min(len(times) - 1, int(len(times) * 0.99))] / 1e3))
        rate = {p: statistics.median(r for r, _ in v) for p, v in got.items()}
        p99 = {p: statistics.median(q for _, q in v) for p, v in got.items()}
        print(f"| {c} | {rate['http']:,.0f} | {rate['grpc']:,.0f} | {rate['grpc'] / rate['http']:.2f} | "
              f"{p99['http']:.2f} | {p99['grpc']:.2f} |")
        print("  (runs: " + ", ".join(f"{p} {r:,.0f}/s {q:.2f} ms" for p in ("http", "grpc") for r, q in got[p]) + ")")
    print()
    speeds = {"http": [], "grpc": []}
    for _ in range(rounds):
        for protocol, args in (("http", ["-n", "10", "-c", "1"]),
                               ("grpc", ["-n", "10", "-c", "1", "-m", "1", "-f", "16777215", "-w", "30", "-W", "30"])):
            n, seconds, _ = h2load(protocol, http_url, grpc_url, "big", big_header, work, args)
            speeds[protocol].append(n * (64 << 20) / seconds / 1e9)
    med = {p: statistics.median(v) for p, v in speeds.items()}
    print(f"64 MiB output, h2load, 10 requests per run, medians of {rounds} alternating runs")
    print("| | HTTP binary stream GB/s | gRPC GB/s | ratio gRPC/HTTP |")
    print("|---|---:|---:|---:|")
    print(f"| 64 MiB | {med['http']:.2f} | {med['grpc']:.2f} | {med['grpc'] / med['http']:.2f} |")
    print("  (runs: " + ", ".join(f"{p} {s:.2f}" for p in ("http", "grpc") for s in speeds[p]) + ")")


def main():
    tiled = sys.argv[1] if len(sys.argv) > 1 else "build/tiled"
    window_ms = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    work = tempfile.mkdtemp(prefix="tiled-bench-grpc.")
    subprocess.run(["sh", "scripts/perf_analyzer.sh", "--version"], cwd=ROOT, capture_output=True)  # fetch once
    proc, http_url, grpc_url = start_daemon(os.path.abspath(tiled), work)
    load_before = os.getloadavg()
    try:
        data = os.path.join(work, "small.json")
        with open(data, "w") as f:
            json.dump({"data": [{"input": {"content": [1.0, 2.0, 3.0, 4.0], "shape": [2, 2]},
                                 "repeats": {"content": [2, 2], "shape": [2]}}]}, f)
        print(f"tiled over gRPC vs HTTP binary, same daemon ({os.cpu_count()} cores; daemon --workers 1 on core 0, "
              f"client on core 1); load average before: {load_before[0]:.2f}")
        print(f"reproduce: make bench   (python3 bench/bench_grpc.py {tiled} {window_ms} {rounds})")
        print()
        print("small float32 [2,2] x [2,2], perf_analyzer, medians of "
              f"{rounds} alternating runs ({window_ms} ms windows)")
        print("| concurrency | HTTP binary infer/s | gRPC infer/s | ratio gRPC/HTTP | HTTP p99 ms | gRPC p99 ms |")
        print("|---:|---:|---:|---:|---:|---:|")
        for c in (16, 64):
            got = {"http": [], "grpc": []}
            for _ in range(rounds):
                got["http"].append(perf_analyzer("http", http_url, data, c, window_ms, work))
                got["grpc"].append(perf_analyzer("grpc", grpc_url, data, c, window_ms, work))
            rate = {p: statistics.median(r for r, _ in v) for p, v in got.items()}
            p99 = {p: statistics.median(q for _, q in v) / 1e3 for p, v in got.items()}
            print(f"| {c} | {rate['http']:,.0f} | {rate['grpc']:,.0f} | {rate['grpc'] / rate['http']:.2f} | "
                  f"{p99['http']:.2f} | {p99['grpc']:.2f} |")
            runs = ", ".join(f"{p} {r:,.0f}/s {q / 1e3:.2f} ms" for p in ("http", "grpc") for r, q in got[p])
            print(f"  (runs: {runs})")
        print()

        big = os.path.join(work, "big.json")
        with open(big, "w") as f:
            json.dump({"data": [{"input": {"content": [float(i % 251) for i in range(1 << 16)], "shape": [256, 256]},
                                 "repeats": {"content": [16, 16], "shape": [2]}}]}, f)
        got = {"http": [], "grpc": []}
        for _ in range(rounds):
            got["http"].append(perf_analyzer("http", http_url, big, 1, 2 * window_ms, work, "256,256")[0])
            got["grpc"].append(perf_analyzer("grpc", grpc_url, big, 1, 2 * window_ms, work, "256,256")[0])
        med = {p: statistics.median(v) * 64 for p, v in got.items()}
        print(f"64 MiB output (float32 [256,256] x [16,16]), perf_analyzer at concurrency 1, medians of {rounds} "
              f"alternating runs ({2 * window_ms} ms windows)")
        print("| | HTTP binary MiB/s | gRPC MiB/s | ratio gRPC/HTTP |")
        print("|---|---:|---:|---:|")
        print(f"| 64 MiB | {med['http']:.0f} | {med['grpc']:.0f} | {med['grpc'] / med['http']:.2f} |")
        print("  (runs, infer/s: " + ", ".join(f"{p} {r:.2f}" for p in ("http", "grpc") for r in got[p]) + ")")
        print()

        header_len = write_requests(work, "big", [256, 256], [16, 16])
        out_bytes = 64 << 20
        speeds = {"http": [], "grpc": []}
        for _ in range(2 * rounds):
            gbs, size, head = curl(["-H", f"Inference-Header-Content-Length: {header_len}", "--data-binary",
                                    "@" + os.path.join(work, "big.http"),
                                    f"http://{http_url}/v2/models/tile/infer"], work)
            if size < out_bytes or " 200" not in head.split("\n", 1)[0]:
                sys.exit(f"HTTP 64 MiB request failed: {size} bytes, {head[:300]}")
            speeds["http"].append(gbs)
            gbs, size, head = curl(["--http2-prior-knowledge", "-H", "content-type: application/grpc", "-H",
                                    "te: trailers", "--data-binary", "@" + os.path.join(work, "big.grpc"),
                                    f"http://{grpc_url}/inference.GRPCInferenceService/ModelInfer"], work)
            if size < out_bytes or not re.search(r"^grpc-status: 0\r?$", head, re.M):
                sys.exit(f"gRPC 64 MiB request failed: {size} bytes, {head[:300]}")
            speeds["grpc"].append(gbs)
        med = {p: statistics.median(v) for p, v in speeds.items()}
        print(f"64 MiB output (float32 [256,256] x [16,16]), curl, medians of {2 * rounds} alternating requests")
        print("| | HTTP binary stream GB/s | gRPC GB/s | ratio gRPC/HTTP |")
        print("|---|---:|---:|---:|")
        print(f"| 64 MiB | {med['http']:.2f} | {med['grpc']:.2f} | {med['grpc'] / med['http']:.2f} |")
        print("  (runs: " + ", ".join(f"{p} {s:.2f}" for p in ("http", "grpc") for s in speeds[p]) + ")")
        print()
        small_header = write_requests(work, "small", [2, 2], [2, 2])
        h2load_figures(http_url, grpc_url, small_header, header_len, rounds, work)
        load_after = os.getloadavg()
        print(f"load average after: {load_after[0]:.2f} (1 min), {load_after[1]:.2f} (5 min)")
    finally:
        proc.terminate()
        proc.wait(60)


if __name__ == "__main__":
    main()
