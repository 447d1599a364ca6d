"""A real browser calls tiled: Debian's chromium, headless, driven by selenium.

A page is served from a second local HTTP server (another port, so another
origin) and calls three daemons: one whose --cors-origins lists the page's
origin, the same with API keys, and one with CORS off. What a browser does on
its own is what is checked: the preflight, which answers a script may read,
which headers it may see, and Resource Timing's serverTiming (empty
cross-origin without Timing-Allow-Origin).

- From the listed origin: JSON, raw binary in and out, v2 binary tensor data,
  a 401 whose WWW-Authenticate the script reads, then the same with the key;
  Server-Timing read through Resource Timing.
- From an origin nobody listed (the same page as http://localhost:PORT, and
  the daemon with CORS off): a "simple" text/plain POST to v2 infer, which
  needs no preflight, gets 403 before its body is read: the script sees a
  network error, and the daemon's counters show no inference ran.
- A same-origin page (a document tiled itself served) calls it with no CORS
  at all.
- Clients that send no Origin (curl, tritonclient, perf_analyzer) are served
  as before by the same daemons, CORS on or off.

Screenshots of the page (its table of results) go to build/test-logs/.

Run from tests/server with the venv (selenium):
    TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest -v test_browser
"""
import http.server
import json
import os
import re
import subprocess
import tempfile
import threading
import unittest
import urllib.request

import numpy as np
import tritonclient.http as httpclient
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from harness.daemon import Daemon

KEY = "browser-key-0123456789abcdef"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SHOTS = os.path.join(ROOT, "build", "test-logs")
DEADLINE = 120  # seconds; only a hang reaches it

# The calling page: call() runs one fetch and adds a row to the table; the
# test reads the row it returns (status, every header the script may see,
# the body's bytes, or the error a refused request gives a script).
PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>tiled from another origin</title>
<style>
 body { font: 14px sans-serif; margin: 16px; }
 table { border-collapse: collapse; width: 100%; table-layout: fixed; }
 td { word-break: break-all; } th:nth-child(1) { width: 16em; } th:nth-child(2) { width: 7em; }
 td, th { border: 1px solid #999; padding: 3px 6px; text-align: left; vertical-align: top; }
 .ok { background: #d8f5d8; } .refused { background: #f8dcdc; }
 code { font-size: 12px; }
</style></head>
<body><h2 id="origin"></h2>
<table id="rows"><tr><th>call</th><th>status</th><th>what the script sees</th></tr></table>
<script>
document.getElementById("origin").textContent = "page origin: " + location.origin;
function summarize(row) {
  const h = row.headers, b = row.bytes, parts = ["server-timing: " + (h["server-timing"] || "(hidden)")];
  const n = h["inference-header-content-length"];
  if (h["www-authenticate"])
    parts.push("www-authenticate: " + h["www-authenticate"]);
  if (n !== undefined)
    parts.push("binary: " + n + " bytes of JSON, then " + JSON.stringify(b.slice(Number(n))));
  else if ((h["content-type"] || "").includes("json"))
    parts.push(new TextDecoder().decode(new Uint8Array(b)).slice(0, 100));
  else
    parts.push(h["x-tensor-dtype"] + " " + h["x-tensor-shape"] + " " + JSON.stringify(b));
  return parts.join(" | ");
}
function show(row) {
  const tr = document.createElement("tr");
  tr.className = row.error ? "refused" : "ok";
  const cells = [row.label, row.error ? "network error" : String(row.status), row.error || summarize(row)];
  for (const text of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
  }
  document.getElementById("rows").appendChild(tr);
}
async function call(label, url, method, headers, body, done) {
  const row = {label: label, url: url};
  try {
    const init = {method: method, headers: headers};
    if (body !== null)
      init.body = typeof body === "string" ? body : new Uint8Array(body);
    const r = await fetch(url, init);
    row.status = r.status;
    row.headers = {};
    r.headers.forEach((v, k) => { row.headers[k] = v; });
    row.bytes = Array.from(new Uint8Array(await r.arrayBuffer()));
  } catch (e) {
    row.error = e.name + ": " + e.message;
  }
  show(row);
  done(row);
}
</script></body></html>
"""

# Triton's binary tensor data: the JSON header, then the raw input bytes.
V2_HEADER = json.dumps({"inputs": [{"name": "input", "shape": [3], "datatype": "UINT8",
                                    "parameters": {"binary_data_size": 3}},
                                   {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}],
                        "parameters": {"binary_data_output": True}}).encode()
V2_JSON = json.dumps({"inputs": [{"name": "input", "shape": [2], "datatype": "INT32", "data": [7, 8]},
                                 {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [3]}]})
TILE_JSON = json.dumps({"input": {"dtype": "int8", "data": [1, 2]}, "repeats": [2]})


class PageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


def counters(d):
    """(v2 infer requests by status, inferences the model counted) of daemon d."""
    with urllib.request.urlopen(f"http://{d.host}:{d.port}/metrics", timeout=60) as r:
        text = r.read().decode()
    by_code = {}
    pattern = r'tiled_requests_total\{transport="http",route="([^"]*)",format="[^"]*",code="([^"]*)"\} (\d+)'
    for m in re.finditer(pattern, text):
        by_code[(m.group(1), m.group(2))] = by_code.get((m.group(1), m.group(2)), 0) + int(m.group(3))
    with urllib.request.urlopen(f"http://{d.host}:{d.port}/v2/models/tile/stats", timeout=60) as r:
        stats = json.load(r)
    return by_code, sum(s["inference_count"] for s in stats["model_stats"])


class Browser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
        threading.Thread(target=cls.pages.serve_forever, daemon=True).start()
        cls.page_port = cls.pages.server_address[1]
        cls.page_origin = f"http://127.0.0.1:{cls.page_port}"
        with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
            f.write(KEY + "\n")
        cls.keyfile = f.name
        cls.daemons = []
        cls.cors = cls.start_daemon("--cors-origins", cls.page_origin)
        cls.keyed = cls.start_daemon("--cors-origins", cls.page_origin, "--api-key-file", cls.keyfile)
        cls.plain = cls.start_daemon()
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=1400,900"):
            options.add_argument(arg)
        # The Debian driver, named, so selenium never looks for one online.
        cls.driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        cls.driver.set_script_timeout(DEADLINE)
        cls.driver.set_page_load_timeout(DEADLINE)
        os.makedirs(SHOTS, exist_ok=True)

    @classmethod
    def start_daemon(cls, *args):
        d = Daemon(*args)
        cls.daemons.append(d)
        return d

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.pages.shutdown()
        cls.pages.server_close()
        codes = [d.stop() for d in cls.daemons]
        os.unlink(cls.keyfile)
        assert codes == [0, 0, 0], f"daemon exit statuses {codes}"

    def open_page(self, origin):
        self.driver.get(origin + "/")
        WebDriverWait(self.driver, DEADLINE).until(
            lambda d: d.execute_script("return typeof call === 'function' && document.readyState === 'complete'"))

    def call(self, label, url, method="GET", headers=None, body=None):
        return self.driver.execute_async_script(
            "call(arguments[0], arguments[1], arguments[2], arguments[3], arguments[4], arguments[5])",
            label, url, method, headers or {}, body)

    def server_timing(self, url):
        """The serverTiming names of url's Resource Timing entry, once there is one."""
        script = ("const e = performance.getEntriesByName(arguments[0]);"
                  "return e.length ? e[e.length - 1].serverTiming.map(s => s.name) : null;")
        return WebDriverWait(self.driver, DEADLINE).until(lambda d: d.execute_script(script, url))

    def shot(self, name):
        path = os.path.join(SHOTS, name)
        self.assertTrue(self.driver.save_screenshot(path))
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        return path

    @staticmethod
    def base(d):
        return f"http://{d.host}:{d.port}"

    def test_listed_origin_calls_with_json_raw_and_v2_binary(self):
        self.open_page(self.page_origin)
        base = self.base(self.cors)
        # JSON (application/json: preflighted).
        url = base + "/v1/tile"
        row = self.call("JSON /v1/tile", url, "POST", {"Content-Type": "application/json"}, TILE_JSON)
        self.assertEqual(row["status"], 200, row)
        self.assertEqual(json.loads(bytes(row["bytes"]))["output"]["data"], [1, 2, 1, 2])
        self.assertRegex(row["headers"]["x-request-id"], r"\S")
        self.assertIn("total;dur=", row["headers"]["server-timing"])
        # Resource Timing shows Server-Timing only with Timing-Allow-Origin.
        self.assertEqual(self.server_timing(url), ["queue", "decode", "tile", "encode", "total"])
        # Raw binary in and out.
        url = base + "/v1/tile?dtype=uint8&shape=3&repeats=2"
        row = self.call("raw /v1/tile", url, "POST", {"Content-Type": "application/octet-stream"}, [1, 2, 3])
        self.assertEqual(row["status"], 200, row)
        self.assertEqual(row["bytes"], [1, 2, 3, 1, 2, 3])
        self.assertEqual((row["headers"]["x-tensor-dtype"], row["headers"]["x-tensor-shape"]), ("uint8", "[6]"))
        self.assertIn("tile", self.server_timing(url))
        # v2 JSON, and v2 with binary tensor data (its own header: preflighted).
        url = base + "/v2/models/tile/infer"
        row = self.call("v2 JSON infer", url, "POST", {"Content-Type": "application/json"}, V2_JSON)
        self.assertEqual(row["status"], 200, row)
        self.assertEqual(json.loads(bytes(row["bytes"]))["outputs"][0]["data"], [7, 8] * 3)
        url = base + "/v2/models/tile/versions/13/infer"
        row = self.call("v2 binary infer", url, "POST",
                        {"Content-Type": "application/octet-stream",
                         "Inference-Header-Content-Length": str(len(V2_HEADER))},
                        list(V2_HEADER) + [1, 2, 3])
        self.assertEqual(row["status"], 200, row)
        n = int(row["headers"]["inference-header-content-length"])
        self.assertEqual(json.loads(bytes(row["bytes"][:n]))["outputs"][0]["shape"], [6])
        self.assertEqual(row["bytes"][n:], [1, 2, 3, 1, 2, 3])
        self.assertEqual(self.server_timing(url), ["queue", "decode", "tile", "encode", "total"])
        # API keys: without one a 401 the script can read, challenge included;
        # the preflight itself needs none. Then with the key.
        base = self.base(self.keyed)
        row = self.call("v2 infer, no key", base + "/v2/models/tile/infer", "POST",
                        {"Content-Type": "application/json"}, V2_JSON)
        self.assertEqual(row["status"], 401, row)
        self.assertEqual(row["headers"]["www-authenticate"], 'Bearer realm="tiled"')
        self.assertIn("API key", json.loads(bytes(row["bytes"]))["error"])
        row = self.call("v2 binary infer, key", base + "/v2/models/tile/infer", "POST",
                        {"Content-Type": "application/octet-stream", "Authorization": "Bearer " + KEY,
                         "Inference-Header-Content-Length": str(len(V2_HEADER))},
                        list(V2_HEADER) + [1, 2, 3])
        self.assertEqual(row["status"], 200, row)
        self.assertEqual(row["bytes"][int(row["headers"]["inference-header-content-length"]):], [1, 2, 3] * 2)
        self.shot("browser-listed-origin.png")

    def test_refused_origin_does_no_work(self):
        # The same page server, named otherwise: http://localhost:PORT is
        # another origin, listed nowhere.
        origin = f"http://localhost:{self.page_port}"
        self.open_page(origin)
        self.assertEqual(self.driver.execute_script("return location.origin"), origin)
        for d, label in ((self.plain, "CORS off"), (self.cors, "CORS on, not listed")):
            with self.subTest(daemon=label):
                before, inferred = counters(d)
                # A "simple" request: no preflight, the body goes with it.
                row = self.call(f"text/plain v2 infer ({label})", self.base(d) + "/v2/models/tile/infer", "POST",
                                {"Content-Type": "text/plain"}, V2_JSON)
                self.assertEqual(row.get("error", "")[:9], "TypeError", row)
                after, inferred_after = counters(d)
                self.assertEqual(inferred_after, inferred, "no inference ran")
                self.assertEqual(after.get(("other", "403"), 0), before.get(("other", "403"), 0) + 1)
                self.assertEqual({k: v for k, v in after.items() if "infer" in k[0]},
                                 {k: v for k, v in before.items() if "infer" in k[0]})
                # JSON: its preflight is refused, so the request never leaves.
                row = self.call(f"JSON v2 infer ({label})", self.base(d) + "/v2/models/tile/infer", "POST",
                                {"Content-Type": "application/json"}, V2_JSON)
                self.assertEqual(row.get("error", "")[:9], "TypeError", row)
                self.assertEqual(counters(d)[1], inferred, "no inference ran")
        self.shot("browser-refused-origin.png")

    def test_same_origin_page_needs_no_cors(self):
        # A document tiled served itself is at home there: its POSTs carry an
        # Origin (Chrome sends it on every POST) equal to tiled's own.
        base = self.base(self.plain)
        self.driver.get(base + "/v2/health/ready")
        self.assertEqual(self.driver.execute_script("return location.origin"), base)
        _, inferred = counters(self.plain)
        row = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/v2/models/tile/infer',"
            " {method: 'POST', headers: {'Content-Type': 'text/plain'}, body: arguments[0]})"
            ".then(async r => done({status: r.status, body: await r.text(),"
            " timing: r.headers.get('server-timing')})).catch(e => done({error: String(e)}));", V2_JSON)
        self.assertEqual(row.get("status"), 200, row)
        self.assertEqual(json.loads(row["body"])["outputs"][0]["data"], [7, 8] * 3)
        self.assertIn("tile;dur=", row["timing"])
        self.assertEqual(counters(self.plain)[1], inferred + 1)
        # Same origin: Resource Timing has Server-Timing without any header.
        self.assertEqual(self.server_timing(base + "/v2/models/tile/infer"),
                         ["queue", "decode", "tile", "encode", "total"])


    def test_clients_without_origin_are_unaffected(self):
        """curl, tritonclient and perf_analyzer send no Origin: never refused."""
        for d, label in ((self.cors, "CORS on"), (self.plain, "CORS off")):
            with self.subTest(daemon=label):
                before, inferred = counters(d)
                r = subprocess.run(["curl", "-sS", "-f", "-D", "-", self.base(d) + "/v2/models/tile/infer",
                                    "-d", V2_JSON], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn('"data":[7,8,7,8,7,8]', r.stdout)
                self.assertNotIn("access-control-allow-origin", r.stdout.lower())
                client = httpclient.InferenceServerClient(f"{d.host}:{d.port}")
                inputs = [httpclient.InferInput("input", [3], "UINT8"), httpclient.InferInput("repeats", [1], "INT64")]
                inputs[0].set_data_from_numpy(np.array([1, 2, 3], dtype=np.uint8), binary_data=True)
                inputs[1].set_data_from_numpy(np.array([2], dtype=np.int64), binary_data=True)
                result = client.infer("tile", inputs)
                client.close()
                self.assertEqual(result.as_numpy("output").tolist(), [1, 2, 3, 1, 2, 3])
                data = os.path.join(tempfile.mkdtemp(), "tile.json")
                with open(data, "w") as f:
                    json.dump({"data": [{"input": {"content": [1.0, 2.0, 3.0, 4.0], "shape": [4]},
                                         "repeats": {"content": [2], "shape": [1]}}]}, f)
                r = subprocess.run(["sh", "scripts/perf_analyzer.sh", "-m", "tile", "-x", "13", "-u",
                                    f"{d.host}:{d.port}", "-i", "http", "--input-data", data,
                                    "--concurrency-range", "1", "--measurement-interval", "300", "-s", "1000",
                                    "-r", "5"], cwd=ROOT, capture_output=True, text=True, timeout=600)
                os.unlink(data)
                os.rmdir(os.path.dirname(data))
                out = r.stdout + r.stderr
                self.assertEqual(r.returncode, 0, out[-3000:])
                self.assertNotIn("error", out.lower())
                sent = int(re.search(r"Client:\s+Request count: (\d+)", out).group(1))
                self.assertGreater(sent, 0)
                after, inferred_after = counters(d)
                self.assertGreaterEqual(inferred_after, inferred + 2 + sent)
                self.assertEqual(after.get(("other", "403"), 0), before.get(("other", "403"), 0), "nothing refused")

if __name__ == "__main__":
    unittest.main()
