"""check.py URL_HTTP URL_GRPC CASES_JSON - asks one server for every case over HTTP with
binary tensors, HTTP with JSON and gRPC (tritonclient: a client tiled did not write) and
compares each answer with numpy.tile. Prints one JSON object:
{case: {protocol: "ok" | "wrong answer: ..." | "error: ..."}}. Run by race.py before
any load, with the Triton venv's Python (nvidia-pytriton brings tritonclient).

check.py --grpc-body CASE_JSON FILE writes the gRPC-framed request h2load sends."""
import json
import struct
import sys
import urllib.error
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

DT = {"float32": "FP32", "int64": "INT64", "uint8": "UINT8"}


def case_input(c):
    n = int(np.prod(c["shape"]))
    x = (np.arange(n) % 251).astype(c["dtype"]).reshape(c["shape"])
    return x, np.array(c["repeats"], dtype=np.int64)


def ask(mod, client, x, reps, binary):
    ins = [mod.InferInput("input", list(x.shape), DT[str(x.dtype)]),
           mod.InferInput("repeats", list(reps.shape), "INT64")]
    if mod is httpclient:
        ins[0].set_data_from_numpy(x, binary_data=binary)
        ins[1].set_data_from_numpy(reps, binary_data=binary)
        outs = [mod.InferRequestedOutput("output", binary_data=binary)]
    else:
        ins[0].set_data_from_numpy(x)
        ins[1].set_data_from_numpy(reps)
        outs = [mod.InferRequestedOutput("output")]
    return client.infer("tile", ins, outputs=outs).as_numpy("output")


def post_json(http_url, c, x, reps):
    """The v2 JSON request wrk sends (tritonclient's JSON requests are typed
    application/octet-stream, which KServe reads as binary)."""
    body = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape), "datatype": DT[str(x.dtype)],
                                   "data": x.reshape(-1).tolist()},
                                  {"name": "repeats", "shape": list(reps.shape), "datatype": "INT64",
                                   "data": reps.tolist()}]}).encode()
    req = urllib.request.Request("http://%s/v2/models/tile/infer" % http_url, data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            o = json.loads(r.read())["outputs"][0]
    except urllib.error.HTTPError as e:
        raise RuntimeError("[%d] %s" % (e.code, e.read()[:200].decode(errors="replace")))
    return np.array(o["data"], dtype=x.dtype).reshape(o["shape"])


def grpc_body(c, path):
    """Writes the gRPC-framed ModelInferRequest of a case (raw contents) for h2load."""
    from tritonclient.grpc import service_pb2
    x, reps = case_input(c)
    req = service_pb2.ModelInferRequest(model_name="tile")
    for name, a in (("input", x), ("repeats", reps)):
        t = req.inputs.add()
        t.name, t.datatype = name, DT[str(a.dtype)]
        t.shape.extend(a.shape)
        req.raw_input_contents.append(a.tobytes())
    req.outputs.add().name = "output"
    msg = req.SerializeToString()
    with open(path, "wb") as f:
        f.write(b"\0" + struct.pack(">I", len(msg)) + msg)


def main():
    if sys.argv[1] == "--grpc-body":
        grpc_body(json.loads(sys.argv[2]), sys.argv[3])
        return
    http_url, grpc_url, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    hc = httpclient.InferenceServerClient(http_url, network_timeout=60, connection_timeout=10)
    gc = grpcclient.InferenceServerClient(grpc_url)
    res = {}
    for name, c in cases.items():
        x, reps = case_input(c)
        want = np.tile(x, reps.tolist())
        res[name] = {}
        for proto, mod, client, binary in (("http-binary", httpclient, hc, True), ("http-json", httpclient, hc, False),
                                           ("grpc", grpcclient, gc, True)):
            try:
                got = post_json(http_url, c, x, reps) if proto == "http-json" else ask(mod, client, x, reps, binary)
                if got is None or got.shape != want.shape or not np.array_equal(got.astype(want.dtype), want):
                    res[name][proto] = "wrong answer: %s" % (None if got is None else (got.dtype, got.shape))
                else:
                    res[name][proto] = "ok"
            except Exception as e:  # the server's refusal is the finding
                res[name][proto] = "error: " + " ".join(str(e).split())[:300]
    hc.close()
    gc.close()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
