#!/usr/bin/env python3
"""Instructions per small HTTP request, as README's figures are measured.

The daemon runs under callgrind with one worker; a kept-alive connection
sends the small JSON POST /v1/tile 200 times (warm-up), callgrind's counters
are dumped and zeroed, 2,000 more are sent and dumped again:
(Ir at 2,200 requests - Ir at 200) / 2000 is the second dump's total / 2000.

  python3 bench/callgrind_request.py build/tiled
"""
import glob
import http.client
import os
import re
import subprocess
import sys
import tempfile

BODY = b'{"input":{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]},"repeats":[1,2]}'


def send(conn, n):
    for _ in range(n):
        conn.request("POST", "/v1/tile", BODY, {"Content-Type": "application/json"})
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


def main():
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="tiled-cg-")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.path.join(tmp, "cg.out.%p"),
                          binary, "serve", "--port", "0", "--workers", "1", "--log-level", "info"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = int(re.search(rb":(\d+)", p.stdout.readline()).group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        send(conn, 200)
        f1, _ = dump(p.pid, tmp, set())
        send(conn, 2000)
        _, total = dump(p.pid, tmp, {f1})
        print("%s: %d instructions per request" % (binary, total // 2000))
    finally:
        p.terminate()
        p.wait(300)


if __name__ == "__main__":
    main()
