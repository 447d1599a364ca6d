"""Triton's perf_analyzer (PyPI perf-analyzer 2.60.0, unmodified) against the daemon.

bench/perf_analyzer.sh runs it with binary tensor data in and out at
concurrency 1 to 8, over HTTP or gRPC, for a rank-1 input (the advertised
rank: only --input-data) and a rank-2 one (--shape), and fails on any error
perf_analyzer reports or when the daemon's statistics miss requests it sent.
Here with short windows; `make bench-perf-analyzer` gives the figures. Over
gRPC also with --shared-memory system (test_shared_memory.py runs that one
over HTTP). Needs PyPI and a Debian mirror the first time (scripts/perf_analyzer.sh).
"""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_http import Daemon  # noqa: E402
from test_shared_memory import perf_analyzer_shared_memory  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class PerfAnalyzer(unittest.TestCase):
    def concurrency_1_to_8_without_errors(self, protocol):
        tiled = os.path.abspath(os.environ.get("TILED_BIN", os.path.join(ROOT, "build", "tiled")))
        env = dict(os.environ, TILED_BIN=tiled)
        r = subprocess.run(["sh", "bench/perf_analyzer.sh", "200", protocol], cwd=ROOT, env=env,
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


if __name__ == "__main__":
    unittest.main()
