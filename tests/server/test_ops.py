"""Operability: Prometheus metrics (checked by promtool), the configuration
table (flags, env vars, docs/operations.md), the man page (every flag of every
command), and the event log."""
import gzip
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

from harness.daemon import BIN, Daemon, read_until_close

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def metric_value(text, name, labels=""):
    m = re.search(r"^" + re.escape(name + labels) + r" ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def scrape(self):
        resp, body = self.d.request("GET", "/metrics")
        self.assertEqual(resp.status, 200)
        self.assertTrue(resp.getheader("Content-Type").startswith("text/plain; version=0.0.4"))
        return body.decode()

    def tile(self):
        return self.d.request("POST", "/v1/tile", '{"input":{"dtype":"int8","shape":[1],"data":[1]},"repeats":[3]}',
                              {"Content-Type": "application/json"})

    def test_promtool_accepts_live_metrics(self):
        self.tile()
        self.d.request("GET", "/nope")
        text = self.scrape()
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (Debian package prometheus) is needed")
        r = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())
        for name in ("process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds",
                     "process_cpu_seconds_total", "tiled_inflight_requests", "tiled_queue_depth", "tiled_workers",
                     "tiled_busy_workers"):
            self.assertIsNotNone(metric_value(text, name), name)
        self.assertRegex(text, r'tiled_build_info\{version="[^"]+",commit="[^"]+"\} 1')

    def test_counters_and_histograms_move(self):
        labels = '{transport="http",route="/v1/tile",format="json",code="200"}'
        before = self.scrape()
        for _ in range(3):
            self.assertEqual(self.tile()[0].status, 200)
        after = self.scrape()
        self.assertEqual((metric_value(after, "tiled_requests_total", labels) or 0)
                         - (metric_value(before, "tiled_requests_total", labels) or 0), 3)
        route = '{transport="http",route="/v1/tile"}'
        grew = metric_value(after, "tiled_request_duration_seconds_count", route) - \
            (metric_value(before, "tiled_request_duration_seconds_count", route) or 0)
        self.assertEqual(grew, 3)
        self.assertGreater(metric_value(after, "tiled_request_bytes_total", '{transport="http"}'),
                           metric_value(before, "tiled_request_bytes_total", '{transport="http"}'))


def wait_for(cond, what, deadline=60):
    """Polls cond() until it is true; fails only when a hang reaches the deadline."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)  # a poll interval, not synchronisation: cond() decides
    raise AssertionError("timed out waiting for " + what)


class MetricsLabels(unittest.TestCase):
    """Duration by route, connection gauges, exact status codes, gzip and
    OpenMetrics, and one duration for the access log and the histogram."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--grpc-port", "0")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def scrape(self, headers=None):
        resp, body = self.d.request("GET", "/metrics", headers=headers)
        self.assertEqual(resp.status, 200)
        return resp, body

    def text(self):
        return self.scrape()[1].decode()

    def tile(self, rid=None):
        headers = {"Content-Type": "application/json"}
        if rid:
            headers["X-Request-Id"] = rid
        resp, _ = self.d.request("POST", "/v1/tile", '{"input":{"dtype":"int8","shape":[1],"data":[1]},"repeats":[3]}',
                                 headers)
        self.assertEqual(resp.status, 200)

    def test_duration_histogram_by_route(self):
        before = self.text()
        self.tile()
        self.d.request("GET", "/v2/health/live")
        after = self.text()
        for route in ("/v1/tile", "/v2/health"):
            labels = '{transport="http",route="%s"}' % route
            self.assertEqual(metric_value(after, "tiled_request_duration_seconds_count", labels)
                             - (metric_value(before, "tiled_request_duration_seconds_count", labels) or 0), 1, route)
            inf = metric_value(after, "tiled_request_duration_seconds_bucket",
                               '{transport="http",route="%s",le="+Inf"}' % route)
            self.assertEqual(inf, metric_value(after, "tiled_request_duration_seconds_count", labels))
            buckets = re.findall(r'^tiled_request_duration_seconds_bucket\{transport="http",route="%s",le="([^"]+)"\} (\d+)$'
                                 % re.escape(route), after, re.M)
            self.assertEqual(len(buckets), 18)
            counts = [int(c) for _, c in buckets]
            self.assertEqual(counts, sorted(counts), "cumulative buckets")
        # The phases are a histogram of their own, without the total.
        self.assertRegex(after, r'(?m)^tiled_request_phase_seconds_count\{transport="http",phase="tile"\} \d+$')
        self.assertNotIn('phase="total"', after)

    def test_connection_gauge_moves_with_open_connections(self):
        gauge = '{transport="http"}'

        def open_now():
            return metric_value(self.text(), "tiled_open_connections", gauge)

        # The scrape's own connection is open while it is answered.
        wait_for(lambda: open_now() == 1, "only the scrape's connection open")
        socks = []
        try:
            for _ in range(3):
                s = socket.create_connection((self.d.host, self.d.port), timeout=60)
                socks.append(s)
            wait_for(lambda: open_now() == 4, "three more connections counted")
        finally:
            for s in socks:
                s.close()
        wait_for(lambda: open_now() == 1, "the three closed connections uncounted")
        self.assertEqual(metric_value(self.text(), "tiled_max_connections"), 4096)  # the default
        # gRPC's connections are counted apart.
        g = '{transport="grpc"}'
        self.assertEqual(metric_value(self.text(), "tiled_open_connections", g), 0)
        s = socket.create_connection((self.d.host, self.d.grpc_port), timeout=60)
        try:
            wait_for(lambda: metric_value(self.text(), "tiled_open_connections", g) == 1, "a gRPC connection counted")
        finally:
            s.close()
        wait_for(lambda: metric_value(self.text(), "tiled_open_connections", g) == 0, "the gRPC connection uncounted")

    def test_every_status_by_its_own_code(self):
        # The framer answers an unknown transfer coding with 501; it was code="other".
        labels = '{transport="http",route="other",format="none",code="501"}'
        before = metric_value(self.text(), "tiled_requests_total", labels) or 0
        s = socket.create_connection((self.d.host, self.d.port), timeout=60)
        try:
            s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
            data, _ = read_until_close(s)
        finally:
            s.close()
        self.assertTrue(data.startswith(b"HTTP/1.1 501"), data[:40])
        wait_for(lambda: (metric_value(self.text(), "tiled_requests_total", labels) or 0) == before + 1,
                 "the 501 counted under code=\"501\"")
        text = self.text()
        self.assertNotIn('code="other"', text)
        # Every code label is an exact status or a class (a code tiled never sends).
        for code in set(re.findall(r'code="([^"]+)"', text)):
            self.assertRegex(code, r"^([1-5][0-9][0-9]|[1-5]xx)$")

    def test_gzip_when_asked_and_plain_otherwise(self):
        resp, body = self.scrape({"Accept-Encoding": "gzip"})
        self.assertEqual(resp.getheader("Content-Encoding"), "gzip")
        self.assertIn("Accept-Encoding", resp.getheader("Vary"))
        text = gzip.decompress(body).decode()
        self.assertTrue(text.startswith("# HELP tiled_requests_total "), text[:60])
        self.assertLess(len(body) * 3, len(text))
        r = subprocess.run([shutil.which("promtool"), "check", "metrics"], input=text.encode(), capture_output=True)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())
        resp, body = self.scrape()
        self.assertIsNone(resp.getheader("Content-Encoding"))
        self.assertTrue(body.decode().startswith("# HELP tiled_requests_total "))
        resp, body = self.scrape({"Accept-Encoding": "identity"})
        self.assertIsNone(resp.getheader("Content-Encoding"))

    def test_openmetrics_when_asked(self):
        accept = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                  "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")  # Prometheus 2's scrape Accept
        resp, body = self.scrape({"Accept": accept})
        self.assertEqual(resp.getheader("Content-Type"), "application/openmetrics-text; version=1.0.0; charset=utf-8")
        text = body.decode()
        self.assertTrue(text.endswith("\n# EOF\n"))
        self.assertIn("# TYPE tiled_requests counter\n", text)
        self.assertIn("# TYPE process_cpu_seconds counter\n", text)
        self.assertRegex(text, r"(?m)^tiled_requests_total\{")
        self.assertNotRegex(text, r"(?m)^# TYPE \S+_total counter$")
        plain = self.text()
        self.assertNotIn("# EOF", plain)
        self.assertIn("# TYPE tiled_requests_total counter\n", plain)

    def test_one_duration_in_log_and_histogram(self):
        labels = '{transport="http",route="/v1/tile"}'
        rid = "same-duration-%d" % os.getpid()
        before = metric_value(self.text(), "tiled_request_duration_seconds_sum", labels) or 0.0
        self.tile(rid)
        after = metric_value(self.text(), "tiled_request_duration_seconds_sum", labels)
        lines = []

        def logged():
            lines[:] = [json.loads(l) for l in self.d.log_lines() if rid in l]
            return lines

        wait_for(logged, "the request's access line")
        self.assertEqual(len(lines), 1)
        self.assertGreater(lines[0]["total_us"], 0)
        self.assertEqual(round((after - before) * 1e6), lines[0]["total_us"])


class Config(unittest.TestCase):
    def run_bin(self, *args, env=None):
        return subprocess.run([BIN, "serve", *args], capture_output=True, text=True,
                              env=dict(os.environ, **(env or {})))

    def test_docs_table_matches_the_option_table(self):
        table = self.run_bin("--help-markdown").stdout.strip()
        with open(os.path.join(ROOT, "docs", "operations.md"), encoding="utf-8") as f:
            doc = f.read()
        m = re.search(r"<!-- config-table -->\n(.*?)\n<!-- /config-table -->", doc, re.S)
        self.assertIsNotNone(m, "docs/operations.md has the configuration table")
        self.assertEqual(m.group(1).strip(), table)

    def test_help_lists_every_option_as_the_docs_table_does(self):
        help_text = self.run_bin("--help").stdout
        rows = re.findall(r"^\| `--([a-z-]+)` \| `(TILED_[A-Z_]+)` \| `([^`]*)` \| (.*) \|$",
                          self.run_bin("--help-markdown").stdout, re.M)
        self.assertGreater(len(rows), 10)
        # Each option: "  --flag  ENV  (default: D)", then its meaning wrapped on indented lines.
        entries = {m.group(1): m.group(0) for m in re.finditer(r"^  --([a-z-]+) .*\n(?:      .*\n)*", help_text, re.M)}
        for flag, env, default, meaning in rows:
            entry = entries.get(flag)
            self.assertIsNotNone(entry, flag)
            first, rest = entry.split("\n", 1)
            if first.endswith("(default below)"):  # too long for the line: after the meaning, wrapped
                self.assertEqual(first, f"  --{flag}  {env}  (default below)")
                self.assertIn(f"default:{default}", "".join(rest.split()))
            else:
                self.assertEqual(first, f"  --{flag}  {env}  (default: {default})")
            self.assertIn(meaning, " ".join(rest.split()))
        long = [line for line in help_text.splitlines() if len(line) > 100]
        self.assertEqual(long, [], "--help fits 100 columns")

    def test_man_page_options_are_generated_from_the_option_table(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen-man.py"), "--check", BIN],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, "deploy/man/tiled.1 differs from what scripts/gen-man.py writes "
                         "(run it):\n" + r.stdout + r.stderr)

    def test_man_page_names_every_flag_of_every_command(self):
        with open(os.path.join(ROOT, "deploy", "man", "tiled.1"), encoding="utf-8") as f:
            page = re.sub(r"\\f[BIRP]", "", f.read()).replace("\\-", "-")
        for command in ("serve", "tile", "probe", None):
            r = subprocess.run([BIN, *([command] if command else []), "--help"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, command)
            flags = set()
            for line in r.stdout.splitlines():
                if line.startswith(("usage:", "       tiled ")):  # the synopsis
                    flags.update(re.findall(r"--[a-z][a-z0-9-]*", line))
                elif line.startswith("  --"):  # an option's own line: its flags before the two spaces
                    flags.update(re.findall(r"--[a-z][a-z0-9-]*", line[2:].split("  ")[0]))
                elif command is None:  # `tiled --help` names its flags in its prose
                    flags.update(re.findall(r"--[a-z][a-z0-9-]*", line))
            self.assertGreater(len(flags), 1, command)
            for flag in sorted(flags):
                self.assertIsNotNone(re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", page),
                                     "tiled %s %s is not in deploy/man/tiled.1" % (command or "", flag))

    def test_man_page_renders_without_warnings(self):
        groff = shutil.which("groff")
        self.assertIsNotNone(groff, "groff (Debian package groff-base) is needed")
        for width in ("65n", "78n", "120n"):  # narrow and wide terminals break lines in other places
            r = subprocess.run([groff, "-man", "-ww", "-z", "-Tutf8", "-rLL=" + width,
                                os.path.join(ROOT, "deploy", "man", "tiled.1")], capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stderr), (0, ""), width)

    def test_print_config_applies_env_then_flags(self):
        r = self.run_bin("--queue", "7", "--print-config", env={"TILED_QUEUE": "5", "TILED_WORKERS": "3"})
        self.assertEqual(r.returncode, 0, r.stderr)
        cfg = dict(l.split(" = ", 1) for l in r.stdout.splitlines())
        self.assertEqual(cfg["queue"], "7")
        self.assertEqual(cfg["workers"], "3")
        self.assertEqual(cfg["port"], "8080")

    def test_bad_values_are_refused(self):
        for args, fragment in ((["--port", "70000"], "port must be in 0..65535"),
                               (["--max-body", "12Q"], "not a size"),
                               (["--log-format", "xml"], "not a valid log-format"),
                               (["--nope", "1"], "unknown option")):
            r = self.run_bin(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(fragment, r.stderr)


class Listening(unittest.TestCase):
    """--host takes IPv4 and IPv6 literals and names on both ports; start-up
    errors say why and which flag to change."""

    def h2_settings_from(self, host, port):
        """True when an HTTP/2 server on host:port answers the preface with SETTINGS."""
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            head = b""
            while len(head) < 9:
                chunk = s.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
            return len(head) == 9 and head[3] == 0x04

    def serves(self, host, port):
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.request("GET", "/v2/health/live")
            return conn.getresponse().status == 200
        finally:
            conn.close()

    def test_ipv6_names_and_dual_stack_on_both_ports(self):
        for host, reachable in (("::1", ["::1"]), ("localhost", ["localhost"]), ("::", ["127.0.0.1", "::1"])):
            d = Daemon("--host", host, "--grpc-port", "0", "--log-level", "info")
            try:
                self.assertEqual(d.host, host, "printed as a URL's host (an IPv6 literal in brackets)")
                for via in reachable:
                    self.assertTrue(self.serves(via, d.port), (host, via))
                    self.assertTrue(self.h2_settings_from(via, d.grpc_port), (host, via))
            finally:
                self.assertEqual(d.stop(), 0)

    def test_the_access_log_shows_an_ipv6_client(self):
        d = Daemon("--host", "::1", "--log-level", "info")
        try:
            d.request("GET", "/v2/health/live", headers={"X-Request-Id": "v6-client"})
            (line,) = d.access_lines(lambda a: a.get("request_id") == "v6-client")
            self.assertEqual(line["remote"], "::1")
        finally:
            self.assertEqual(d.stop(), 0)

    def test_start_up_errors_say_why_and_what_to_change(self):
        d = Daemon("--grpc-port", "0")
        try:
            for args, words in ((["--port", str(d.port)], ["the address is in use", "choose another --port"]),
                                (["--port", "0", "--grpc-port", str(d.grpc_port)],
                                 ["the address is in use", "choose another --grpc-port"]),
                                (["--port", "0", "--host", "no-such-host.invalid"], ["does not resolve", "--host"]),
                                (["--port", "0", "--host", "192.0.2.1"], ["not one of this machine's", "--host"]),
                                (["--port", "0", "--api-key-file", "/nonexistent/keys"],
                                 ["--api-key-file /nonexistent/keys: No such file or directory"])):
                r = subprocess.run([BIN, "serve", "--log-level", "error", *args], capture_output=True, text=True,
                                   timeout=30)
                self.assertEqual(r.returncode, 1, (args, r.stderr))
                for w in words:
                    self.assertIn(w, r.stderr, args)
        finally:
            self.assertEqual(d.stop(), 0)


class Logs(unittest.TestCase):
    def test_lifecycle_and_access_lines_are_json(self):
        d = Daemon()
        d.request("GET", "/v2/health/live", headers={"Authorization": "Bearer secret-token"})
        self.assertEqual(d.stop(), 0)
        lines = [json.loads(l) for l in d.log_lines()]
        events = [l["event"] for l in lines]
        for ev in ("start", "listening", "signal", "drain", "exit", "access"):
            self.assertIn(ev, events)
        self.assertNotIn("secret-token", "\n".join(d.log_lines()))

    def test_lines_stay_json_when_logged_text_is_not_utf8(self):
        # %ff%fe decodes to bytes that are not UTF-8; the access line records
        # the path, and an error body quotes it.
        # A raw byte above 0x7F in the target is refused by the HTTP framer (400, as llhttp and h11
        # refuse it): that request's line stays JSON too.
        d = Daemon()
        replies = []
        # %f5%a7%b2: a lead byte above f4 with two continuation bytes, once taken for a character
        # (jansson refused it, and the 404's body and the access line's fields were lost: a 503).
        for target in (b"/no/%ff%fe%c3/x%c3%28/%c3%a9", b"/raw/\xc3\xff", b"/no/%f5%a7%b2"):
            with socket.create_connection((d.host, d.port), timeout=10) as s:
                s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                replies.append(read_until_close(s)[0])
        self.assertEqual(d.stop(), 0)
        for reply, status, text in zip(replies, (404, 400, 404), ("no such endpoint", "percent-encode", "/no/")):
            head, _, body = reply.partition(b"\r\n\r\n")
            self.assertIn(b" %d " % status, head.split(b"\r\n")[0])
            self.assertIn(text, json.loads(body.decode("utf-8"))["error"])
        raw = d.log_bytes().splitlines()
        lines = [json.loads(l.decode("utf-8")) for l in raw]  # strict: any bad byte fails here
        access = [l for l in lines if l["event"] == "access"]
        self.assertEqual(len(access), 3)
        self.assertTrue(access[0]["path"].startswith("/no/\ufffd\ufffd"), access[0]["path"])
        self.assertTrue(access[0]["path"].endswith("/\u00e9"), "valid UTF-8 is kept as it is")
        self.assertEqual(access[0]["status"], 404)
        self.assertEqual(access[1]["status"], 400)
        self.assertTrue(access[1]["path"].startswith("/raw/"), access[1]["path"])
        self.assertEqual((access[2]["path"], access[2]["status"]), ("/no/\ufffd\ufffd\ufffd", 404))

    def test_gathered_access_lines_keep_their_order_and_all_reach_the_log(self):
        # Access lines are gathered and written together (by the loop that made them before it
        # waits again, else up to --log-flush-ms later); any other line is written at once and
        # after them, and the stop writes whatever is still gathered: the access lines made
        # before the error line of a failed key reload are in the log above it, and the last
        # request's is there at the exit. (test_log.c holds lines back to check the order.)
        keys = f"/tmp/tiled-test-keys-{os.getpid()}"
        with open(keys, "w") as f:
            f.write("gathered-key\n")
        d = Daemon("--log-flush-ms", "10000", "--api-key-file", keys)
        try:
            auth = {"Authorization": "Bearer gathered-key"}
            for i in range(20):
                resp, _ = d.request("GET", "/v2/health/live", headers={**auth, "X-Request-Id": f"before-{i}"})
                self.assertEqual(resp.status, 200)

            # A request ends in the daemon (its access line is made) once its reply has left,
            # which the client may see first: wait until only the scrape asking is in flight.
            def only_the_scrape():
                _, text = d.request("GET", "/metrics", headers=auth)
                return metric_value(text.decode(), "tiled_inflight_requests") == 1

            wait_for(only_the_scrape, "the 20 requests to end")
            os.unlink(keys)
            d.proc.send_signal(signal.SIGHUP)
            def failed(e):
                return e["event"] == "api_keys" and e["level"] == "error"

            wait_for(lambda: any(failed(json.loads(l)) for l in d.log_lines()), "the failed reload's error line")
            events = [json.loads(l) for l in d.log_lines()]
            at = next(i for i, e in enumerate(events) if failed(e))
            before = [e.get("request_id") for e in events[:at] if str(e.get("request_id")).startswith("before-")]
            self.assertEqual(before, [f"before-{i}" for i in range(20)])
            resp, _ = d.request("GET", "/v2/health/live", headers={**auth, "X-Request-Id": "after"})
            self.assertEqual(resp.status, 200)  # the old keys are kept
        finally:
            self.assertEqual(d.stop(), 0)
            if os.path.exists(keys):
                os.unlink(keys)
        order = [(e["event"], e.get("request_id")) for e in map(json.loads, d.log_lines())]
        self.assertLess(order.index(("access", "after")), order.index(("exit", None)))
        self.assertEqual(sum(1 for ev, rid in order if ev == "access" and str(rid).startswith(("before-", "after"))),
                         21, "every line reached the log (the scrapes aside)")

    def test_text_format(self):
        d = Daemon("--log-format", "text")
        d.request("GET", "/v2/health/live")
        self.assertEqual(d.stop(), 0)
        access = [l for l in d.log_lines() if " access " in l]
        self.assertEqual(len(access), 1)
        self.assertRegex(access[0], r"^\d{4}-\d\d-\d\dT[0-9:.]+Z info access ")


if __name__ == "__main__":
    unittest.main()
