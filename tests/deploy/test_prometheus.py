"""deploy/prometheus and deploy/grafana against a real Prometheus.

promtool checks and unit-tests the rules (tests/deploy/rules_test.yml); then
Debian's prometheus binary is started on loopback with the shipped
deploy/prometheus/prometheus.yml (only its target, key file path, rules path
and interval changed), scraping a tiled daemon that has API keys on (gRPC and
shared memory too) every second while the test loads it with
inference requests, refusals and errors, and every rule expression and every
dashboard panel query is evaluated through Prometheus' HTTP API until each
returns data. An alert's expression is evaluated with its comparison made a
`bool` one (`x > bool 0.01`), so it answers whether or not the alert fires.
Prometheus 2 asks for OpenMetrics first, so its scrape also reads that format;
the test checks the same text with prometheus_client's OpenMetrics parser.
Run with the virtual environment scripts/venv.sh makes:
  cd tests/deploy && TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest test_prometheus
"""
import gzip
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

import yaml
from prometheus_client.openmetrics import parser as om_parser

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BIN = os.path.abspath(os.environ.get("TILED_BIN", os.path.join(ROOT, "build", "tiled")))
RULES = os.path.join(ROOT, "deploy", "prometheus", "rules.yml")
SHIPPED = os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")
KEY = "prometheus-scrape-key"
AUTH = {"Authorization": "Bearer " + KEY}
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "tiled.json")
DEADLINE = 180  # seconds; only a hang reaches it
TILE = b'{"input":{"dtype":"int8","shape":[1],"data":[1]},"repeats":[3]}'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def boolean(expr):
    """An alert expression whose comparisons answer 0 or 1 instead of filtering."""
    return re.sub(r"\s(>=|<=|==|!=|>|<)\s", r" \1 bool ", expr)


def rule_exprs():
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    out = []
    for g in doc["groups"]:
        for r in g["rules"]:
            if "record" in r:
                out.append(("record " + r["record"], r["expr"]))
            else:
                out.append(("alert " + r["alert"], boolean(r["expr"])))
    return out


def panel_exprs():
    with open(DASHBOARD) as f:
        doc = json.load(f)
    return [("panel %r %s" % (p["title"], t["refId"]), t["expr"]) for p in doc["panels"] for t in p["targets"]]


def get(port, path, headers=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r, r.read()
    finally:
        c.close()


class LivePrometheus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.procs = []
        cls.tmp = tempfile.mkdtemp(prefix="tiled-prom-")
        cls.stop_load = threading.Event()
        try:
            cls.start_tiled()
            cls.start_prometheus()
        except BaseException:
            cls.tearDownClass()
            raise
        cls.loader = threading.Thread(target=cls.load, daemon=True)
        cls.loader.start()

    @classmethod
    def tearDownClass(cls):
        cls.stop_load.set()
        if getattr(cls, "loader", None):
            cls.loader.join(60)
        for p in reversed(cls.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def start_tiled(cls):
        cls.tiled_log = open(os.path.join(cls.tmp, "tiled.log"), "a+b")  # appended: the offset is shared
        cls.key_file = os.path.join(cls.tmp, "tiled-api-key")
        with open(cls.key_file, "w") as f:
            f.write(KEY + "\n")
        p = subprocess.Popen([BIN, "serve", "--port", "0", "--grpc-port", "0", "--shared-memory", "system",
                              "--api-key-file", cls.key_file, "--log-level", "warn"],
                             stdout=subprocess.PIPE, stderr=cls.tiled_log)
        cls.procs.append(p)
        line = p.stdout.readline().decode()  # the first line comes once it listens
        m = re.fullmatch(r"listening on http://127\.0\.0\.1:(\d+)\n", line)
        assert m, "unexpected first line %r" % line
        cls.tiled_port = int(m.group(1))

    @classmethod
    def start_prometheus(cls):
        cls.prom_port = free_port()
        with open(SHIPPED) as f:
            config = yaml.safe_load(f)
        config["global"].update({"scrape_interval": "1s", "evaluation_interval": "1s"})
        config["rule_files"] = [os.path.abspath(RULES)]
        (job,) = config["scrape_configs"]
        job["authorization"]["credentials_file"] = cls.key_file
        job["static_configs"] = [{"targets": ["127.0.0.1:%d" % cls.tiled_port]}]
        path = os.path.join(cls.tmp, "prometheus.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        cls.prom_log = open(os.path.join(cls.tmp, "prometheus.log"), "a+b")  # appended: the offset is shared
        cls.procs.append(subprocess.Popen(
            [shutil.which("prometheus"), "--config.file=" + path, "--storage.tsdb.path=" + os.path.join(cls.tmp, "data"),
             "--web.listen-address=127.0.0.1:%d" % cls.prom_port], stdout=cls.prom_log, stderr=subprocess.STDOUT))
        cls.wait(lambda: cls.ready(), "Prometheus ready")

    @classmethod
    def ready(cls):
        try:
            return get(cls.prom_port, "/-/ready", timeout=5)[0].status == 200
        except OSError:
            return False

    @classmethod
    def wait(cls, cond, what):
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            if cond():
                return
            if any(p.poll() is not None for p in cls.procs):
                raise AssertionError("a process exited while waiting for " + what)
            time.sleep(0.2)  # a poll interval: cond() decides
        prom = open(os.path.join(cls.tmp, "prometheus.log"), errors="replace").read()[-3000:]
        raise AssertionError("timed out waiting for %s\n%s" % (what, prom))

    @classmethod
    def load(cls):
        """Inference requests, a 404 and a 501, over and over until told to stop."""
        while not cls.stop_load.is_set():
            try:
                c = http.client.HTTPConnection("127.0.0.1", cls.tiled_port, timeout=30)
                for _ in range(5):
                    c.request("POST", "/v1/tile", TILE, {"Content-Type": "application/json", **AUTH})
                    c.getresponse().read()
                c.request("GET", "/nope", headers=AUTH)
                c.getresponse().read()
                c.close()
                with socket.create_connection(("127.0.0.1", cls.tiled_port), timeout=30) as s:
                    s.sendall(b"POST /v1/tile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
                              + b"\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
                    while s.recv(4096):
                        pass
            except OSError:
                pass
            cls.stop_load.wait(0.05)  # pacing of the load, not synchronisation

    def query(self, expr):
        r, body = get(self.prom_port, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        doc = json.loads(body)
        self.assertEqual(doc.get("status"), "success", "%s: %s" % (expr, doc))
        return doc["data"]["result"]

    def test_rules_check_and_unit_tests(self):
        promtool = shutil.which("promtool")
        r = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = subprocess.run([promtool, "test", "rules", "rules_test.yml"], capture_output=True, text=True,
                           cwd=os.path.join(ROOT, "tests", "deploy"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS", r.stdout)

    def test_every_rule_and_panel_returns_data(self):
        exprs = rule_exprs() + panel_exprs()
        self.assertGreaterEqual(len([n for n, _ in exprs if n.startswith("alert")]), 6)
        self.assertGreaterEqual(len([n for n, _ in exprs if n.startswith("panel")]), 15)
        missing = {}

        def all_answer():
            missing.clear()
            for name, expr in exprs:
                if not self.query(expr):
                    missing[name] = expr
            return not missing

        try:
            self.wait(all_answer, "every expression to return data")
        except AssertionError as e:
            raise AssertionError("%s\nno data: %s" % (e, json.dumps(missing, indent=1))) from None
        # The 501s of the load are seen by the 5xx selectors alerts use.
        self.assertTrue(self.query('tiled_requests_total{code=~"5..",code="501"}'))
        up = self.query('up{job="tiled"}')
        self.assertEqual(up[0]["value"][1], "1", "the keyed scrape succeeds")

    def test_the_daemon_refuses_a_scrape_without_the_key(self):
        self.assertEqual(get(self.tiled_port, "/metrics")[0].status, 401)
        self.assertEqual(get(self.tiled_port, "/metrics", AUTH)[0].status, 200)

    def test_openmetrics_scrape_parses(self):
        accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        r, body = get(self.tiled_port, "/metrics", {"Accept": accept, "Accept-Encoding": "gzip", **AUTH})
        self.assertEqual(r.getheader("Content-Encoding"), "gzip")
        text = gzip.decompress(body).decode()
        families = {f.name: f for f in om_parser.text_string_to_metric_families(text)}
        self.assertEqual(families["tiled_requests"].type, "counter")
        self.assertEqual(families["tiled_request_duration_seconds"].type, "histogram")
        self.assertEqual(families["tiled_open_connections"].type, "gauge")
        routes = {s.labels.get("route") for s in families["tiled_request_duration_seconds"].samples}
        self.assertIn("/v1/tile", routes)


if __name__ == "__main__":
    unittest.main()
