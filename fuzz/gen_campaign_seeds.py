#!/usr/bin/env python3
"""gen_campaign_seeds.py - extra seeds for a fuzzing campaign (fuzz/campaign.sh),
drawn from the generators of the differential tests, written as files.

    build/venv/bin/python fuzz/gen_campaign_seeds.py OUT [COUNT]

OUT/<target>/ gets up to COUNT inputs (default 300) per generator, each
named by its SHA-1, in the target's input layout (fuzz/fuzz_<target>.c):

  v1_json         tests/api/test_json_differential.py: /v1 bodies (gen_v1)
  v2              the same module's infer bodies (gen_v2), behind the
                  target's 3 header bytes (no binary header, version 13)
  npy             tests/api/test_npy_differential.py: files numpy writes,
                  headers spelled by hand, the strict and refused cases, and
                  random header changes
  h1wire          tests/server/test_h1_differential.py: request streams, valid
                  and with a smuggling-class mutation
  h1_transport    the same streams, each what a client sends on a connection
                  (its 0xFF bytes doubled: fuzz_h1_transport.c's escape)
  grpc, pbdiff    tests/server/pbsamples.py's requests, each in other valid
                  encodings (tests/server/pbreencode.py, as
                  test_pb_differential.py writes them)
  grpc_transport  the ModelInfer requests above, each one call on an HTTP/2
                  connection (fuzz/gen_grpc_transport_corpus.py's client)

A generator whose modules or tools are missing (numpy, h11, the gRPC stubs
of `make grpc-stubs`, build/tests/decode_dump) is skipped with a note; the
others still write. The generators draw from fixed seeds.
"""
import hashlib
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = 20261128


def writer(out, target):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)

    def write(data):
        with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
    return write


def json_docs(out, count):
    sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
    import test_json_differential as jd
    if not os.access(jd.DUMP, os.X_OK):
        raise ImportError("%s is missing (make all)" % jd.DUMP)
    names = jd.DtypeNames()
    w = writer(out, "v1_json")
    for doc in jd.documents(random.Random(SEED), jd.gen_v1, names, count):
        w(doc)
    w = writer(out, "v2")
    for doc in jd.documents(random.Random(SEED + 1), jd.gen_v2, names, count):
        w(b"\xff\xff\x00" + doc)  # no Inference-Header-Content-Length; version 13


def npy_files(out, count):
    sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
    import test_npy_differential as nd
    rng = random.Random(SEED)
    files = [doc for _, _, doc in nd.writer_cases(rng) + nd.spelling_cases(rng)]
    fixed = [doc for _, _, doc in nd.strict_cases() + nd.refused_cases()]
    small = [doc for doc in files if len(doc) <= 4096]  # the target's -max_len
    picked = rng.sample(small, min(count, len(small)))
    w = writer(out, "npy")
    for doc in picked + fixed + [nd.mutate(rng, rng.choice(small)) for _ in range(count)]:
        w(doc)


def h1_streams(out, count):
    sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
    import test_h1_differential as hd
    rng = random.Random(SEED)
    w, wt = writer(out, "h1wire"), writer(out, "h1_transport")
    for k in range(count):
        _, reqs = hd.gen_stream(rng, k % 2 == 1)
        stream = b"".join(r.raw() for r in reqs)
        w(stream)
        wt(stream.replace(b"\xff", b"\xff\xff"))


def pb_messages(out, count):
    sys.path[:0] = [os.path.join(ROOT, "build", "grpc"), os.path.join(ROOT, "tests", "server"), HERE]
    import grpc_service_pb2 as pb
    import health_pb2
    import pbreencode
    import pbsamples
    rng = random.Random(SEED)
    infer = [m for _, m in pbsamples.infer_requests(pb)]
    msgs = infer + [m for _, m in pbsamples.small_requests(pb, health_pb2)]
    wg, wp = writer(out, "grpc"), writer(out, "pbdiff")
    for k in range(count):
        i = k % len(msgs)
        data = pbreencode.reencode(msgs[i], rng)
        wp(data)
        if i < len(infer):
            wg(data)
    # One ModelInfer call per request, as a client sends it on a connection.
    import gen_grpc_transport_corpus as gt
    wt = writer(out, "grpc_transport")
    for m in infer:
        wt(gt.Client().call(1, gt.SERVICE + "ModelInfer", m.SerializeToString()).out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    for name, gen in [("JSON documents", json_docs), (".npy files", npy_files), ("HTTP/1.1 streams", h1_streams),
                      ("protobuf messages", pb_messages)]:
        try:
            gen(out, count)
        except Exception as e:  # noqa: BLE001  (a missing module or tool: that generator is skipped)
            print("gen_campaign_seeds: no %s (%s: %s)" % (name, type(e).__name__, e), file=sys.stderr)
    for t in sorted(os.listdir(out)) if os.path.isdir(out) else []:
        print("gen_campaign_seeds: %s: %d seeds" % (t, len(os.listdir(os.path.join(out, t)))))


if __name__ == "__main__":
    main()
