"""Resilience: overload, slow clients and draining, measured (loopback only).

- Overload: one worker and a queue of two, flooded by 8 clients with slow requests
  (16 MiB outputs gzip-compressed on the worker): the requests that do not
  fit get 503 with Retry-After within milliseconds, none times out, and a
  normal request afterwards is as fast as before the flood.
- Slow clients: hundreds of connections trickling header bytes do not slow
  a normal client down, and silent connections are closed after
  --idle-timeout; a head still incomplete after --header-timeout has its
  connection cut, while slow heads inside the deadline and slow bodies are
  served.
- Streams: back-to-back streamed responses each arrive whole.
- Drain: SIGTERM during a burst of concurrent requests: every request that
  got an answer got a whole 200, new connections are refused at once, the
  readiness probe on a kept-alive connection turns 503 at once, exit 0.

Every loop is bounded in count and time; the whole file runs in well under
a minute.

    cd tests/server && TILED_BIN=../../build/tiled /usr/bin/python3 -m unittest -v test_resilience
"""
import http.client
import json
import signal
import socket
import threading
import time
import unittest
import zlib

import numpy as np

from harness.daemon import WRAP, Daemon, read_until_close, wait_for

SLACK = 10 if WRAP else 1          # timing allowance under a wrapper such as valgrind
RAW = {"Content-Type": "application/octet-stream"}

# A slow request: 4 KiB in, 16 MiB out, built in memory and gzip-compressed
# on the worker (~0.1 s of worker time, ~120 KiB on the wire).
SLOW_IN = bytes(range(256)) * 16
SLOW_PATH = "/v1/tile?dtype=uint8&shape=4096&repeats=4096"
SLOW_HEADERS = {**RAW, "Accept-Encoding": "gzip"}
# A normal request: small enough to be served inline on the HTTP thread.
SMALL_IN = np.arange(6, dtype=np.float32).tobytes()
SMALL_PATH = "/v1/tile?dtype=float32&shape=2,3&repeats=2,2"
SMALL_OUT = np.tile(np.arange(6, dtype=np.float32).reshape(2, 3), (2, 2)).tobytes()


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def small_request(host, port, timeout=10):
    """One normal request on a fresh connection: (seconds, status, body ok)."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", SMALL_PATH, SMALL_IN, RAW)
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    return time.perf_counter() - t0, resp.status, body == SMALL_OUT


def small_latencies(d, n, pause=0.0):
    out = []
    for _ in range(n):
        dt, status, ok = small_request(d.host, d.port)
        if status != 200 or not ok:
            raise AssertionError(f"normal request failed: {status}")
        out.append(dt)
        if pause:
            time.sleep(pause)
    return out


class Overload(unittest.TestCase):
    def test_flood_gets_fast_503_and_recovers(self):
        d = Daemon("--workers", "1", "--queue", "2", "--stream-threshold", "64M", "--log-level", "warn")
        try:
            small_latencies(d, 5)  # warm up
            before = small_latencies(d, 30)
            results, lock = [], threading.Lock()
            deadline = time.monotonic() + 3.0

            def flood():
                conn = None
                for _ in range(2000):  # bounded by count and by the deadline
                    if time.monotonic() > deadline:
                        break
                    t0 = time.perf_counter()
                    try:
                        if conn is None:
                            conn = http.client.HTTPConnection(d.host, d.port, timeout=30 * SLACK)
                        conn.request("POST", SLOW_PATH, SLOW_IN, SLOW_HEADERS)
                        resp = conn.getresponse()
                        body = resp.read()
                        rec = (resp.status, time.perf_counter() - t0, resp.getheader("Retry-After"),
                               resp.getheader("Content-Encoding"), len(body), None)
                        if resp.getheader("Connection", "").lower() == "close":
                            conn.close()
                            conn = None
                    except (OSError, http.client.HTTPException) as exc:
                        rec = (None, time.perf_counter() - t0, None, None, 0, repr(exc))
                        if conn:
                            conn.close()
                        conn = None
                    with lock:
                        results.append(rec)
                if conn:
                    conn.close()

            threads = [threading.Thread(target=flood) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60 * SLACK)
            self.assertFalse(any(t.is_alive() for t in threads), "a flooding client hangs")

            errors = [r for r in results if r[5]]
            self.assertEqual(errors, [], "requests failed at the socket level (timeouts, resets)")
            by_status = {}
            for r in results:
                by_status.setdefault(r[0], []).append(r)
            self.assertEqual(set(by_status) - {200, 503}, set(), {k: len(v) for k, v in by_status.items()})
            ok, busy = by_status.get(200, []), by_status.get(503, [])
            self.assertGreater(len(ok), 3, "the worker served almost nothing")
            self.assertGreater(len(busy), 50, "the flood never filled the queue")
            for status, _, retry, coding, size, _ in ok:
                self.assertEqual(coding, "gzip")
                self.assertGreater(size, 1000)
            for status, _, retry, _, _, _ in busy:
                self.assertEqual(retry, "1")
            lat503 = [r[1] for r in busy]
            p50, p99 = percentile(lat503, 50), percentile(lat503, 99)
            print(f"\n  overload: {len(ok)} x 200, {len(busy)} x 503 in 3 s; "
                  f"503 latency p50 {p50 * 1e3:.2f} ms p99 {p99 * 1e3:.2f} ms max {max(lat503) * 1e3:.2f} ms")
            # How fast the 503s come is measured by bench/overload.sh, not asserted here: a loaded
            # machine may delay any answer. What is asserted is the behaviour above: the flood got
            # 503s with Retry-After (the queue refused instead of growing) and no socket errors.

            after = small_latencies(d, 30)
            b50, a50 = percentile(before, 50), percentile(after, 50)
            # Recovery is shown by the 30 normal requests above all succeeding; the latency is printed.
            print(f"  normal request p50 before {b50 * 1e3:.2f} ms, after {a50 * 1e3:.2f} ms")
            resp, body = d.request("GET", "/v2/health/ready")
            self.assertEqual(resp.status, 200)
        finally:
            self.assertEqual(d.stop(), 0)


class SlowClients(unittest.TestCase):
    NSLOW = 300

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--idle-timeout", "2", "--log-level", "warn")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"

    def test_slowloris_does_not_starve_normal_clients(self):
        d = self.d
        socks = []
        stop = threading.Event()
        try:
            for _ in range(self.NSLOW):
                s = socket.create_connection((d.host, d.port), timeout=5)
                s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\n")
                socks.append(s)
            header = b"X-Trickle: " + b"a" * 200 + b"\r\n"
            sent = {"bytes": 0, "closed": 0}

            def trickle():
                # One byte per connection every ~0.4 s (under the idle timeout),
                # for at most 15 s.
                end = time.monotonic() + 15
                i = 0
                while not stop.is_set() and time.monotonic() < end:
                    for s in socks:
                        if s.fileno() < 0:
                            continue
                        try:
                            s.send(header[i % len(header):i % len(header) + 1])
                            sent["bytes"] += 1
                        except OSError:
                            sent["closed"] += 1
                            s.close()
                    i += 1
                    stop.wait(0.4)

            t = threading.Thread(target=trickle)
            t.start()
            lat = []
            for _ in range(100):  # ~3 s of normal traffic
                dt, status, ok = small_request(d.host, d.port)
                self.assertEqual(status, 200)
                self.assertTrue(ok)
                lat.append(dt)
                time.sleep(0.02)
            stop.set()
            t.join(5)
            p50, p99 = percentile(lat, 50), percentile(lat, 99)
            print(f"\n  slowloris: {self.NSLOW} trickling connections ({sent['bytes']} bytes sent, "
                  f"{sent['closed']} closed by the server); normal client p50 {p50 * 1e3:.2f} ms "
                  f"p99 {p99 * 1e3:.2f} ms max {max(lat) * 1e3:.2f} ms")
            # Every one of the 100 normal requests was answered correctly while the trickling
            # connections were held (asserted above); their latency is printed, measured in bench/.
        finally:
            stop.set()
            for s in socks:
                s.close()

    def closed_after(self, s, limit=6.0):
        """Seconds until the server closes `s` (None if it does not within `limit`)."""
        t0 = time.monotonic()
        s.settimeout(limit)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return time.monotonic() - t0
        except socket.timeout:
            return None
        except ConnectionResetError:
            return time.monotonic() - t0

    def test_idle_connections_are_closed(self):
        d = self.d
        silent = socket.create_connection((d.host, d.port), timeout=5)
        partial = socket.create_connection((d.host, d.port), timeout=5)
        partial.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\nContent-Le")
        half_body = socket.create_connection((d.host, d.port), timeout=5)
        half_body.sendall(b"POST " + SMALL_PATH.encode() + b" HTTP/1.1\r\nHost: t\r\n"
                          b"Content-Type: application/octet-stream\r\nContent-Length: 24\r\n\r\n" + SMALL_IN[:10])
        kept = http.client.HTTPConnection(d.host, d.port, timeout=5)
        kept.request("GET", "/v2/health/live")
        self.assertEqual(kept.getresponse().read(), b'{"live":true}')
        results = {}

        def watch(name, s):
            results[name] = self.closed_after(s)

        threads = [threading.Thread(target=watch, args=a)
                   for a in (("silent", silent), ("partial headers", partial), ("half a body", half_body),
                             ("idle keep-alive", kept.sock))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        print("\n  closed after: " + ", ".join(f"{k} {v:.2f} s" if v else f"{k} never" for k, v in results.items()))
        for name, after in results.items():
            self.assertIsNotNone(after, f"{name}: not closed within 6 s with --idle-timeout 2")
            self.assertGreater(after, 1.5, name)
            self.assertLess(after, 3.0 * (2 if WRAP else 1), name)
        for s in (silent, partial, half_body):
            s.close()
        kept.close()
        self.assertEqual(small_request(d.host, d.port)[1], 200)



class HeaderDeadline(unittest.TestCase):
    """--header-timeout: a request head must be complete within its deadline,
    however steadily its bytes trickle in (the idle timeout alone never fires
    for a client that sends a byte a second); bodies and idle gaps inside
    the deadline are not affected. Between requests on a kept-alive connection
    the idle timeout is added: a client may rightly wait that long to start
    its next head."""

    TIMEOUT = 2
    IDLE = 3

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--header-timeout", str(cls.TIMEOUT), "--idle-timeout", str(cls.IDLE), "--log-level", "warn")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"

    def trickle_until_closed(self, s, data, every=0.3, limit=8.0):
        """Sends `data` a byte at a time; seconds until the server ends the
        connection (None if it stays open for `limit` seconds)."""
        t0 = time.monotonic()
        s.settimeout(every)
        for i in range(int(limit / every)):
            try:
                s.send(data[i % len(data):i % len(data) + 1])
                if s.recv(4096) == b"":
                    return time.monotonic() - t0
            except socket.timeout:
                continue
            except OSError:
                return time.monotonic() - t0
        return None

    def cuts(self):
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=5)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return int(next(line.split()[1] for line in text.splitlines()
                        if line.startswith("tiled_header_timeouts_total ")))

    def test_trickled_head_is_cut(self):
        before = self.cuts()
        s = socket.create_connection((self.d.host, self.d.port), timeout=5)
        s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\n")
        after = self.trickle_until_closed(s, b"X-Trickle: " + b"a" * 500 + b"\r\n")
        s.close()
        print(f"\n  trickled head cut after {after:.2f} s (--header-timeout {self.TIMEOUT})" if after else "")
        self.assertIsNotNone(after, "a head trickled for 8 s was never cut")
        self.assertGreater(after, self.TIMEOUT - 0.2)  # not before the bound; later only under load
        self.assertEqual(self.cuts(), before + 1)

    def test_next_head_on_kept_alive_connection_has_its_own_deadline(self):
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=5)
        time.sleep(1.2)  # idle before the first request: inside the deadline
        conn.request("POST", SMALL_PATH, SMALL_IN, RAW)
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.read(), SMALL_OUT)
        time.sleep(1.2)  # and again before the second one: the deadline restarted
        conn.request("POST", SMALL_PATH, SMALL_IN, RAW)
        self.assertEqual(conn.getresponse().read(), SMALL_OUT)
        after = self.trickle_until_closed(conn.sock, b"GET /v2/health/live HTTP/1.1\r\nX-Slow: " + b"b" * 500)
        conn.close()
        self.assertIsNotNone(after, "the third head, trickled, was never cut")
        self.assertGreater(after, self.TIMEOUT + self.IDLE - 0.2)

    def test_keep_alive_gap_past_header_timeout_is_not_cut(self):
        before = self.cuts()
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=5)
        conn.request("POST", SMALL_PATH, SMALL_IN, RAW)
        self.assertEqual(conn.getresponse().read(), SMALL_OUT)
        time.sleep(self.TIMEOUT + 0.6)  # silent past the header timeout, inside the idle one
        conn.request("POST", SMALL_PATH, SMALL_IN, RAW)
        resp = conn.getresponse()
        self.assertEqual((resp.status, resp.read()), (200, SMALL_OUT))
        # Left silent, the idle timeout closes it; that is not a late head.
        conn.sock.settimeout((self.IDLE + 3) * (2 if WRAP else 1))
        _, closed = read_until_close(conn.sock)
        conn.close()
        self.assertTrue(closed, "the idle connection was never closed")
        self.assertEqual(self.cuts(), before)

    def test_slow_head_within_deadline_and_slow_body_are_served(self):
        s = socket.create_connection((self.d.host, self.d.port), timeout=10)
        head = (b"POST " + SMALL_PATH.encode() + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % len(SMALL_IN))
        for i in range(0, len(head), 16):  # the head over ~1 s
            s.sendall(head[i:i + 16])
            time.sleep(1.0 / (len(head) / 16))
        for i in range(len(SMALL_IN)):  # the body over ~1.5 s: past the head deadline, inside its own
            s.sendall(SMALL_IN[i:i + 1])
            time.sleep(1.5 / len(SMALL_IN))
        data, closed = read_until_close(s)
        s.close()
        self.assertTrue(closed)
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:80])
        self.assertTrue(data.endswith(SMALL_OUT))


def metric_value(d, line_start):
    """The value of the /metrics sample whose line starts with `line_start`."""
    conn = http.client.HTTPConnection(d.host, d.port, timeout=5)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return int(next(line.split()[-1] for line in text.splitlines() if line.startswith(line_start)))


def access_status(d, request_id):
    """The status of the access-log line of request `request_id` (None until it is logged)."""
    for line in d.log_lines():
        if line.startswith("{") and f'"request_id":"{request_id}"' in line and '"event":"access"' in line:
            return json.loads(line)["status"]
    return None


class BodyDeadline(unittest.TestCase):
    """A request body has --header-timeout from the end of its head, plus a
    second per 500 bytes received so far: a client that keeps trickling gets
    408 and Connection: close, one that stops is cut; a steady sender of any
    size, and whatever follows the body (the work, a slowly read reply), are
    not bounded."""

    TIMEOUT = 1
    SWEEP = 0.25  # h1loop.c TICK_US: how often the loops check the deadlines
    LATE = 'tiled_body_timeouts_total{transport="http"}'

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--header-timeout", str(cls.TIMEOUT), "--log-level", "info", "--stream-threshold", "64K")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"

    def head(self, path, length, request_id, close=False):
        return (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n"
                f"Content-Length: {length}\r\nX-Request-Id: {request_id}\r\n"
                + ("Connection: close\r\n" if close else "") + "\r\n").encode()

    def trickle(self, s, body, every=0.3, limit=6.0):
        """Sends `body` a byte every `every` s until the server answers or
        closes: (everything it sent, whether it closed, seconds taken)."""
        t0 = time.monotonic()
        s.settimeout(every)
        got = b""
        for i in range(min(len(body), int(limit / every))):
            try:
                s.send(body[i:i + 1])
                got = s.recv(65536)
                break  # an answer, or the close (b"")
            except socket.timeout:
                continue
            except OSError:
                break
        s.settimeout(5)
        rest, closed = read_until_close(s)
        return got + rest, closed or got == b"", time.monotonic() - t0

    def assert_408(self, data, request_id):
        head, _, body = data.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 408 "), data[:200])
        self.assertIn(b"\r\nConnection: close", head)
        self.assertIn(b"\r\nX-Request-Id: " + request_id.encode(), head)
        self.assertRegex(json.loads(body)["error"],
                         r"^request body not received in time: \d+ bytes of it came in [0-9.]+ s; a request has the "
                         r"header-timeout of 1 s from the end of its head, plus a second per 500 bytes of body")

    def assert_logged(self, request_id, status):
        deadline = time.monotonic() + 60
        while access_status(self.d, request_id) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(access_status(self.d, request_id), status)

    def test_trickled_body_gets_408(self):
        before = metric_value(self.d, self.LATE)
        s = socket.create_connection((self.d.host, self.d.port), timeout=5)
        s.sendall(self.head(SMALL_PATH, len(SMALL_IN), "body-trickle"))
        data, closed, took = self.trickle(s, SMALL_IN)
        s.close()
        print(f"\n  trickled body answered after {took:.2f} s (--header-timeout {self.TIMEOUT})")
        self.assert_408(data, "body-trickle")
        self.assertTrue(closed, "the connection stayed open after the 408")
        self.assertGreater(took, self.TIMEOUT - 0.1)  # not before the bound (later only on a loaded machine)
        self.assertEqual(metric_value(self.d, self.LATE), before + 1)
        self.assert_logged("body-trickle", 408)
        self.assertEqual(small_request(self.d.host, self.d.port)[1:], (200, True))

    def test_stalled_body_is_cut(self):
        before = metric_value(self.d, self.LATE)
        # The socket's timeout is only a hang's deadline: the cut itself is shown by the close.
        s = socket.create_connection((self.d.host, self.d.port), timeout=60 * SLACK)
        t0 = time.monotonic()
        s.sendall(self.head(SMALL_PATH, len(SMALL_IN), "body-stall") + SMALL_IN[:5])
        data, closed = read_until_close(s)
        took = time.monotonic() - t0
        s.close()
        print(f"\n  stalled body cut after {took:.2f} s (--header-timeout {self.TIMEOUT})")
        self.assertTrue(closed, "a stalled body was never cut")
        self.assertEqual(data, b"", "a cut, not a reply")
        self.assertGreater(took, self.TIMEOUT - 0.1)
        self.assertEqual(metric_value(self.d, self.LATE), before + 1)
        self.assert_logged("body-stall", 408)

    def test_steady_body_longer_than_the_timeout_is_served(self):
        a = np.arange(768, dtype=np.float32)  # 3 KB at ~1.5 KB/s: 2 s, twice the timeout
        body = a.tobytes()
        s = socket.create_connection((self.d.host, self.d.port), timeout=10)
        t0 = time.monotonic()
        s.sendall(self.head("/v1/tile?dtype=float32&shape=768&repeats=2", len(body), "body-steady", close=True))
        for i in range(0, len(body), 150):
            s.sendall(body[i:i + 150])
            time.sleep(0.1)
        data, closed = read_until_close(s)
        took = time.monotonic() - t0
        s.close()
        self.assertGreater(took, 1.8)
        self.assertTrue(data.startswith(b"HTTP/1.1 200 "), data[:200])
        self.assertEqual(data.partition(b"\r\n\r\n")[2], np.tile(a, 2).tobytes())

    def test_large_body_at_full_speed_is_served(self):
        a = (np.arange(1 << 21) % 251).astype(np.uint8).reshape(1 << 11, 1 << 10)  # 2 MiB in, 8 MiB out
        resp, data = self.d.request("POST", "/v1/tile?dtype=uint8&shape=2048,1024&repeats=2,2", a.tobytes(), RAW,
                                    timeout=30)
        self.assertEqual(resp.status, 200)
        self.assertEqual(data, np.tile(a, (2, 2)).tobytes())

    def test_slowly_read_streamed_reply_is_not_cut(self):
        """The bound ends with the body: a streamed reply read for twice the
        timeout goes out whole."""
        before = metric_value(self.d, self.LATE)
        a = np.arange(1024, dtype=np.uint8)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(10)
        s.connect((self.d.host, self.d.port))
        t0 = time.monotonic()
        s.sendall(self.head("/v1/tile?dtype=uint8&shape=1024&repeats=8192", len(a), "slow-reader", close=True)
                  + a.tobytes())
        data, chunk = b"", b""
        # Slowly (at most 16 KiB per 30 ms, ~0.5 MiB/s) until twice the bound has passed, then at
        # full speed: the reply must still be arriving then, and arrive whole.
        while time.monotonic() - t0 < 2 * self.TIMEOUT + 0.2:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            time.sleep(0.03)
        slow_part = len(data)
        while chunk:
            chunk = s.recv(1 << 20)
            data += chunk
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head[:200])
        self.assertLess(slow_part, len(data), "the reply was still being sent after twice the bound")
        self.assertEqual(body, np.tile(a, 8192).tobytes())
        self.assertEqual(metric_value(self.d, self.LATE), before)

    def test_header_timeout_0_turns_the_body_bound_off(self):
        """Off for bodies as for heads and gRPC calls: a 4-byte body over
        0.8 s (far below the rate, far past the 8 ms the rate alone gives)."""
        d = Daemon("--header-timeout", "0", "--log-level", "warn")
        try:
            s = socket.create_connection((d.host, d.port), timeout=5)
            a = np.array([1.5], dtype=np.float32).tobytes()
            s.sendall(self.head("/v1/tile?dtype=float32&shape=1&repeats=3", len(a), "off", close=True))
            for i in range(len(a)):
                time.sleep(0.2)
                s.sendall(a[i:i + 1])
            data, closed = read_until_close(s)
            s.close()
            self.assertTrue(data.startswith(b"HTTP/1.1 200 "), data[:200])
            self.assertEqual(data.partition(b"\r\n\r\n")[2], np.tile(np.frombuffer(a, np.float32), 3).tobytes())
            self.assertEqual(metric_value(d, self.LATE), 0)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_each_request_on_a_kept_alive_connection_has_its_own_bound(self):
        s = socket.create_connection((self.d.host, self.d.port), timeout=5)
        t0 = time.monotonic()
        for n in range(2):  # each body over ~0.8 s: 1.6 s in all, past one request's bound
            s.sendall(self.head(SMALL_PATH, len(SMALL_IN), f"keep-{n}"))
            for i in range(0, len(SMALL_IN), 4):
                s.sendall(SMALL_IN[i:i + 4])
                time.sleep(0.8 / (len(SMALL_IN) / 4))
            resp = http.client.HTTPResponse(s)
            resp.begin()
            self.assertEqual((resp.status, resp.read()), (200, SMALL_OUT))
        self.assertGreater(time.monotonic() - t0, 1.5)
        s.sendall(self.head(SMALL_PATH, len(SMALL_IN), "keep-late"))
        data, closed, _ = self.trickle(s, SMALL_IN)  # and the third, trickled, still gets its 408
        s.close()
        self.assert_408(data, "keep-late")
        self.assertTrue(closed)


class Streams(unittest.TestCase):
    def test_streamed_bodies_arrive_whole(self):
        """Back-to-back streamed responses on one kept-alive connection each arrive whole."""
        d = Daemon("--stream-threshold", "16K", "--stream-chunk", "16K", "--log-level", "warn")
        try:
            a = np.arange(4, dtype=np.uint8)
            want = np.tile(a, 1 << 15).tobytes()  # 128 KiB: 8 chunks
            conn = http.client.HTTPConnection(d.host, d.port, timeout=10 * SLACK)
            failures, n = [], 0
            deadline = time.monotonic() + 10
            for i in range(3000):  # bounded by count and time
                if time.monotonic() > deadline:
                    break
                n += 1
                try:
                    conn.request("POST", "/v1/tile?dtype=uint8&shape=4&repeats=32768", a.tobytes(), RAW)
                    resp = conn.getresponse()
                    body = resp.read()
                    if resp.status != 200 or body != want:
                        failures.append((i, resp.status, len(body)))
                    conn.request("GET", "/v2/health/ready")
                    conn.getresponse().read()
                except (OSError, http.client.HTTPException) as exc:
                    failures.append((i, repr(exc)))
                    conn.close()
                    conn = http.client.HTTPConnection(d.host, d.port, timeout=10 * SLACK)
            conn.close()
            self.assertFalse(failures, f"{len(failures)} of {n} streamed responses were cut short, e.g. {failures[:3]}")
        finally:
            self.assertEqual(d.stop(), 0)


class Drain(unittest.TestCase):
    def test_sigterm_during_burst(self):
        d = Daemon("--stream-chunk", "64K", "--log-level", "warn")
        stop_at = [None]
        t_sig = [None]
        outcomes, lock = [], threading.Lock()
        a = np.arange(256, dtype=np.uint8)
        want = np.tile(a, 4096).tobytes()  # 1 MiB, done on a worker

        def burst(seed):
            conn = None
            for _ in range(500):  # bounded by count and time
                if stop_at[0] and time.monotonic() > stop_at[0]:
                    break
                got = None
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(d.host, d.port, timeout=30 * SLACK)
                        conn.connect()
                    conn.request("POST", "/v1/tile?dtype=uint8&shape=256&repeats=4096", a.tobytes(), RAW)
                    resp = conn.getresponse()
                    got = "response"
                    body = resp.read()
                    kind = "ok" if resp.status == 200 and body == want else f"bad {resp.status} {len(body)}"
                    if resp.getheader("Connection", "").lower() == "close":
                        conn.close()
                        conn = None
                except ConnectionRefusedError:
                    kind = "refused"
                    conn = None
                except (OSError, http.client.HTTPException) as exc:
                    # Without a byte of response the request was not taken (a kept-alive
                    # connection closed as it was reused); after a response began it is a failure.
                    kind = f"bad {exc!r}" if got else f"not taken {exc!r}"
                    if conn:
                        conn.close()
                    conn = None
                with lock:  # when the attempt ended: a failure the drain caused ends after the signal
                    outcomes.append((time.monotonic(), kind))
                if kind == "refused":
                    break
            if conn:
                conn.close()

        # A slow streamed download in flight keeps the drain going for a while.
        stream_result = {}

        def slow_stream():
            conn = http.client.HTTPConnection(d.host, d.port, timeout=30 * SLACK)
            conn.request("POST", f"/v1/tile?dtype=uint8&shape=256&repeats={1 << 16}", a.tobytes(), RAW)
            resp = conn.getresponse()
            n = 0
            stream_result["status"] = resp.status
            for _ in range(10000):
                chunk = resp.read(1 << 16)  # 16 MiB at ~6 MiB/s: ~2.5 s
                if not chunk:
                    break
                n += len(chunk)
                time.sleep(0.01)
            stream_result["bytes"] = n
            conn.close()

        try:
            ready = http.client.HTTPConnection(d.host, d.port, timeout=10 * SLACK)
            ready.request("GET", "/v2/health/ready")
            r = ready.getresponse()
            self.assertEqual((r.status, r.read()), (200, b'{"ready":true}'))

            streamer = threading.Thread(target=slow_stream)
            streamer.start()
            threads = [threading.Thread(target=burst, args=(i,)) for i in range(16)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 60 * SLACK  # the load is under way: some requests answered
            while time.monotonic() < deadline:
                with lock:
                    if sum(1 for _, kind in outcomes if kind == "ok") >= 32:
                        break
                time.sleep(0.01)  # a poll interval: the count decides
            with lock:
                before = len(outcomes)
            t_sig[0] = time.monotonic()
            d.proc.send_signal(signal.SIGTERM)
            stop_at[0] = t_sig[0] + 1.0

            # The readiness probe on the kept-alive connection: 503 (or closed) at once.
            # kill() only marks the signal pending; the daemon's sigwait thread may
            # need a few ms to be scheduled on two busy CPUs, and a probe answered
            # before that is rightly 200. So probe until the answer flips (the
            # deadline is for a hang only; how long it took is printed).
            t0 = time.monotonic()
            probes_ready = 0
            while True:
                try:
                    ready.request("GET", "/v2/health/ready")
                    r = ready.getresponse()
                    probe = (r.status, json.loads(r.read()))
                except (OSError, http.client.HTTPException) as exc:
                    probe = ("closed", repr(exc))
                if probe[0] != 200 or time.monotonic() - t0 > 60 * SLACK:
                    break
                self.assertEqual(probe[1], {"ready": True})
                probes_ready += 1
                time.sleep(0.002)
            probe_s = time.monotonic() - t0
            # New connections are refused once the listener is closed, which
            # follows the flip: connect until refused (a hang-only deadline).
            t0 = time.monotonic()
            refused = False
            while not refused and time.monotonic() - t0 < 60 * SLACK:
                try:
                    socket.create_connection((d.host, d.port), timeout=2).close()
                    time.sleep(0.002)  # a poll interval: the refusal decides
                except ConnectionRefusedError:
                    refused = True
            refuse_s = time.monotonic() - t0
            self.assertTrue(refused, "new connections are still accepted while draining")

            for t in threads:
                t.join(30 * SLACK)
            streamer.join(30 * SLACK)
            self.assertFalse(any(t.is_alive() for t in threads + [streamer]), "a client hangs")
            rc = d.proc.wait(30 * SLACK)
            exit_s = time.monotonic() - t_sig[0]

            kinds = {}
            for t, kind in outcomes:
                kinds[kind.split(" ")[0]] = kinds.get(kind.split(" ")[0], 0) + 1
            print(f"\n  drain: {len(outcomes)} requests ({before} before SIGTERM): {kinds}; probe {probe} in "
                  f"{probe_s * 1e3:.1f} ms ({probes_ready} earlier probes still ready); refused in {refuse_s * 1e3:.1f} ms; exit {rc} after {exit_s:.2f} s")
            bad = [o for o in outcomes if o[1].startswith("bad")]
            self.assertEqual(bad, [], "an accepted request did not complete with 200")
            # A connection still in the listener's queue at the signal is reset when the
            # listener closes (an HTTP client or proxy retries it: nothing was sent back), so
            # what counts is what failed before the signal was sent.
            early = [o for o in outcomes if o[1] != "ok" and o[0] < t_sig[0]]
            self.assertEqual(early, [], "requests failed before the signal")
            self.assertGreater(kinds.get("ok", 0), before)
            self.assertIn(probe[0], (503, "closed"), probe)
            if probe[0] == 503:
                self.assertEqual(probe[1].get("ready"), False)
            self.assertEqual(stream_result.get("status"), 200)
            self.assertEqual(stream_result.get("bytes"), 256 << 16, "the in-flight stream was cut")
            self.assertEqual(rc, 0)
        finally:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()


def process_state(pid):
    """The state letter of process `pid` (/proc/PID/stat: T when stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def listen_queue(port):
    """Connections waiting in the accept queue of the IPv4 listener on `port` (the LISTEN
    socket's rx_queue in /proc/net/tcp); None when no such listener is open."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "0A" and int(local.split(":")[1], 16) == port:
                return int(queues.split(":")[1], 16)
    return None


class DrainQueued(unittest.TestCase):
    def test_drain_serves_the_connections_waiting_to_be_accepted(self):
        """A client sends its request as soon as connect() returns, so a connection the kernel
        completed but the daemon has not accepted yet may hold a request when the drain begins.
        Each such connection is accepted and its request answered (with Connection: close unless
        it was taken before the daemon read the signal), then closed. The daemon is stopped (SIGSTOP) while the clients connect and send, so their connections wait
        in the listener's queue until it takes the SIGTERM. (Before, the drain shut the listener at
        once, which resets every connection in its queue.)"""
        d = Daemon("--drain-timeout", "20")
        socks = []
        try:
            resp, body = d.request("POST", SMALL_PATH, SMALL_IN, RAW)  # accepting
            self.assertEqual((resp.status, body), (200, SMALL_OUT))
            d.proc.send_signal(signal.SIGSTOP)
            try:
                for i in range(300):  # well within the listen backlog (1024)
                    s = socket.create_connection((d.host, d.port), timeout=60 * SLACK)
                    socks.append(s)
                    s.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nX-Request-Id: queued-%d\r\n"
                              b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s"
                              % (SMALL_PATH.encode(), i, len(SMALL_IN), SMALL_IN))
                d.proc.send_signal(signal.SIGTERM)
            finally:
                d.proc.send_signal(signal.SIGCONT)
            for i, s in enumerate(socks):
                data, closed = read_until_close(s)
                head, _, body = data.partition(b"\r\n\r\n")
                self.assertTrue(head.startswith(b"HTTP/1.1 200 "), f"connection {i}: {data[:200]!r}")
                self.assertEqual(body, SMALL_OUT)
            self.assertEqual(d.proc.wait(60 * SLACK), 0)
            access = [json.loads(l) for l in d.log_lines() if '"access"' in l]
            self.assertEqual(sorted(a["request_id"] for a in access if a["request_id"].startswith("queued-")),
                             sorted(f"queued-{i}" for i in range(300)))
        finally:
            for s in socks:
                s.close()
            d.proc.send_signal(signal.SIGCONT)
            d.stop()


    def test_drain_waits_for_the_requests_of_connections_it_took(self):
        """The connections taken from the queue in the drain are served even when their requests
        come after the queue is empty and nothing is in flight: under load the library may read a
        request only then (the drain ended before, and cut the last connections of the test
        above). Here the clients connect while the daemon is stopped and send once the daemon has
        taken every connection from the queue (its length read from /proc/net/tcp)."""
        d = Daemon("--drain-timeout", "60")
        socks = []
        try:
            resp, body = d.request("POST", SMALL_PATH, SMALL_IN, RAW)
            self.assertEqual((resp.status, body), (200, SMALL_OUT))
            d.proc.send_signal(signal.SIGSTOP)
            try:
                self.assertTrue(wait_for(lambda: process_state(d.proc.pid) == "T", 60), "the daemon did not stop")
                socks = [socket.create_connection((d.host, d.port), timeout=60 * SLACK) for _ in range(20)]
                self.assertEqual(listen_queue(d.port), 20)
                d.proc.send_signal(signal.SIGTERM)
            finally:
                d.proc.send_signal(signal.SIGCONT)
            self.assertTrue(wait_for(lambda: listen_queue(d.port) in (0, None), 60 * SLACK), listen_queue(d.port))
            for i, s in enumerate(socks):
                s.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nX-Request-Id: late-%d\r\n"
                          b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s"
                          % (SMALL_PATH.encode(), i, len(SMALL_IN), SMALL_IN))
            for i, s in enumerate(socks):
                data, closed = read_until_close(s)
                head, _, body = data.partition(b"\r\n\r\n")
                self.assertTrue(head.startswith(b"HTTP/1.1 200 "), f"connection {i}: {data[:200]!r}")
                self.assertIn(b"\r\nConnection: close", head)
                self.assertEqual(body, SMALL_OUT)
            self.assertEqual(d.proc.wait(60 * SLACK), 0)
        finally:
            for s in socks:
                s.close()
            d.proc.send_signal(signal.SIGCONT)
            d.stop()

    def test_drain_does_not_wait_for_a_queue_the_daemon_cannot_take(self):
        """At --max-connections the daemon stops accepting, and a connection kept alive and idle
        holds its slot (for --idle-timeout, 300 s here): the one queued behind it cannot be taken.
        The drain shuts the listener once its queue stops moving instead of waiting out
        --drain-timeout (120 s here; the exit is awaited for half of that, which only a drain
        waiting it out reaches)."""
        d = Daemon("--max-connections", "1", "--drain-timeout", "120", "--idle-timeout", "300")
        idle = queued = None
        try:
            idle = socket.create_connection((d.host, d.port), timeout=60 * SLACK)
            idle.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
            resp = http.client.HTTPResponse(idle)
            resp.begin()
            self.assertEqual((resp.status, resp.read()), (200, b'{"live":true}'))
            queued = socket.create_connection((d.host, d.port), timeout=60 * SLACK)
            queued.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
            d.proc.send_signal(signal.SIGTERM)
            self.assertEqual(d.proc.wait(60), 0)
        finally:
            for s in (idle, queued):
                if s:
                    s.close()
            d.stop()


def gzip_stream(pieces):
    """gzip of the concatenated byte strings, compressed a piece at a time (the whole is never built)."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    return b"".join(z.compress(p) for p in pieces) + z.flush()


class DecodeOffTheLoop(unittest.TestCase):
    """A small compressed body may inflate to a very large one: it is
    inflated and decoded on a worker, never on the thread that serves the
    other connections, so a health probe is answered while it is decoded."""

    def test_health_probe_is_answered_while_a_compressed_body_is_decoded(self):
        d = Daemon("--workers", "1", "--log-level", "warn")
        try:
            n = 30 << 20  # 60 MiB of JSON once inflated; decoding it takes a while
            body = gzip_stream([b'{"input": {"dtype": "int8", "shape": [%d], "data": [' % (n + 2)] +
                               [b"0," * (1 << 20)] * (n >> 20) + [b'0]}, "repeats": [1]}'])
            # Under --inline-max (64K) as sent: its size alone would let it be served inline.
            self.assertLess(len(body), 64 << 10)
            heavy = socket.create_connection((d.host, d.port), timeout=120 * SLACK)
            heavy.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                          b"Content-Encoding: gzip\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            # Once a worker has it, the loop is free: were it decoding there, this scrape
            # (and the probe) would wait for the decode, and the answer would come first.
            deadline = time.monotonic() + 60 * SLACK
            while metric_value(d, "tiled_busy_workers ") == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
            resp, _ = d.request("GET", "/v2/health/live")
            self.assertEqual(resp.status, 200)
            heavy.setblocking(False)
            with self.assertRaises(BlockingIOError, msg="the heavy request was answered before the probe"):
                heavy.recv(1)
            heavy.setblocking(True)
            heavy.settimeout(120 * SLACK)
            data, _ = read_until_close(heavy)
            self.assertTrue(data.startswith(b"HTTP/1.1 400 "), data[:100])
            self.assertIn(b"%d" % (n + 2), data)  # the shape's count, named once the data was read
            heavy.close()
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
