"""peers.py - numpy.tile, torch.tile and ONNX Runtime's Tile on bench_peers' cases.

    python peers.py CASEFILE [reps] > peers.jsonl
    python peers.py CASEFILE --loop IMPL CASE_NAME SECONDS   (for a profiler)
    python peers.py CASEFILE --serve [reps]   (commands on stdin, see main(); run.py uses this)

Prints one JSON line describing the environment, then one per (case,
implementation) with the median seconds per call, GB/s of output written and
the CRC-32 of the output (compared with tiled's by run.py). Inputs are the
bytes bench_peers.c builds, so every implementation must produce the same
output bytes.

Timing: one warm-up call, then `reps` samples; a sample is a batch of calls
lasting >= ~2 ms (a single call for large outputs), and the per-call median
of the samples is reported. Every call returns a new, fully written array
(numpy.tile, torch.tile and InferenceSession.run are eager); a large result
is released outside the clock. ONNX Runtime is also timed kernel-only: a
profiled session's trace gives the Tile node's own "dur" per run.

Run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (run.py does):
numpy.tile does not call BLAS, but those variables select slower kernels
for whatever numpy does call, and the environment line records what
threadpoolctl and the process's mappings say numpy's BLAS is.
"""
import gc
import glob
import json
import os
import sys
import tempfile
import time
import zlib

import numpy as np

BATCH_SEC = 2e-3
NP_DTYPES = {"float32": np.float32, "uint8": np.uint8, "int64": np.int64, "int32": np.int32,
             "float64": np.float64, "int8": np.int8, "uint16": np.uint16, "int16": np.int16,
             "float16": np.float16, "bool": np.bool_}


def read_cases(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, dtype, shape, reps = line.split("|")
            cases.append({"case": name, "dtype": dtype,
                          "shape": [int(v) for v in shape.split(",") if v],
                          "repeats": [int(v) for v in reps.split(",") if v]})
    return cases


def make_input(c):
    n = int(np.prod(c["shape"], dtype=np.int64))
    if c["dtype"] == "string":
        return np.array(["str%d" % i for i in range(n)], dtype=object).reshape(c["shape"])
    dt = np.dtype(NP_DTYPES[c["dtype"]])
    nbytes = n * dt.itemsize
    # Bits 13..20 of i * 2654435761 depend on i mod 2**21 only: the bytes repeat every 2 MiB.
    i = np.arange(min(nbytes, 1 << 21), dtype=np.uint64)
    period = ((i * np.uint64(2654435761)) >> np.uint64(13)).astype(np.uint8)
    raw = np.resize(period, nbytes) if nbytes > period.size else period
    return raw.view(dt).reshape(c["shape"])


def crc(out):
    if out.dtype == object or out.dtype.kind == "U":
        flat = out.reshape(-1).tolist()
        return zlib.crc32(("\0".join(flat) + "\0").encode())
    return zlib.crc32(np.ascontiguousarray(out).reshape(-1).view(np.uint8))


def sec_per_call(fn, reps):
    """Median and minimum seconds per call of fn() over `reps` batches, and the last result."""
    gc.disable()
    try:
        r = fn()
        t0 = time.perf_counter()
        r = fn()
        warm = time.perf_counter() - t0
        k = 1
        if warm < BATCH_SEC / 2:
            k = int(min(100000, max(1, BATCH_SEC / max(warm, 1e-8))))
        samples = []
        for _ in range(reps):
            r = None  # a large result is released outside the clock
            t0 = time.perf_counter()
            for _ in range(k):
                r = fn()
            samples.append((time.perf_counter() - t0) / k)
        return float(np.median(samples)), float(min(samples)), r
    finally:
        gc.enable()


def ort_model(c, x):
    import onnx
    from onnx import TensorProto, helper

    elem = TensorProto.STRING if c["dtype"] == "string" else helper.np_dtype_to_tensor_dtype(x.dtype)
    out_shape = [s * r for s, r in zip(c["shape"], c["repeats"])]
    node = helper.make_node("Tile", ["x", "repeats"], ["y"], name="tile")
    graph = helper.make_graph(
        [node], "tile",
        [helper.make_tensor_value_info("x", elem, c["shape"])],
        [helper.make_tensor_value_info("y", elem, out_shape)],
        [helper.make_tensor("repeats", TensorProto.INT64, [len(c["repeats"])], c["repeats"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def ort_session(model, threads, profile_dir=None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if profile_dir:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(profile_dir, "ort")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_kernel_sec(model, threads, x, reps, tmp):
    """Median of the Tile node's kernel "dur" (us) in a profiled session."""
    sess = ort_session(model, threads, tmp)
    warm = 2
    runs = reps
    for _ in range(warm + runs):
        sess.run(["y"], {"x": x})
    path = sess.end_profiling()
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    durs = [ev["dur"] for ev in trace
            if ev.get("cat") == "Node" and ev.get("name", "").endswith("_kernel_time")
            and ev.get("args", {}).get("op_name") == "Tile"]
    durs = durs[-runs:]
    if not durs:
        raise RuntimeError("no Tile kernel_time events in the ORT profile")
    return float(np.median(durs)) * 1e-6, float(min(durs)) * 1e-6, len(durs)


def environment():
    import onnxruntime as ort
    import torch

    info = {"kind": "env", "python": sys.version.split()[0], "numpy": np.__version__,
            "torch": torch.__version__, "onnxruntime": ort.__version__,
            "torch_threads": torch.get_num_threads(),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
            "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "(unset)")}
    try:
        import onnx
        info["onnx"] = onnx.__version__
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_info
        info["threadpoolctl"] = [{k: d.get(k) for k in ("internal_api", "prefix", "version", "architecture",
                                                        "num_threads", "filepath")}
                                 for d in threadpool_info()]
    except ImportError:
        info["threadpoolctl"] = "not installed"
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if any(s in p for s in ("blas", "lapack")):
                libs.add(os.path.realpath(p))
    info["blas_libs_mapped"] = sorted(libs)
    return info


def loop(cases, impl, name, seconds):
    """Runs one implementation on one case for `seconds` (numpy, torch, ort_1, ort_default),
    after printing a "ready" line, so that a profiler can attach (perf record -p)."""
    c = next(c for c in cases if c["case"] == name)
    x = make_input(c)
    reps_t = tuple(c["repeats"])
    if impl == "numpy":
        fn = lambda: np.tile(x, reps_t)  # noqa: E731
    elif impl == "torch":
        import torch

        xt = torch.from_numpy(x)
        fn = lambda: torch.tile(xt, reps_t)  # noqa: E731
    else:
        sess = ort_session(ort_model(c, x), 1 if impl == "ort_1" else 0)
        fn = lambda: sess.run(["y"], {"x": x})[0]  # noqa: E731
    r = fn()
    print(json.dumps({"kind": "ready", "pid": os.getpid()}), flush=True)
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        r = fn()
        calls += 1
    del r
    print(json.dumps({"kind": "looped", "case": name, "impl": impl, "profile_calls": calls,
                      "profile_s": time.perf_counter() - t0}), flush=True)


def measure(c, reps, tmp):
    """Prints one result line per implementation for case `c`."""
    import torch

    x = make_input(c)
    reps_t = tuple(c["repeats"])
    out_elems = int(np.prod([s * r for s, r in zip(c["shape"], c["repeats"])], dtype=np.int64))
    out_bytes = out_elems * (x.dtype.itemsize if x.dtype != object else 0)

    def emit(impl, sec, out, **extra):
        sec, smin = sec
        rec = {"kind": "result", "case": c["case"], "impl": impl, "s": sec, "s_min": smin,
               "gbps": out_bytes / sec / 1e9 if out_bytes else None,
               "melem_s": out_elems / sec / 1e6, "crc32": crc(out) if out is not None else None}
        rec.update(extra)
        print(json.dumps(rec), flush=True)

    *sec, out = sec_per_call(lambda: np.tile(x, reps_t), reps)
    emit("numpy", sec, out, note="dtype object" if x.dtype == object else "")
    del out
    if c["dtype"] == "string":
        xu = x.astype(str)
        *sec, out = sec_per_call(lambda: np.tile(xu, reps_t), reps)
        emit("numpy_U", sec, out, note="dtype %s" % xu.dtype.str)
        del out
        print(json.dumps({"kind": "result", "case": c["case"], "impl": "torch", "s": None,
                          "note": "n/a: torch has no string tensors"}), flush=True)
    else:
        xt = torch.from_numpy(x)
        *sec, out = sec_per_call(lambda: torch.tile(xt, reps_t), reps)
        emit("torch", sec, out.numpy(), threads=torch.get_num_threads())
        del out
    model = ort_model(c, x)
    for label, threads in (("1", 1), ("default", 0)):
        sess = ort_session(model, threads)
        *sec, out = sec_per_call(lambda: sess.run(["y"], {"x": x})[0], reps)
        emit("ort_e2e_" + label, sec, out)
        out = sess = None
        *ksec, n = ort_kernel_sec(model, threads, x, reps, tmp)
        emit("ort_kernel_" + label, ksec, None, profiled_runs=n)
    gc.collect()


def main():
    cases = read_cases(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "--loop":
        return loop(cases, sys.argv[3], sys.argv[4], float(sys.argv[5]))
    serve = len(sys.argv) > 2 and sys.argv[2] == "--serve"
    reps = int(sys.argv[3 if serve else 2]) if len(sys.argv) > (3 if serve else 2) else 7
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    print(json.dumps(environment()), flush=True)
    tmp = tempfile.mkdtemp(prefix="tiled-ort-")
    try:
        if not serve:
            for c in cases:
                measure(c, reps, tmp)
            return
        # One command per stdin line: "CASE NAME" measures it, "loop IMPL SECONDS CASE NAME"
        # profiles it (see loop()); each answer ends with a {"kind": "done"} line.
        for line in sys.stdin:
            line = line.rstrip("\n")
            if line.startswith("loop "):
                _, impl, secs, name = line.split(" ", 3)
                loop(cases, impl, name, float(secs))
            elif line:
                measure(next(c for c in cases if c["case"] == line), reps, tmp)
            print(json.dumps({"kind": "done"}), flush=True)
    finally:
        for p in glob.glob(os.path.join(tmp, "*")):
            os.unlink(p)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
