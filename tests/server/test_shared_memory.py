"""Triton's system shared-memory extension, driven by tritonclient.http and
tritonclient.utils.shared_memory from PyPI, unmodified.

Run with the virtual environment scripts/venv.sh makes:
  build/venv/bin/python -m unittest tests/server/test_shared_memory.py
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest
import uuid
import zlib

import numpy as np
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.dirname(__file__))
from harness.daemon import Daemon  # noqa: E402
from harness.docs import doc_text  # noqa: E402
from harness.triton import error_of, perf_analyzer_shared_memory  # noqa: E402

# Every fixed-size datatype, as (wire name, numpy dtype of its bytes). BF16
# has no numpy type: its bytes travel as uint16 and tile like them.
FIXED = [("BOOL", np.bool_), ("INT8", np.int8), ("INT16", np.int16), ("INT32", np.int32), ("INT64", np.int64),
         ("UINT8", np.uint8), ("UINT16", np.uint16), ("UINT32", np.uint32), ("UINT64", np.uint64),
         ("FP16", np.float16), ("BF16", np.uint16), ("FP32", np.float32), ("FP64", np.float64),
         ("COMPLEX64", np.complex64), ("COMPLEX128", np.complex128)]
SHAPES = {0: ((), ()), 1: ((3,), (2,)), 2: ((2, 3), (2, 2)), 3: ((2, 1, 3), (1, 3, 2)),
          4: ((1, 2, 2, 3), (2, 1, 1, 2)), 5: ((2, 1, 2, 1, 3), (1, 2, 1, 3, 1)),
          6: ((1, 2, 1, 2, 1, 3), (2, 1, 2, 1, 2, 1))}
MIB = 1 << 20


def unique(prefix):
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class Region:
    """A client-side region created with tritonclient's helpers."""

    def __init__(self, size):
        self.name = unique("r")
        self.key = "/" + unique("tiled")
        self.size = size
        self.handle = shm.create_shared_memory_region(self.name, self.key, size)

    def path(self):
        return "/dev/shm/" + self.key.lstrip("/")

    def destroy(self):
        shm.destroy_shared_memory_region(self.handle)


class SharedMemoryBase(unittest.TestCase):
    args = ("--shared-memory", "system")

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(*cls.args)
        cls.client = httpclient.InferenceServerClient(f"127.0.0.1:{cls.d.port}", network_timeout=300)
        cls.regions = []

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        for r in cls.regions:
            r.destroy()
        assert cls.d.stop() == 0

    def region(self, size, register=True):
        r = Region(size)
        self.regions.append(r)
        if register:
            self.client.register_system_shared_memory(r.name, r.key, size)
        return r

    def inputs(self, region, data, repeats, dtype_name, data_offset=0, rep_offset=4096):
        # The helper cannot copy a 0-d array; its one element has the same bytes.
        shm.set_shared_memory_region(region.handle, [data.reshape(-1)], offset=data_offset)
        shm.set_shared_memory_region(region.handle, [repeats], offset=rep_offset)
        i0 = httpclient.InferInput("input", list(data.shape), dtype_name)
        i0.set_shared_memory(region.name, data.nbytes, offset=data_offset)
        i1 = httpclient.InferInput("repeats", [len(repeats)], "INT64")
        i1.set_shared_memory(region.name, repeats.nbytes, offset=rep_offset)
        return [i0, i1]

    def output(self, region, nbytes, offset=0):
        o = httpclient.InferRequestedOutput("output", binary_data=False)
        o.set_shared_memory(region.name, nbytes, offset=offset)
        return [o]

    def assert_serving(self):
        """The daemon is alive and a plain request still works."""
        self.assertIsNone(self.d.proc.poll(), "the daemon exited")
        self.assertTrue(self.client.is_server_live())
        i = httpclient.InferInput("input", [2], "INT32")
        i.set_data_from_numpy(np.array([1, 2], dtype=np.int32))
        r = httpclient.InferInput("repeats", [1], "INT64")
        r.set_data_from_numpy(np.array([2], dtype=np.int64))
        self.assertEqual(self.client.infer("tile", [i, r]).as_numpy("output").tolist(), [1, 2, 1, 2])

    def metric(self, name):
        _, body = self.d.request("GET", "/metrics")
        for line in body.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None


class SharedMemory(SharedMemoryBase):
    def test_metadata_lists_the_extension(self):
        self.assertIn("system_shared_memory", self.client.get_server_metadata()["extensions"])

    def test_readme_example(self):
        found = re.findall(r"<!-- shm-example -->\n```python\n(.*?)```\n```output\n(.*?)```", doc_text(), re.S)
        self.assertEqual(len(found), 1, "one shared-memory example in README.md and docs/")
        code, want = found[0]
        code = code.replace("127.0.0.1:8080", f"127.0.0.1:{self.d.port}")
        code = code.replace("/tiled_example_", f"/tiled_example_{os.getpid()}_")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), want.strip())

    def test_every_datatype_and_rank_against_numpy_tile(self):
        rng = np.random.default_rng(16)
        inp, out = self.region(MIB), self.region(MIB)
        for name, dt in FIXED:
            for rank, (shape, reps) in SHAPES.items():
                with self.subTest(datatype=name, rank=rank):
                    if dt == np.bool_:
                        a = rng.integers(0, 2, size=shape).astype(np.bool_)
                    elif np.issubdtype(dt, np.complexfloating):
                        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
                    elif np.issubdtype(dt, np.floating):
                        a = rng.standard_normal(shape).astype(dt)
                    else:
                        a = rng.integers(0, 100, size=shape).astype(dt)
                    a = np.asarray(a, dtype=dt).reshape(shape)
                    repeats = np.array(reps, dtype=np.int64)
                    want = np.tile(a, reps)
                    res = self.client.infer("tile", self.inputs(inp, a, repeats, name),
                                            outputs=self.output(out, want.nbytes + 64, offset=64))
                    meta = res.get_output("output")
                    self.assertEqual(meta["datatype"], name)
                    self.assertEqual(tuple(meta["shape"]), want.shape)
                    self.assertNotIn("data", meta)
                    got = shm.get_contents_as_numpy(out.handle, dt, [want.size], offset=64)
                    np.testing.assert_array_equal(got.reshape(want.shape), want)

    def test_status_and_unregister(self):
        r = self.region(8192)
        status = self.client.get_system_shared_memory_status(r.name)
        self.assertEqual(status, [{"name": r.name, "key": r.key, "offset": 0, "byte_size": 8192}])
        self.assertIn(r.name, [s["name"] for s in self.client.get_system_shared_memory_status()])
        self.assertGreaterEqual(self.metric("tiled_shm_mapped_bytes"), 8192)
        self.client.unregister_system_shared_memory(r.name)
        e = error_of(lambda: self.client.get_system_shared_memory_status(r.name))
        self.assertEqual(e.status(), "404")
        self.client.unregister_system_shared_memory(r.name)  # unknown: still 200, as Triton answers

    def test_register_body_with_a_content_encoding(self):
        """A register body sent gzip- or deflate-coded is read as it decodes, like an infer
        body; an unknown coding is 415 naming the codings taken, data that does not inflate 400."""
        for coding, pack in (("gzip", lambda b: zlib.compress(b, wbits=31)), ("deflate", zlib.compress)):
            with self.subTest(coding=coding):
                r = Region(8192)
                self.regions.append(r)
                body = json.dumps({"key": r.key, "offset": 0, "byte_size": 8192}).encode()
                resp, data = self.d.request("POST", f"/v2/systemsharedmemory/region/{r.name}/register", pack(body),
                                            {"Content-Type": "application/json", "Content-Encoding": coding})
                self.assertEqual((resp.status, data), (200, b""))
                self.assertEqual(self.client.get_system_shared_memory_status(r.name),
                                 [{"name": r.name, "key": r.key, "offset": 0, "byte_size": 8192}])
        r = Region(8192)
        self.regions.append(r)
        body = json.dumps({"key": r.key, "offset": 0, "byte_size": 8192}).encode()
        path = f"/v2/systemsharedmemory/region/{r.name}/register"
        resp, data = self.d.request("POST", path, body, {"Content-Encoding": "br"})
        self.assertEqual(resp.status, 415)
        self.assertIn("unsupported Content-Encoding 'br'", json.loads(data)["error"])
        self.assertEqual(resp.getheader("Accept-Encoding"), "gzip, deflate")
        resp, data = self.d.request("POST", path, b"not gzip at all", {"Content-Encoding": "gzip"})
        self.assertEqual(resp.status, 400)
        self.assertIn("error", json.loads(data))
        self.assertEqual(error_of(lambda: self.client.get_system_shared_memory_status(r.name)).status(), "404")
        self.assert_serving()

    def test_input_in_memory_output_in_body(self):
        inp = self.region(8192)
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        res = self.client.infer("tile", self.inputs(inp, a, np.array([1, 2], dtype=np.int64), "FP32"),
                                outputs=[httpclient.InferRequestedOutput("output", binary_data=True)])
        np.testing.assert_array_equal(res.as_numpy("output"), np.tile(a, (1, 2)))

    def test_latency_metrics_as_any_request(self):
        inp, out = self.region(8192), self.region(8192)
        a = np.arange(4, dtype=np.int32)
        before = self.client.get_inference_statistics("tile")["model_stats"][0]["inference_stats"]["success"]["count"]
        body = {"inputs": [{"name": "input", "shape": [4], "datatype": "INT32",
                            "parameters": {"shared_memory_region": inp.name, "shared_memory_byte_size": 16}},
                           {"name": "repeats", "shape": [1], "datatype": "INT64",
                            "parameters": {"shared_memory_region": inp.name, "shared_memory_byte_size": 8,
                                           "shared_memory_offset": 4096}}],
                "outputs": [{"name": "output", "parameters": {"shared_memory_region": out.name,
                                                              "shared_memory_byte_size": 32}}]}
        shm.set_shared_memory_region(inp.handle, [a])
        shm.set_shared_memory_region(inp.handle, [np.array([2], dtype=np.int64)], offset=4096)
        resp, data = self.d.request("POST", "/v2/models/tile/infer", json.dumps(body))
        self.assertEqual(resp.status, 200, data)
        self.assertIn("tile;dur=", resp.getheader("Server-Timing"))
        self.assertEqual(json.loads(data)["outputs"], [{"name": "output", "datatype": "INT32", "shape": [8]}])
        np.testing.assert_array_equal(shm.get_contents_as_numpy(out.handle, np.int32, [8]), np.tile(a, 2))
        after = self.client.get_inference_statistics("tile")["model_stats"][0]["inference_stats"]["success"]["count"]
        self.assertEqual(after, before + 1)

    def test_errors_are_clear_400s(self):
        inp, out = self.region(8192), self.region(4096)
        a = np.arange(512, dtype=np.float32)
        reps = np.array([4], dtype=np.int64)
        cases = {
            "should be at least 8192 bytes": lambda: self.client.infer(
                "tile", self.inputs(inp, a, reps, "FP32"), outputs=self.output(out, 4096)),
            "run past the end": lambda: self.client.infer(
                "tile", self.inputs(inp, a[:4], reps, "FP32"), outputs=self.output(out, 64, offset=4090)),
            "shared_memory_byte_size 16 but datatype INT64 and shape [1] need 8": lambda: self.client.infer("tile", [
                self.inputs(inp, a[:4], reps, "FP32")[0], self.bad_repeats(inp)], outputs=self.output(out, 64)),
            "no system shared memory region named 'nope'": lambda: self.client.infer(
                "tile", self.inputs(inp, a[:4], reps, "FP32"), outputs=self.output_named("nope")),
            "already registered": lambda: self.client.register_system_shared_memory(inp.name, inp.key, 8192),
            "smaller than offset + byte_size": lambda: self.client.register_system_shared_memory(
                unique("big"), inp.key, 8192, offset=4096),
        }
        for needle, call in cases.items():
            with self.subTest(needle):
                e = error_of(call)
                self.assertEqual(e.status(), "400", e.message())
                self.assertIn(needle, e.message())
        self.assert_serving()

    def bad_repeats(self, region):
        i = httpclient.InferInput("repeats", [1], "INT64")
        i.set_shared_memory(region.name, 16, offset=4096)  # 16 bytes for one INT64
        return i

    def output_named(self, name):
        o = httpclient.InferRequestedOutput("output")
        o.set_shared_memory(name, 64)
        return [o]

    def test_binary_data_and_shared_memory_conflict(self):
        out = self.region(4096)
        body = {"inputs": [{"name": "input", "shape": [1], "datatype": "INT32", "data": [1]},
                           {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}],
                "outputs": [{"name": "output", "parameters": {"binary_data": True, "shared_memory_region": out.name,
                                                              "shared_memory_byte_size": 8}}]}
        resp, data = self.d.request("POST", "/v2/models/tile/infer", json.dumps(body))
        self.assertEqual(resp.status, 400)
        self.assertIn("can't set both 'shared_memory_region' and 'binary_data'", json.loads(data)["error"])

    def test_unregister_while_in_use(self):
        """Unregistered mid-request: the request finishes on its mapping (or,
        if the unregister came first, gets a 400 naming the region); the
        mapping goes once the request ends."""
        inp, out = self.region(8192), self.region(256 * MIB)
        a = np.arange(1024, dtype=np.float32)
        reps = np.array([64 * 1024], dtype=np.int64)
        result = {}

        def run():
            # tritonclient.http's connections belong to the thread that made them.
            client = httpclient.InferenceServerClient(f"127.0.0.1:{self.d.port}", network_timeout=300)
            try:
                result["res"] = client.infer("tile", self.inputs(inp, a, reps, "FP32"),
                                                  outputs=self.output(out, 256 * MIB))
            except InferenceServerException as e:
                result["err"] = e
        t = threading.Thread(target=run)
        t.start()
        # Unregister while a worker tiles into the region (or, on a machine
        # fast enough, after the request is done: both outcomes are checked).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and t.is_alive() and not self.metric("tiled_busy_workers"):
            time.sleep(0.002)  # a poll interval: the gauge decides
        self.client.unregister_system_shared_memory(out.name)
        t.join()
        if "err" in result:
            self.assertEqual(result["err"].status(), "400")
            self.assertIn(out.name, result["err"].message())
        else:
            got = shm.get_contents_as_numpy(out.handle, np.float32, [256 * MIB // 4])
            np.testing.assert_array_equal(got[-1024:], a)
        self.assertNotIn(out.name, [s["name"] for s in self.client.get_system_shared_memory_status()])
        self.assert_serving()

    def test_hostile_keys_are_refused(self):
        r = self.region(4096, register=False)
        for key in ["/dev/shm/" + r.key.lstrip("/"), "/../" + r.key.lstrip("/"), "/a..b", "", "///", "/x y",
                    "/" + "k" * 300]:
            with self.subTest(key=key):
                e = error_of(lambda: self.client.register_system_shared_memory(unique("h"), key, 4096))
                self.assertEqual(e.status(), "400", e.message())
        self.assert_serving()

    def test_byte_size_past_the_end_and_overflow(self):
        r = self.region(4096, register=False)
        for offset, size in [(0, 8192), (4096, 1), (2**62, 2**62), (1, 2**63 - 1)]:
            with self.subTest(offset=offset, size=size):
                e = error_of(lambda: self.client.register_system_shared_memory(unique("p"), r.key, size, offset))
                self.assertEqual(e.status(), "400", e.message())
        self.assert_serving()

    def test_truncated_mid_request(self):
        """The client cuts its output object to 0 bytes while the kernel
        writes into it: the request fails, the daemon serves on."""
        inp = self.region(8192)
        a = np.arange(1024, dtype=np.float32)
        reps = np.array([128 * 1024], dtype=np.int64)
        seen = set()
        for attempt in range(8):
            out = self.region(512 * MIB)
            stop = threading.Event()

            def cut(path=out.path(), delay=0.002 * attempt):
                time.sleep(delay)  # not synchronisation: each attempt cuts at another point of the request
                os.truncate(path, 0)
                stop.set()
            t = threading.Thread(target=cut)
            t.start()
            try:
                self.client.infer("tile", self.inputs(inp, a, reps, "FP32"), outputs=self.output(out, 512 * MIB))
                seen.add("ok")
            except InferenceServerException as e:
                self.assertEqual(e.status(), "400", e.message())
                seen.add("truncated" if "truncated" in e.message() else "shrunk")
                self.assertRegex(e.message(), "truncated|shrunk")
            t.join()
            self.client.unregister_system_shared_memory(out.name)
            self.assert_serving()
            if "truncated" in seen:
                break
        self.assertTrue(seen & {"truncated", "shrunk"}, seen)


class SharedMemoryCaps(SharedMemoryBase):
    args = ("--shared-memory", "system", "--shm-max-bytes", "1M", "--shm-max-regions", "2")

    def test_region_larger_than_the_cap(self):
        r = self.region(2 * MIB, register=False)
        e = error_of(lambda: self.client.register_system_shared_memory(r.name, r.key, 2 * MIB))
        self.assertEqual(e.status(), "400")
        self.assertIn("--shm-max-bytes", e.message())
        a, b = self.region(4096), self.region(4096)
        e = error_of(lambda: self.client.register_system_shared_memory(unique("c"), a.key, 4096))
        self.assertIn("--shm-max-regions", e.message())
        self.client.unregister_system_shared_memory()
        self.assertEqual(self.client.get_system_shared_memory_status(), [])
        self.assertEqual(self.metric("tiled_shm_mapped_bytes"), 0)
        self.assert_serving()


class SharedMemoryOff(SharedMemoryBase):
    args = ()

    def test_off_by_default(self):
        self.assertNotIn("system_shared_memory", self.client.get_server_metadata()["extensions"])
        self.assertEqual(self.client.get_system_shared_memory_status(), [])
        r = self.region(4096, register=False)
        e = error_of(lambda: self.client.register_system_shared_memory(r.name, r.key, 4096))
        self.assertEqual(e.status(), "501")
        self.assertIn("--shared-memory system", e.message())
        body = {"inputs": [{"name": "input", "shape": [1], "datatype": "INT32",
                            "parameters": {"shared_memory_region": r.name, "shared_memory_byte_size": 4}},
                           {"name": "repeats", "shape": [1], "datatype": "INT64", "data": [2]}]}
        resp, data = self.d.request("POST", "/v2/models/tile/infer", json.dumps(body))
        self.assertEqual(resp.status, 400)
        self.assertIn("not enabled", json.loads(data)["error"])
        self.assertIsNone(self.metric("tiled_shm_regions"))


class SharedMemoryAuth(SharedMemoryBase):
    @classmethod
    def setUpClass(cls):
        cls.keyfile = f"/tmp/tiled-shm-keys-{os.getpid()}"
        with open(cls.keyfile, "w") as f:
            f.write("sekret\n")
        cls.args = ("--shared-memory", "system", "--api-key-file", cls.keyfile)
        super().setUpClass()

    def test_endpoints_need_the_key(self):
        for method, path in [("GET", "/v2/systemsharedmemory/status"),
                             ("POST", "/v2/systemsharedmemory/region/x/register"),
                             ("POST", "/v2/systemsharedmemory/unregister")]:
            resp, _ = self.d.request(method, path, b"{}")
            self.assertEqual(resp.status, 401, path)
        resp, data = self.d.request("GET", "/v2/systemsharedmemory/status",
                                    headers={"Authorization": "Bearer sekret"})
        self.assertEqual((resp.status, json.loads(data)), (200, []))


class PerfAnalyzerSharedMemory(SharedMemoryBase):
    """perf_analyzer 2.60.0 (unmodified, scripts/perf_analyzer.sh) with
    --shared-memory system: it unregisters everything (system and CUDA),
    registers a region per input and one for the output, and points every
    request at them. The output's dims are -1, so its region is sized by
    --output-shared-memory-size."""

    def test_shared_memory_system_without_errors(self):
        perf_analyzer_shared_memory(self, "http", self.d.port)
        log = "\n".join(self.d.log_lines())
        for name in ("input_0_0", "repeats_0_0", "output"):
            self.assertIn(f"/v2/systemsharedmemory/region/{name}/register", log)
        self.assertEqual(self.client.get_system_shared_memory_status(), [])  # unregistered at its exit
        self.assert_serving()


if __name__ == "__main__":
    unittest.main()
