"""tritonclient.http (from PyPI, unmodified) against tiled's v2 endpoints.

Run with the virtual environment scripts/venv.sh makes:
  build/venv/bin/python -m unittest tests/server/test_tritonclient.py
"""
import os
import sys
import unittest

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

sys.path.insert(0, os.path.dirname(__file__))
from harness.daemon import Daemon  # noqa: E402
from harness.docs import readme_python_output  # noqa: E402

NUMERIC = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
           np.float16, np.float32, np.float64]


class TritonClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()
        cls.client = httpclient.InferenceServerClient(f"127.0.0.1:{cls.d.port}")
        cls.rng = np.random.default_rng(7)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        assert cls.d.stop() == 0

    def infer(self, data, repeats, binary=True, outputs=True, **kw):
        inp = httpclient.InferInput("input", list(data.shape), np_to_triton_dtype(data.dtype))
        inp.set_data_from_numpy(data, binary_data=binary)
        rep = httpclient.InferInput("repeats", [len(repeats)], "INT64")
        rep.set_data_from_numpy(np.array(repeats, dtype=np.int64), binary_data=binary)
        outs = [httpclient.InferRequestedOutput("output", binary_data=binary)] if outputs else None
        return self.client.infer("tile", [inp, rep], outputs=outs, **kw)

    def test_health_and_metadata(self):
        self.assertTrue(self.client.is_server_live())
        self.assertTrue(self.client.is_server_ready())
        self.assertTrue(self.client.is_model_ready("tile"))
        self.assertTrue(self.client.is_model_ready("tile", "6"))
        self.assertFalse(self.client.is_model_ready("nope"))
        meta = self.client.get_server_metadata()
        self.assertIn("binary_tensor_data", meta["extensions"])
        model = self.client.get_model_metadata("tile")
        self.assertEqual([i["name"] for i in model["inputs"]], ["input", "repeats"])
        config = self.client.get_model_config("tile")
        self.assertEqual(config["max_batch_size"], 0)

    def test_every_datatype_binary_and_json(self):
        for dt in NUMERIC:
            a = (self.rng.standard_normal((2, 3)) * 50).astype(dt)
            for binary in (True, False):
                with self.subTest(dtype=dt.__name__, binary=binary):
                    got = self.infer(a, [2, 1], binary=binary).as_numpy("output")
                    self.assertEqual(got.dtype, a.dtype)
                    self.assertTrue(np.array_equal(got, np.tile(a, (2, 1)), equal_nan=False))

    def test_every_datatype_rank_0_to_4(self):
        """Every datatype tritonclient sends (BF16 through ml_dtypes, binary only; BYTES as
        object arrays), ranks 0 to 4, binary and JSON, against numpy.tile."""
        import ml_dtypes
        shapes = [(), (3,), (2, 3), (2, 1, 3), (1, 2, 2, 3)]
        dtypes = NUMERIC + [ml_dtypes.bfloat16, np.object_]
        calls = 0
        for dt in dtypes:
            for shape in shapes:
                for binary in (True, False):
                    if dt is ml_dtypes.bfloat16 and not binary:
                        continue  # tritonclient: "BF16 inputs must be sent as binary data over HTTP"
                    with self.subTest(dtype=np.dtype(dt).name, shape=shape, binary=binary):
                        n = int(np.prod(shape))
                        if dt is np.object_:
                            a = np.array([b"ab", b"", "\u00e9".encode()] * n, dtype=object)[:n].reshape(shape)
                        else:
                            a = np.asarray(self.rng.standard_normal(shape) * 50).astype(dt)
                        repeats = [2, 1, 3, 1][:len(shape)]
                        got = self.infer(a, repeats, binary=binary).as_numpy("output")
                        want = np.tile(a, repeats)
                        if dt is np.object_:  # str for JSON outputs, bytes for binary ones
                            got = np.array([x if isinstance(x, bytes) else x.encode() for x in got.ravel()],
                                           dtype=object).reshape(got.shape)
                        else:
                            self.assertEqual(got.dtype, a.dtype)
                        self.assertEqual(got.shape, want.shape)
                        self.assertTrue(np.array_equal(got, want))
                        calls += 1
        self.assertEqual(calls, (len(dtypes) * 2 - 1) * len(shapes))

    def test_default_outputs_are_binary(self):
        a = np.arange(6, dtype=np.float32).reshape(3, 2)
        result = self.infer(a, [1, 3], outputs=False)
        self.assertTrue(np.array_equal(result.as_numpy("output"), np.tile(a, (1, 3))))
        self.assertIn("binary_data_size", result.get_output("output")["parameters"])

    def test_strings(self):
        a = np.array([b"ab", b"", "é".encode()], dtype=np.object_)
        for binary in (True, False):
            got = self.infer(a, [2], binary=binary).as_numpy("output")
            # The client gives bytes for binary outputs and str for JSON ones.
            got = [x if isinstance(x, bytes) else x.encode() for x in got]
            self.assertEqual(got, [b"ab", b"", "é".encode()] * 2)

    def test_semantics_parameter_and_request_id(self):
        a = np.arange(4, dtype=np.int32).reshape(2, 2)
        result = self.infer(a, [2, 1, 1], parameters={"semantics": "numpy"}, request_id="req-9")
        self.assertEqual(result.get_response()["id"], "req-9")
        self.assertTrue(np.array_equal(result.as_numpy("output"), np.tile(a, (2, 1, 1))))

    def test_errors_surface_with_our_message(self):
        a = np.arange(4, dtype=np.float32)
        with self.assertRaises(InferenceServerException) as cm:
            self.infer(a, [1, 2])
        self.assertIn("repeats has 2 values but input has rank 1", cm.exception.message())
        with self.assertRaises(InferenceServerException) as cm:
            self.client.infer("nope", [])
        self.assertIn("unknown model", cm.exception.message())

    def test_compression(self):
        a = np.arange(100, dtype=np.float64)
        for algo in ("gzip", "deflate"):
            got = self.infer(a, [50], request_compression_algorithm=algo,
                             response_compression_algorithm=algo).as_numpy("output")
            self.assertTrue(np.array_equal(got, np.tile(a, 50)))

    def test_statistics(self):
        before = self.client.get_inference_statistics("tile")["model_stats"]
        self.infer(np.zeros(3, np.int8), [2])
        after = self.client.get_inference_statistics("tile")["model_stats"]
        count = lambda stats: sum(s["inference_stats"]["success"]["count"] for s in stats)  # noqa: E731
        self.assertEqual(count(after), count(before) + 1)


    def test_readme_snippet(self):
        """The README's tritonclient example runs and prints what it shows."""
        # The shared-memory example (which reads its output another way) runs in test_shared_memory.py.
        self.assertEqual(*readme_python_output('httpclient.InferenceServerClient("127.0.0.1:8080")\ndata =',
                                               self.d.port))


if __name__ == "__main__":
    unittest.main()
