#!/usr/bin/env python3
"""slowloris.py - a normal client's latency while many connections trickle headers.

Starts its own daemon ($TILED_BIN, default build/tiled) on a free loopback
port and measures a normal client (one small request on a fresh connection
every 10 ms) in three phases: alone, beside N connections each sending one
header byte every --interval seconds (under the idle timeout, so the server
keeps them), and alone again after they are closed. A fourth phase starts a
second daemon whose --max-connections is below N, to show what the
connection limit means under such a load.

    make slowloris
    TILED_BIN=build/tiled python3 bench/slowloris.py --connections 1000 --seconds 30

Every loop is bounded by count and time; traffic stays on 127.0.0.1.
"""
import argparse
import http.client
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

SMALL_BODY = b'{"input":{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]},"repeats":[2,2]}'
HEADERS = {"Content-Type": "application/json"}


def start_daemon(binary, *args):
    proc = subprocess.Popen([binary, "serve", "--port", "0", "--log-level", "warn", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    m = re.fullmatch(r"listening on http://([0-9.]+):(\d+)\n", line)
    if not m:
        proc.kill()
        raise SystemExit(f"slowloris: the daemon did not start ({line!r})")
    return proc, m.group(1), int(m.group(2))


def stop_daemon(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def normal_client(host, port, seconds, pause=0.01, limit=100000):
    """(latencies in s, failures) of small requests on fresh connections."""
    lat, failures = [], []
    end = time.monotonic() + seconds
    for _ in range(limit):
        if time.monotonic() > end:
            break
        t0 = time.perf_counter()
        try:
            conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("POST", "/v1/tile", SMALL_BODY, HEADERS)
            resp = conn.getresponse()
            resp.read()
            conn.close()
            if resp.status != 200:
                failures.append(f"status {resp.status}")
            else:
                lat.append(time.perf_counter() - t0)
        except (OSError, http.client.HTTPException) as exc:
            failures.append(type(exc).__name__)
        time.sleep(pause)
    return lat, failures


class Trickle:
    """N connections, each sending one header byte every `interval` seconds."""

    def __init__(self, host, port, n, interval, max_seconds):
        self.socks, self.refused = [], 0
        for _ in range(n):
            try:
                s = socket.create_connection((host, port), timeout=5)
                s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\n")
                self.socks.append(s)
            except OSError:
                self.refused += 1
        self.interval, self.max_seconds = interval, max_seconds
        self.sent = self.closed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        header = b"X-Trickle: " + b"a" * 1000 + b"\r\n"
        end = time.monotonic() + self.max_seconds
        i = 0
        while not self.stop.is_set() and time.monotonic() < end:
            for s in self.socks:
                if s.fileno() < 0:
                    continue
                try:
                    s.send(header[i % len(header):i % len(header) + 1])
                    self.sent += 1
                except OSError:
                    self.closed += 1
                    s.close()
            i += 1
            self.stop.wait(self.interval)

    def open_count(self):
        return sum(1 for s in self.socks if s.fileno() >= 0)

    def close(self):
        self.stop.set()
        self.thread.join(10)
        for s in self.socks:
            s.close()


def report(name, lat, failures):
    line = (f"{name:<44} {len(lat):>6} ok {len(failures):>5} failed   p50 {pct(lat, 50) * 1e3:7.2f} ms"
            f"   p99 {pct(lat, 99) * 1e3:7.2f} ms   max {max(lat) * 1e3 if lat else float('nan'):7.2f} ms")
    if failures:
        kinds = {}
        for f in failures:
            kinds[f] = kinds.get(f, 0) + 1
        line += f"   ({', '.join(f'{k} x{v}' for k, v in kinds.items())})"
    print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=1000, help="trickling connections (default 1000)")
    ap.add_argument("--seconds", type=float, default=20, help="length of the slowloris phase (default 20)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between bytes per connection (default 1)")
    ap.add_argument("--idle-timeout", type=int, default=5, help="the daemon's --idle-timeout (default 5)")
    ap.add_argument("--max-p99-ms", type=float, default=100, help="fail when the normal client's p99 is above")
    args = ap.parse_args()
    binary = os.environ.get("TILED_BIN", "build/tiled")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 2 * args.connections + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    n = min(args.connections, want - 256)

    proc, host, port = start_daemon(binary, "--idle-timeout", str(args.idle_timeout))
    ok = True
    try:
        print(f"slowloris: {n} connections, one header byte each every {args.interval} s, "
              f"--idle-timeout {args.idle_timeout}, {host}:{port}")
        base = normal_client(host, port, 5)
        report("normal client alone", *base)
        t = Trickle(host, port, n, args.interval, args.seconds + 30)
        time.sleep(min(2.0, args.interval * 2))
        under = normal_client(host, port, args.seconds)
        still = t.open_count()
        t.close()
        report(f"beside {n} trickling connections", *under)
        print(f"  trickling connections: {n - t.refused} opened, {t.refused} refused, {t.sent} bytes sent, "
              f"{still} still open after {args.seconds:.0f} s (closed by the server: {t.closed})")
        after = normal_client(host, port, 5)
        report("normal client alone again", *after)
        if under[1] or pct(under[0], 99) * 1e3 > args.max_p99_ms:
            ok = False
    finally:
        rc = stop_daemon(proc)
        print(f"  daemon exit status {rc}")
        ok = ok and rc == 0

    # The same load against a daemon whose connection limit is below it.
    limit = max(16, n // 2)
    proc, host, port = start_daemon(binary, "--idle-timeout", str(args.idle_timeout), "--max-connections", str(limit))
    try:
        t = Trickle(host, port, n, args.interval, 40)
        time.sleep(min(2.0, args.interval * 2))
        capped = normal_client(host, port, min(args.seconds, 10))
        still = t.open_count()
        t.close()
        report(f"beside {n} trickling, --max-connections {limit}", *capped)
        print(f"  (informational) trickling connections: {n - t.refused} opened, {still} still open; "
              f"once the limit is reached, new connections wait unaccepted (the client times out) "
              f"for as long as the trickling ones keep sending")
    finally:
        stop_daemon(proc)
    print(f"slowloris: normal client p99 {pct(under[0], 99) * 1e3:.2f} ms beside {n} trickling connections "
          f"(alone: {pct(base[0], 99) * 1e3:.2f} ms); {'PASS' if ok else 'FAIL'}")
    print(f"reproduce: TILED_BIN={binary} python3 bench/slowloris.py --connections {args.connections} "
          f"--seconds {args.seconds:g} --interval {args.interval:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
