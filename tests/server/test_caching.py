"""HTTP caching and the methods tiled answers, against the daemon (RFC 9110, RFC 9111).

- A fixed document (/openapi.json, server and model metadata, model configuration)
  carries a strong ETag, the same on every GET, and Cache-Control: no-cache: If-None-Match
  with that tag (in a list, weak or not) or "*" gets 304 Not Modified without a body, the
  tag and Cache-Control kept; an If-Match that names none of its tags gets 412, "*" passes.
  /openapi.json's gzip and deflate forms have tags of their own.
- An answer that changes between requests (health, readiness, statistics, metrics,
  shared-memory status) carries Cache-Control: no-store.
- POST /v1/tile and /metrics pick their body by Accept: Vary lists Accept and
  Accept-Encoding.
- x-gzip is gzip (RFC 9110 8.4.1.3), in Content-Encoding and in Accept-Encoding.
- OPTIONS * answers 204 with the server's methods in Allow; a method HTTP does not define
  gets 501 wherever it is sent, a defined one a route does not serve 405 with Allow.
- curl's own conditional GET (--etag-save, --etag-compare) gets its 304.
- REDbot (PyPI `redbot`, lint for HTTP) run over every GET route finds nothing it rates
  bad, no heuristic freshness on the fixed documents and If-None-Match answered 304.

Run from tests/server with the virtual environment scripts/venv.sh makes:
    TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest test_caching -v
"""
import gzip
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

from harness.daemon import DaemonCase

REGION = "caching"
SHM_KEY = f"/tiled-test-caching-{os.getpid()}"

FIXED = ["/openapi.json", "/v2", "/v2/", "/v2/models/tile", "/v2/models/tile/config"] + [
    f"/v2/models/tile/versions/{v}{action}" for v in (1, 6, 13) for action in ("", "/config")]
DYNAMIC = ["/v2/health/live", "/v2/health/ready", "/v2/models/tile/ready", "/v2/models/tile/versions/6/ready",
           "/v2/models/stats", "/v2/models/tile/stats", "/v2/models/tile/versions/13/stats", "/metrics",
           "/v2/systemsharedmemory/status", f"/v2/systemsharedmemory/region/{REGION}/status",
           "/v2/cudasharedmemory/status"]
TAG = re.compile(r'"[0-9a-f]{16}"')
TILE = json.dumps({"input": {"dtype": "int16", "shape": [4], "data": [1, -2, 3, 4]}, "repeats": [3]}).encode()
REDBOT = os.path.join(os.path.dirname(sys.executable), "redbot")


def listed(value):
    return {v.strip().lower() for v in (value or "").split(",") if v.strip()}


class LiveDaemon(DaemonCase):
    """A daemon with system shared memory on and one region registered, so that every
    GET route answers 200."""

    daemon_args = ("--shared-memory", "system")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.shm_path = "/dev/shm/" + SHM_KEY.lstrip("/")
        with open(cls.shm_path, "wb") as f:
            f.truncate(4096)
        body = json.dumps({"key": SHM_KEY, "offset": 0, "byte_size": 4096}).encode()
        resp, data = cls.d.request("POST", f"/v2/systemsharedmemory/region/{REGION}/register", body)
        assert resp.status == 200, data

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.request("POST", f"/v2/systemsharedmemory/region/{REGION}/unregister", b"")
            os.unlink(cls.shm_path)
        finally:
            super().tearDownClass()

    def get(self, path, method="GET", **headers):
        return self.d.request(method, path, headers=headers)


class FixedDocuments(LiveDaemon):

    def test_tagged_and_no_cache(self):
        for path in FIXED:
            with self.subTest(path=path):
                resp, body = self.get(path)
                self.assertEqual(resp.status, 200, body[:200])
                self.assertRegex(resp.getheader("ETag"), TAG)
                self.assertEqual(resp.getheader("Cache-Control"), "no-cache")
                again, body2 = self.get(path)
                self.assertEqual((again.getheader("ETag"), body2), (resp.getheader("ETag"), body))
                head, nothing = self.get(path, "HEAD")
                self.assertEqual((head.status, nothing), (200, b""))
                self.assertEqual(head.getheader("ETag"), resp.getheader("ETag"))
                self.assertEqual(head.getheader("Cache-Control"), "no-cache")

    def test_tag_follows_the_bytes(self):
        """Two documents have one tag exactly when they are the same bytes (/v2 and /v2/, the
        default version and version 1, versions whose metadata is alike)."""
        got = {path: self.get(path) for path in FIXED}
        for a in FIXED:
            for b in FIXED:
                same_body = got[a][1] == got[b][1]
                self.assertEqual(got[a][0].getheader("ETag") == got[b][0].getheader("ETag"), same_body, (a, b))
        self.assertGreater(len({resp.getheader("ETag") for resp, _ in got.values()}), 5)

    def test_if_none_match_is_answered_304(self):
        for path in FIXED:
            resp, body = self.get(path)
            tag = resp.getheader("ETag")
            for value in (tag, f'"nope", {tag}', f'W/"nope", W/{tag}', "*", f'"a,b",{tag}'):
                for method in ("GET", "HEAD"):
                    with self.subTest(path=path, value=value, method=method):
                        r, data = self.get(path, method, **{"If-None-Match": value})
                        self.assertEqual((r.status, data), (304, b""))
                        self.assertEqual(r.getheader("ETag"), tag)
                        self.assertEqual(r.getheader("Cache-Control"), "no-cache")
                        self.assertIsNone(r.getheader("Content-Type"))
                        # RFC 9110 8.6: absent, or the length of the 200's body, never 0.
                        self.assertIn(r.getheader("Content-Length"), (None, str(len(body))))
            with self.subTest(path=path, value="another tag"):
                r, data = self.get(path, **{"If-None-Match": '"0123456789abcdef", W/"x"'})
                self.assertEqual((r.status, data), (200, body))

    def test_if_match(self):
        for path in FIXED:
            resp, body = self.get(path)
            tag = resp.getheader("ETag")
            for value in ("*", tag, f'"nope", {tag}'):
                with self.subTest(path=path, value=value):
                    r, data = self.get(path, **{"If-Match": value})
                    self.assertEqual((r.status, data), (200, body))
            # The strong comparison: a weak tag never matches (RFC 9110 13.1.1).
            for value in ('"x"', f"W/{tag}", '"nope", "0123456789abcdef"'):
                with self.subTest(path=path, value=value):
                    r, data = self.get(path, **{"If-Match": value})
                    self.assertEqual(r.status, 412, data)
                    self.assertIn("If-Match", json.loads(data)["error"])
            # If-Match is read first: it fails, whatever If-None-Match says.
            r, _ = self.get(path, **{"If-Match": '"x"', "If-None-Match": tag})
            self.assertEqual(r.status, 412)

    def test_openapi_tag_per_coding(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "api", "openapi.json"), "rb") as f:
            doc = f.read()
        plain, body = self.get("/openapi.json")
        self.assertEqual(body, doc)
        tag = plain.getheader("ETag")
        forms = {"gzip": gzip.decompress, "x-gzip": gzip.decompress, "deflate": zlib.decompress}
        for offer, decode in forms.items():
            with self.subTest(offer=offer):
                resp, data = self.get("/openapi.json", **{"Accept-Encoding": offer})
                coding = "deflate" if offer == "deflate" else "gzip"
                self.assertEqual(resp.getheader("Content-Encoding"), coding)
                self.assertEqual(decode(data), doc)
                self.assertEqual(resp.getheader("ETag"), tag[:-1] + f'-{coding}"')
                self.assertEqual(resp.getheader("Vary"), "Accept-Encoding")
                again, _ = self.get("/openapi.json", **{"Accept-Encoding": offer})
                self.assertEqual(again.getheader("ETag"), resp.getheader("ETag"))
                r, nothing = self.get("/openapi.json", **{"Accept-Encoding": offer,
                                                          "If-None-Match": resp.getheader("ETag")})
                self.assertEqual((r.status, nothing), (304, b""))
                self.assertEqual(r.getheader("Vary"), "Accept-Encoding")
                self.assertEqual(r.getheader("Content-Length"), str(len(data)))
                # The identity form's tag does not stand for this one, nor this one's for it.
                r, _ = self.get("/openapi.json", **{"Accept-Encoding": offer, "If-None-Match": tag})
                self.assertEqual(r.status, 200)
                r, _ = self.get("/openapi.json", **{"If-None-Match": resp.getheader("ETag")})
                self.assertEqual(r.status, 200)

    def test_curl_conditional_get(self):
        """curl saves the tag of a 200 (--etag-save) and sends it back (--etag-compare)."""
        curl = shutil.which("curl")
        self.assertIsNotNone(curl, "curl is a test dependency (scripts/deps.sh test)")
        with tempfile.TemporaryDirectory() as tmp:
            saved = os.path.join(tmp, "etag")
            for path in ("/openapi.json", "/v2/models/tile/config"):
                with self.subTest(path=path):
                    url = f"http://{self.d.host}:{self.d.port}{path}"
                    first = subprocess.run([curl, "-sS", "-o", os.devnull, "-w", "%{http_code}", "--etag-save",
                                            saved, url], capture_output=True, text=True, timeout=60)
                    self.assertEqual(first.stdout, "200", first.stderr)
                    with open(saved) as f:
                        self.assertRegex(f.read().strip(), TAG)
                    second = subprocess.run([curl, "-sS", "-o", os.devnull, "-w", "%{http_code}",
                                             "--etag-compare", saved, url], capture_output=True, text=True,
                                            timeout=60)
                    self.assertEqual(second.stdout, "304", second.stderr)


class DynamicAnswers(LiveDaemon):

    def test_no_store(self):
        for path in DYNAMIC:
            for method in ("GET", "HEAD"):
                with self.subTest(path=path, method=method):
                    resp, body = self.get(path, method)
                    self.assertEqual(resp.status, 200, body[:200])
                    self.assertEqual(resp.getheader("Cache-Control"), "no-store")
                    self.assertIsNone(resp.getheader("ETag"))
                    # No validator, so nothing to revalidate: the answer is sent.
                    resp, body = self.get(path, method, **{"If-None-Match": "*"})
                    self.assertEqual(resp.status, 200)

    def test_metrics_vary_by_accept(self):
        for accept, media in (("", "text/plain"), ("application/openmetrics-text", "application/openmetrics-text")):
            with self.subTest(accept=accept):
                resp, _ = self.get("/metrics", Accept=accept)
                self.assertTrue(resp.getheader("Content-Type").startswith(media))
                self.assertEqual(listed(resp.getheader("Vary")), {"accept", "accept-encoding"})

    def test_x_gzip_accepted(self):
        resp, body = self.get("/metrics", **{"Accept-Encoding": "x-gzip"})
        self.assertEqual(resp.getheader("Content-Encoding"), "gzip")
        self.assertIn(b"tiled_requests_total", gzip.decompress(body))


class Negotiation(LiveDaemon):

    def tile(self, body=TILE, **headers):
        return self.d.request("POST", "/v1/tile", body, {"Content-Type": "application/json", **headers})

    def test_v1_varies_by_accept(self):
        for accept, media in (("", "application/json"), ("application/json", "application/json"),
                              ("application/x-npy", "application/x-npy"),
                              ("application/octet-stream", "application/octet-stream")):
            with self.subTest(accept=accept):
                resp, body = self.tile(Accept=accept)
                self.assertEqual(resp.status, 200, body[:200])
                self.assertEqual(resp.getheader("Content-Type"), media)
                self.assertEqual(resp.getheader("Vary"), "Accept, Accept-Encoding")
        resp, body = self.tile(Accept="text/html")
        self.assertEqual(resp.status, 406, body)
        self.assertIn("accept", listed(resp.getheader("Vary")))

    def test_x_gzip_request_body(self):
        resp, body = self.tile(gzip.compress(TILE), **{"Content-Encoding": "x-gzip"})
        self.assertEqual(resp.status, 200, body)
        self.assertEqual(json.loads(body)["output"]["data"], [1, -2, 3, 4] * 3)
        resp, body = self.tile(b"not gzip", **{"Content-Encoding": "x-gzip"})
        self.assertEqual(resp.status, 400, body)
        self.assertIn("gzip", json.loads(body)["error"])


class Methods(LiveDaemon):

    def test_options_asterisk(self):
        conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=60)
        try:
            conn.request("OPTIONS", "*")
            resp = conn.getresponse()
            body = resp.read()
            self.assertEqual((resp.status, body), (204, b""))
            self.assertEqual(listed(resp.getheader("Allow")), {"get", "head", "post", "options"})
            # The connection stays open for the next request.
            conn.request("GET", "/v2/health/live")
            self.assertEqual(conn.getresponse().status, 200)
        finally:
            conn.close()
        # Only OPTIONS is asked of the server itself; a resource has no OPTIONS route.
        resp, _ = self.d.request("OPTIONS", "/v2")
        self.assertEqual(resp.status, 405)

    def test_unknown_method_is_501(self):
        for method, path in (("FOO", "/v2"), ("FOO", "/v2/models/tile"), ("FOO", "/nowhere"),
                             ("BREW", "/v1/tile"), ("get", "/v2/health/live")):
            with self.subTest(method=method, path=path):
                resp, body = self.d.request(method, path)
                self.assertEqual(resp.status, 501, body)
                error = json.loads(body)["error"]
                self.assertTrue(error.startswith(f"method {method} is unknown to this server (it answers GET"), error)
                self.assertEqual(resp.getheader("Content-Type"), "application/json")

    def test_known_method_not_served_is_405(self):
        for method, path, allow in (("DELETE", "/v2", {"get", "head"}), ("PUT", "/v1/tile", {"post"}),
                                    ("PATCH", "/metrics", {"get", "head"}), ("POST", "/openapi.json", {"get", "head"}),
                                    ("TRACE", "/v2/health/live", {"get", "head"}),
                                    ("DELETE", "/v2/models/tile/config", {"get", "head"})):
            with self.subTest(method=method, path=path):
                resp, body = self.d.request(method, path)
                self.assertEqual(resp.status, 405, body)
                self.assertEqual(listed(resp.getheader("Allow")), allow)
                self.assertIn("error", json.loads(body))


def notes(messages):
    """REDbot's notes of one HAR entry and their subnotes, flattened."""
    for m in messages:
        yield m
        yield from notes(m.get("subnotes", []))


class RedBot(LiveDaemon):
    """`redbot -o har URL` (REDbot's command-line tool; HAR is JSON, each note with its id
    and level) over every GET route, all at once: REDbot makes its own follow-up requests
    (conditional, compressed, ranged) to each."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        assert os.path.exists(REDBOT), f"{REDBOT} not found: run with the venv's python (scripts/venv.sh)"
        runs = {path: subprocess.Popen([REDBOT, "-o", "har", f"http://{cls.d.host}:{cls.d.port}{path}"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for path in FIXED + DYNAMIC}
        cls.reports = {}
        for path, run in runs.items():
            out, err = run.communicate(timeout=300)
            assert run.returncode == 0, f"redbot {path}: exit {run.returncode}: {err.decode()[-2000:]}"
            cls.reports[path] = json.loads(out)
        summary = []
        for path, report in cls.reports.items():
            levels = {}
            for entry in report["log"]["entries"]:
                for n in notes(entry["_red_messages"]):
                    levels[n["level"].lower()] = levels.get(n["level"].lower(), 0) + 1
            summary.append(f"  {path}: " + ", ".join(f"{k} {v}" for k, v in sorted(levels.items())))
        print("\nREDbot (redbot -o har URL), notes by level:\n" + "\n".join(summary))

    def notes_of(self, path):
        report = self.reports[path]
        self.assertNotIn("_red_error", report["log"], path)
        entries = report["log"]["entries"]
        self.assertEqual(len(entries), 1, path)
        self.assertEqual(entries[0]["response"]["status"], 200, path)
        return list(notes(entries[0]["_red_messages"]))

    def test_nothing_bad(self):
        for path in FIXED + DYNAMIC:
            with self.subTest(path=path):
                bad = [f"{n['note_id']}: {n['summary']}" for n in self.notes_of(path) if n["level"].lower() == "bad"]
                self.assertEqual(bad, [])

    def test_fixed_documents_revalidate(self):
        for path in FIXED:
            with self.subTest(path=path):
                ids = {n["note_id"] for n in self.notes_of(path)}
                self.assertNotIn("FRESHNESS_HEURISTIC", ids)
                self.assertIn("FRESHNESS_NO_CACHE", ids)
                self.assertIn("INM_304", ids)  # REDbot's own If-None-Match got its 304
                self.assertNotIn("MISSING_HDRS_304", ids)
                warned = [n["note_id"] for n in self.notes_of(path)
                          if n["level"].lower() == "warn" and n["category"] in ("CACHING", "VALIDATION")]
                self.assertEqual(warned, [])

    def test_dynamic_answers_not_stored(self):
        for path in DYNAMIC:
            with self.subTest(path=path):
                ids = {n["note_id"] for n in self.notes_of(path)}
                self.assertIn("STORE_NO_STORE", ids)
                self.assertNotIn("FRESHNESS_HEURISTIC", ids)


if __name__ == "__main__":
    unittest.main()
