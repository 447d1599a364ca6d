"""bench_shm.py TILED_BIN KERNEL_BIN [REPS] [--report] - outputs through Triton's system
shared-memory extension against the same outputs over the loopback socket,
and against the kernel's own rate, all in one run.

  1. 1 GiB output (float32 [1024,1024] x [16,16]) into a region registered
     once and reused, as clients do: request sent -> response received, the
     output in the client's memory. Median of REPS requests.
  2. The same into a fresh tmpfs object per request (registered each time,
     its pages touched first by the daemon's kernel).
  3. The same output fetched as v2 binary tensor data by curl over loopback.
  4. The kernel's own rate into a reused buffer (KERNEL_BIN, in step with 1:
     one kernel run after each request, so both see the same neighbours).
  5. A small tensor (int32 [16] x [2]): round trip through shared memory vs
     the binary extension, same client, keep-alive, median of 400.

The daemon runs with its defaults (one worker per CPU), as the kernel run.
With --report the tables also go to bench/shm.md (which bench/REPORT.md
includes) with a plot, bench/shm-gbps.png.
Reproduce: make bench   (or: python3 bench/bench_shm.py build/tiled build/bench/bench_shm_kernel)
"""
import http.client
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys
import time

GIB = 1 << 30
BENCH = os.path.dirname(os.path.abspath(__file__))
IN_SHAPE, REPEATS = [1024, 1024], [16, 16]


class Region:
    def __init__(self, size):
        self.key = f"/tiled-bench-{os.getpid()}-{time.monotonic_ns()}"
        self.path = "/dev/shm" + self.key
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        self.size = size

    def close(self):
        self.map.close()
        os.close(self.fd)
        os.unlink(self.path)


class Client:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port)

    def post(self, path, body, headers=None):
        self.conn.request("POST", path, body=body, headers=headers or {})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: {r.status} {data[:300]!r}")
        return r, data

    def register(self, name, region):
        self.post(f"/v2/systemsharedmemory/region/{name}/register",
                  json.dumps({"key": region.key, "offset": 0, "byte_size": region.size}))

    def unregister(self, name):
        self.post(f"/v2/systemsharedmemory/region/{name}/unregister", b"")


def shm_body(in_name, out_name, shape, repeats, dtype, elem, out_bytes):
    n = 1
    for d in shape:
        n *= d
    return json.dumps({
        "inputs": [{"name": "input", "shape": shape, "datatype": dtype,
                    "parameters": {"shared_memory_region": in_name, "shared_memory_byte_size": n * elem}},
                   {"name": "repeats", "shape": [len(repeats)], "datatype": "INT64",
                    "parameters": {"shared_memory_region": in_name, "shared_memory_byte_size": 8 * len(repeats),
                                   "shared_memory_offset": n * elem}}],
        "outputs": [{"name": "output", "parameters": {"shared_memory_region": out_name,
                                                      "shared_memory_byte_size": out_bytes}}]})


def binary_body(data, repeats, shape, dtype):
    rep = struct.pack(f"<{len(repeats)}q", *repeats)
    head = json.dumps({
        "inputs": [{"name": "input", "shape": shape, "datatype": dtype, "parameters": {"binary_data_size": len(data)}},
                   {"name": "repeats", "shape": [len(repeats)], "datatype": "INT64",
                    "parameters": {"binary_data_size": len(rep)}}],
        "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    return head, head + data + rep


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def timed(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def plot(rows):
    """A bar per way of getting the 1 GiB output, GB/s (gnuplot, when present)."""
    if not shutil.which("gnuplot"):
        return False
    dat = f"/tmp/tiled-bench-shm-{os.getpid()}.dat"
    with open(dat, "w") as f:
        for label, gbps in rows:
            f.write(f'"{label}" {gbps:.2f}\n')
    script = "\n".join([
        'set terminal pngcairo size 900,420 font "sans,10"', f'set output "{BENCH}/shm-gbps.png"',
        'set title "1 GiB output (float32 [1024,1024] x [16,16]): request sent to response received"',
        'set ylabel "GB/s"', "set style fill solid 0.8", "set boxwidth 0.6", "set yrange [0:*]", "set offsets 0,0,graph 0.12,0", "unset key",
        "set xtics noenhanced", f'plot "{dat}" using 0:2:xtic(1) with boxes, "" using 0:2:(sprintf("%.1f", $2)) '
        "with labels offset 0,0.8"])
    ok = subprocess.run(["gnuplot"], input=script, text=True).returncode == 0
    os.unlink(dat)
    return ok


def main():
    args = [a for a in sys.argv[1:] if a != "--report"]
    report = "--report" in sys.argv
    tiled, kernel = args[0], args[1]
    reps = int(args[2]) if len(args) > 2 else 7
    proc = subprocess.Popen([tiled, "serve", "--port", "0", "--shared-memory", "system", "--log-level", "warn"],
                            stdout=subprocess.PIPE)
    port = int(re.search(rb":(\d+)\n", proc.stdout.readline()).group(1))
    regions = []
    try:
        c = Client(port)
        n_in = IN_SHAPE[0] * IN_SHAPE[1]
        data = struct.pack(f"<{n_in}f", *[float(i % 4093) for i in range(n_in)])
        rep = struct.pack("<2q", *REPEATS)
        inp = Region(len(data) + len(rep))
        regions.append(inp)
        inp.map[:] = data + rep
        c.register("in", inp)
        out = Region(GIB)
        regions.append(out)
        c.register("out", out)
        body = shm_body("in", "out", IN_SHAPE, REPEATS, "FP32", 4, GIB)

        def shm_request():
            _, resp = c.post("/v2/models/tile/infer", body)
            assert json.loads(resp)["outputs"][0]["shape"] == [16384, 16384]
        shm_request()  # the first request touches the region's pages
        want = struct.pack("<4f", *[float(i % 4093) for i in (0, 1, 2, 3)])
        assert out.map[:16] == want and out.map[GIB - 4:] == data[-4:], "wrong output in the region"
        kproc = subprocess.Popen([kernel], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert kproc.stdout.readline().strip() == "ready"
        shm_times, kernel_times = [], []
        for _ in range(reps):
            shm_times.append(timed(shm_request, 1))
            kproc.stdin.write("go\n")
            kproc.stdin.flush()
            kernel_times.append(float(kproc.stdout.readline()))
        kproc.stdin.close()
        kproc.wait()
        t_shm = median(shm_times)
        kernel_gbps = GIB / median(kernel_times) / 1e9

        def fresh_request():
            r = Region(GIB)
            try:
                c.register("fresh", r)
                t0 = time.perf_counter()
                c.post("/v2/models/tile/infer", shm_body("in", "fresh", IN_SHAPE, REPEATS, "FP32", 4, GIB))
                dt = time.perf_counter() - t0
                c.unregister("fresh")
                return dt
            finally:
                r.close()
        t_fresh = median([fresh_request() for _ in range(3)])

        head, bin_body = binary_body(data, REPEATS, IN_SHAPE, "FP32")
        body_file = f"/tmp/tiled-bench-shm-{os.getpid()}.bin"
        with open(body_file, "wb") as f:
            f.write(bin_body)
        curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", "-H",
                "Content-Type: application/octet-stream", "-H", f"Inference-Header-Content-Length: {len(head)}",
                "--data-binary", "@" + body_file, f"http://127.0.0.1:{port}/v2/models/tile/infer"]
        socket_times = []
        for _ in range(max(3, reps // 2)):
            t, size = subprocess.run(curl, capture_output=True, text=True, check=True).stdout.split()
            assert int(size) > GIB, size
            socket_times.append(float(t))
        os.unlink(body_file)
        t_sock = median(socket_times)


        small = Region(4096)
        regions.append(small)
        small_out = Region(4096)
        regions.append(small_out)
        sdata = struct.pack("<16i", *range(16))
        small.map[:72] = sdata + struct.pack("<q", 2)
        c.register("sin", small)
        c.register("sout", small_out)
        sbody = shm_body("sin", "sout", [16], [2], "INT32", 4, 128)
        shead, sbin = binary_body(sdata, [2], [16], "INT32")
        sheaders = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(shead))}
        for _ in range(50):  # warm both paths
            c.post("/v2/models/tile/infer", sbody)
            c.post("/v2/models/tile/infer", sbin, sheaders)
        small_shm, small_bin = [], []
        for _ in range(400):  # alternating, so a noisy neighbour slows both alike
            small_shm.append(timed(lambda: c.post("/v2/models/tile/infer", sbody), 1))
            small_bin.append(timed(lambda: c.post("/v2/models/tile/infer", sbin, sheaders), 1))
        assert small_out.map[:8] == struct.pack("<2i", 0, 1)
        t_small_shm, t_small_bin = median(small_shm), median(small_bin)
    finally:
        proc.terminate()
        proc.wait()
        for r in regions:
            r.close()

    shm_gbps, fresh_gbps, sock_gbps = GIB / t_shm / 1e9, GIB / t_fresh / 1e9, GIB / t_sock / 1e9
    rows = [("shm, region reused", shm_gbps), ("shm, fresh tmpfs", fresh_gbps),
            ("binary, loopback", sock_gbps), ("kernel alone", kernel_gbps)]
    text = [
        f"tiled system shared memory benchmark ({os.cpu_count()} cores, daemon defaults; medians, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"reproduce: python3 bench/bench_shm.py {tiled} {kernel} {reps}",
        "",
        "| 1 GiB output, float32 [1024,1024] x [16,16] | seconds | GB/s |",
        "|---|---:|---:|",
        f"| shared memory, region registered once and reused | {t_shm:.3f} | {shm_gbps:.2f} |",
        f"| shared memory, fresh tmpfs object (first touch) | {t_fresh:.3f} | {fresh_gbps:.2f} |",
        f"| binary tensor data over loopback (curl) | {t_sock:.3f} | {sock_gbps:.2f} |",
        f"| the kernel alone into a reused buffer | {GIB / kernel_gbps / 1e9:.3f} | {kernel_gbps:.2f} |",
        "",
        f"ratios: shared memory / socket {shm_gbps / sock_gbps:.2f}, shared memory / kernel "
        f"{shm_gbps / kernel_gbps:.2f}, fresh / socket {fresh_gbps / sock_gbps:.2f}",
        "",
        "| small tensor int32 [16] x [2], round trip | median us |",
        "|---|---:|",
        f"| shared memory in and out | {t_small_shm * 1e6:.0f} |",
        f"| binary tensor data | {t_small_bin * 1e6:.0f} |",
        "",
        f"ratio binary / shared memory: {t_small_bin / t_small_shm:.2f}",
    ]
    print("\n".join(text))
    if report:
        with open(os.path.join(BENCH, "shm.md"), "w") as f:
            f.write("\n".join(text) + "\n")
        if plot(rows):
            print("plot: bench/shm-gbps.png")

if __name__ == "__main__":
    main()
