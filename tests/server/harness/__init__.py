"""The Python test harness of tests/server and tests/deploy: what the test modules
share (the daemon under test, the documentation's examples, sample tensors, a
TLS certificate, gRPC messages by hand, Triton's clients). Test modules import
from here, never from one another. Import it with tests/server on sys.path:
    from harness.daemon import Daemon
(h1drive.h and h1wire_dump.c beside it are the C harness of the HTTP/1 framer.)"""
