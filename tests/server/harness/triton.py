"""Triton's clients against the daemon: tritonclient's errors and perf_analyzer
(scripts/perf_analyzer.sh) with system shared memory."""
import json
import os
import re
import subprocess

from tritonclient.utils import InferenceServerException


def error_of(call):
    try:
        call()
    except InferenceServerException as e:
        return e
    raise AssertionError("the call succeeded")


def perf_analyzer_shared_memory(test, protocol, port, *extra):
    """Runs perf_analyzer -i `protocol` --shared-memory system at concurrency 1
    and 2 against 127.0.0.1:`port`: no error, and the daemon's statistics
    count what it sent."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    data = f"/tmp/tiled-pa-shm-{os.getpid()}.json"
    with open(data, "w") as f:
        json.dump({"data": [{"input": {"content": [float(i) for i in range(1024)], "shape": [1024]},
                             "repeats": {"content": [4], "shape": [1]}}]}, f)
    try:
        r = subprocess.run(["sh", "scripts/perf_analyzer.sh", "-m", "tile", "-x", "13", "-u", f"127.0.0.1:{port}",
                            "-i", protocol, *extra, "--input-data", data, "--shared-memory", "system",
                            "--output-shared-memory-size", "16384", "--concurrency-range", "1:2",
                            "--measurement-interval", "300", "-s", "1000", "-r", "10"],
                           cwd=root, capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(data)
    out = r.stdout + r.stderr
    test.assertEqual(r.returncode, 0, out[-3000:])
    test.assertNotIn("error", out.lower())
    client = [int(n) for n in re.findall(r"Client:\s+Request count: (\d+)", out)]
    server = [int(n) for n in re.findall(r"Successful request count: (\d+)", out)]
    test.assertEqual(len(client), 2, out[-3000:])
    for c, s in zip(client, server):
        test.assertGreater(c, 0)
        test.assertLessEqual(abs(c - s), max(4, c // 50))
