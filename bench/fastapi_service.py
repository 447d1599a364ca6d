"""fastapi_service.py - a minimal Python Tile service, the peer in bench-peers.

    python3 bench/fastapi_service.py [--port 8090] [--host 127.0.0.1]

FastAPI on uvicorn (uvloop and httptools when installed, one process),
tiling with numpy.tile, serving the same contracts as tiled:

  POST /v1/tile  application/json
      {"input": {"dtype", "shape", "data"}, "repeats": [...]}
      -> {"output": {"dtype", "shape", "data"}}
  POST /v1/tile?dtype=D&shape=a,b&repeats=r,s  application/octet-stream
      raw little-endian element bytes in and out, X-Tensor-Dtype/-Shape headers
  POST /v1/tile?repeats=r,s  application/x-npy
      .npy in and out
  POST /v2/models/tile/infer  (Open Inference Protocol, JSON data only)
      inputs "input" and "repeats" -> output "output"

Numeric dtypes only; errors are 400 with {"error": "..."}. It is written the
way a small production service would be (no per-request validation models,
plain json), to show what the Python stack costs per request.
"""
import argparse
import io
import json

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

DTYPES = {n: np.dtype(n) for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                   "uint64", "float16", "float32", "float64", "complex64", "complex128")}
V2_DTYPES = {"BOOL": "bool", "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
             "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
             "FP16": "float16", "FP32": "float32", "FP64": "float64"}
V2_NAMES = {v: k for k, v in V2_DTYPES.items()}

app = FastAPI()


class BadRequest(Exception):
    pass


def ints(text):
    return [int(v) for v in text.split(",") if v.strip()] if text else []


def tile(a, repeats):
    if len(repeats) != a.ndim or any(r < 0 for r in repeats):
        raise BadRequest("repeats must have one non-negative entry per input axis")
    return np.tile(a, repeats)


def dtype_of(name):
    if name not in DTYPES:
        raise BadRequest("unsupported dtype %r" % name)
    return DTYPES[name]


def json_data(out):
    return out.reshape(-1).tolist()


@app.exception_handler(BadRequest)
async def bad_request(_request, exc):
    return JSONResponse({"error": str(exc)}, status_code=400)


@app.exception_handler(ValueError)
async def bad_value(_request, exc):
    return JSONResponse({"error": str(exc)}, status_code=400)


@app.post("/v1/tile")
async def v1_tile(request: Request):
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    q = request.query_params
    if ctype == "application/json":
        req = json.loads(body)
        inp = req["input"]
        dt = dtype_of(inp["dtype"])
        a = np.asarray(inp["data"], dtype=dt)
        if "shape" in inp:
            a = a.reshape(inp["shape"])
        out = tile(a, req["repeats"])
        return Response(json.dumps({"output": {"dtype": inp["dtype"], "shape": list(out.shape),
                                               "data": json_data(out)}}, separators=(",", ":")),
                        media_type="application/json")
    if ctype == "application/octet-stream":
        dt = dtype_of(q.get("dtype", ""))
        a = np.frombuffer(body, dtype=dt.newbyteorder("<")).reshape(ints(q.get("shape", "")))
        out = tile(a, ints(q.get("repeats", "")))
        return Response(out.tobytes(), media_type="application/octet-stream",
                        headers={"X-Tensor-Dtype": dt.name,
                                 "X-Tensor-Shape": json.dumps(list(out.shape), separators=(",", ":"))})
    if ctype == "application/x-npy":
        a = np.load(io.BytesIO(body), allow_pickle=False)
        out = tile(a, ints(q.get("repeats", "")))
        buf = io.BytesIO()
        np.save(buf, out)
        return Response(buf.getvalue(), media_type="application/x-npy")
    return JSONResponse({"error": "unsupported Content-Type %r" % ctype}, status_code=415)


@app.post("/v2/models/tile/infer")
async def v2_infer(request: Request):
    req = json.loads(await request.body())
    inputs = {i["name"]: i for i in req["inputs"]}
    inp, rep = inputs["input"], inputs["repeats"]
    if inp["datatype"] not in V2_DTYPES:
        raise BadRequest("unsupported datatype %r" % inp["datatype"])
    a = np.asarray(inp["data"], dtype=DTYPES[V2_DTYPES[inp["datatype"]]]).reshape(inp["shape"])
    out = tile(a, [int(r) for r in np.asarray(rep["data"]).reshape(-1)])
    resp = {"model_name": "tile", "model_version": "13",
            "outputs": [{"name": "output", "datatype": inp["datatype"], "shape": list(out.shape),
                         "data": json_data(out)}]}
    if "id" in req:
        resp["id"] = req["id"]
    return Response(json.dumps(resp, separators=(",", ":")), media_type="application/json")


@app.get("/v2/health/ready")
async def ready():
    return {"ready": True}


def main():
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8090)
    args = ap.parse_args()
    opts = {}
    try:
        import uvloop  # noqa: F401
        opts["loop"] = "uvloop"
    except ImportError:
        pass
    try:
        import httptools  # noqa: F401
        opts["http"] = "httptools"
    except ImportError:
        pass
    print("fastapi_service listening on http://%s:%d (%s)" % (args.host, args.port,
                                                              ", ".join("%s=%s" % kv for kv in opts.items())),
          flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False, **opts)


if __name__ == "__main__":
    main()
