#!/usr/bin/env python3
"""gen_pbdiff_corpus.py - the seeds of the differential protobuf target
(fuzz/fuzz_pbdiff.c) in fuzz/corpus/pbdiff/.

    make grpc-stubs && build/venv/bin/python fuzz/gen_pbdiff_corpus.py

Each request of tests/server/pbsamples.py (every message tiled decodes by
hand, plus server reflection requests) is written canonically by the
protobuf package, then in SEEDS_PER_REQUEST other encodings by
tests/server/pbreencode.py (packed/unpacked/split runs, repeated scalars and
sub-messages, repeated and partial map entries, unknown fields of every
wire type incl. nested groups, any field order, over-long varints,
explicit defaults) drawn from a fixed seed, so the files are the same on
every run. The seeds are committed; this script says how they were made.
"""
import hashlib
import os
import random
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "build", "grpc"), os.path.join(ROOT, "tests", "server")]

import grpc_service_pb2 as pb  # noqa: E402  (from `make grpc-stubs`)
import health_pb2  # noqa: E402
import pbreencode  # noqa: E402
import pbsamples  # noqa: E402
from grpc_reflection.v1alpha import reflection_pb2  # noqa: E402

SEEDS_PER_REQUEST = 3
OUT = os.path.join(HERE, "corpus", "pbdiff")


def reflection_requests():
    R = reflection_pb2.ServerReflectionRequest
    return [R(list_services=""), R(host="h", file_by_filename="health.proto"),
            R(file_containing_symbol="inference.GRPCInferenceService"),
            R(all_extension_numbers_of_type="inference.ModelInferRequest"),
            R(file_containing_extension=reflection_pb2.ExtensionRequest(containing_type="x", extension_number=3))]


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rng = random.Random(22)
    msgs = [m for _, m in pbsamples.infer_requests(pb) + pbsamples.small_requests(pb, health_pb2)]
    msgs += reflection_requests()
    seen = set()
    for m in msgs:
        encodings = [m.SerializeToString()] + [pbreencode.reencode(m, rng) for _ in range(SEEDS_PER_REQUEST)]
        for data in encodings:
            name = hashlib.sha1(data).hexdigest()[:16]
            if name in seen:
                continue
            seen.add(name)
            with open(os.path.join(OUT, name), "wb") as f:
                f.write(data)
    print(f"{len(seen)} seeds in {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
