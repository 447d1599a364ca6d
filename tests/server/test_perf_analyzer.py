"""Triton's perf_analyzer (PyPI perf-analyzer 2.60.0, unmodified) against the daemon.

bench/perf_analyzer.sh runs it with binary tensor data in and out at
concurrency 1 to 8, over HTTP or gRPC, for a rank-1 input (the advertised
rank: only --input-data) and a rank-2 one (--shape), and fails on any error
perf_analyzer reports or when the daemon's statistics miss requests it sent.
Here with short windows; `make bench-perf-analyzer` gives the figures. Over
gRPC also with --shared-memory system (test_shared_memory.py runs that one
over HTTP). Needs PyPI and a Debian mirror the first time (scripts/perf_analyzer.sh).
"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness.daemon import Daemon  # noqa: E402
from harness.triton import perf_analyzer_shared_memory  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class PerfAnalyzer(unittest.TestCase):
    def concurrency_1_to_8_without_errors(self, protocol, mode=None):
        tiled = os.path.abspath(os.environ.get("TILED_BIN", os.path.join(ROOT, "build", "tiled")))
        env = dict(os.environ, TILED_BIN=tiled)
        r = subprocess.run(["sh", "bench/perf_analyzer.sh", "200", mode or protocol], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn(f"-> tiled at {protocol}://", r.stdout)
        for name in ("rank1", "rank2"):
            table = r.stdout.split(name + ":", 1)[1]
            rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+\d+\s+\d+\s+\d+\s+(\d+)\s+(\d+)$", table, re.M)[:8]
            self.assertEqual([int(c) for c, *_ in rows], list(range(1, 9)), r.stdout)
            for _, rate, client, server in rows:
                self.assertGreater(int(rate), 0)
                self.assertGreater(int(client), 0)

    def test_binary_in_out_concurrency_1_to_8_without_errors(self):
        self.concurrency_1_to_8_without_errors("http")

    def test_grpc_concurrency_1_to_8_without_errors(self):
        self.concurrency_1_to_8_without_errors("grpc")

    def test_grpc_streaming_concurrency_1_to_8_without_errors(self):
        """--streaming: each perf_analyzer worker sends its requests over one ModelStreamInfer stream."""
        self.concurrency_1_to_8_without_errors("grpc", "grpc-streaming")

    def test_grpc_streaming_shared_memory_system_without_errors(self):
        d = Daemon("--grpc-port", "0", "--shared-memory", "system")
        try:
            perf_analyzer_shared_memory(self, "grpc", d.grpc_port, "--streaming")
            streamed = [line for line in d.log_lines() if "/ModelStreamInfer" in line]
            self.assertGreater(len(streamed), 0, "the requests went over streams")
        finally:
            self.assertEqual(d.stop(), 0)

    def test_grpc_shared_memory_system_without_errors(self):
        """-i grpc --shared-memory system: it unregisters everything (system
        and CUDA), registers a region per input and one for the output
        (sized by --output-shared-memory-size: the output's dims are -1)
        through the gRPC shared-memory RPCs, and points every request at them."""
        d = Daemon("--grpc-port", "0", "--shared-memory", "system")
        try:
            perf_analyzer_shared_memory(self, "grpc", d.grpc_port)
            registered = [line for line in d.log_lines() if "SystemSharedMemoryRegister" in line]
            self.assertGreaterEqual(len(registered), 3, "input, repeats and output regions")
        finally:
            self.assertEqual(d.stop(), 0)


class PerfAnalyzerConnMemory(unittest.TestCase):
    """perf_analyzer -i grpc sends the calls of all its concurrency workers
    over one connection: at concurrency 8 with inputs near --max-body (and
    replies as large: repeats [1]), a --max-grpc-conn-memory of sixteen
    times --max-body passes without an error, whatever pace perf_analyzer
    reads at on a loaded machine (a call holds its message until its stream
    ends and its reply until the socket takes it: 8 x (request + reply)),
    and one of three times refuses calls with the budget's message (so the
    calls did share a connection)."""
    MAX_BODY = 300 << 10

    def run_at_concurrency_8(self, budget):
        d = Daemon("--grpc-port", "0", "--max-body", str(self.MAX_BODY), "--max-grpc-conn-memory", str(budget))
        data = f"/tmp/tiled-pa-budget-{os.getpid()}.json"
        n = 65536  # 256 KiB of FP32 input: the request message is just under --max-body
        with open(data, "w") as f:
            json.dump({"data": [{"input": {"content": [float(i % 251) for i in range(n)], "shape": [n]},
                                 "repeats": {"content": [1], "shape": [1]}}]}, f)
        try:
            r = subprocess.run(["sh", "scripts/perf_analyzer.sh", "-m", "tile", "-x", "13", "-u",
                                f"127.0.0.1:{d.grpc_port}", "-i", "grpc", "--input-data", data,
                                "--concurrency-range", "8", "--measurement-interval", "500", "-s", "1000", "-r", "5"],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
        finally:
            os.unlink(data)
            self.assertEqual(d.stop(), 0)
        return r.returncode, r.stdout + r.stderr

    def test_concurrency_8_at_max_body_fits_sixteen_times_max_body(self):
        rc, out = self.run_at_concurrency_8(16 * self.MAX_BODY)
        self.assertEqual(rc, 0, out[-3000:])
        self.assertNotIn("error", out.lower())
        self.assertGreater(int(re.search(r"Client:\s+Request count: (\d+)", out).group(1)), 0)

    def test_a_smaller_budget_refuses_the_calls_above_it(self):
        rc, out = self.run_at_concurrency_8(3 * self.MAX_BODY)
        self.assertNotEqual(rc, 0, out[-3000:])
        self.assertRegex(out, r"request message of \d+ bytes exceeds the max-grpc-conn-memory limit of "
                              rf"{3 * self.MAX_BODY} bytes: other calls on this connection hold \d+ bytes")


if __name__ == "__main__":
    unittest.main()
