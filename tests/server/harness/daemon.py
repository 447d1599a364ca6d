"""The daemon under test (build/tiled, or $TILED_BIN, under $TILED_WRAP) on a free
port, and waiting on it."""
import http.client
import json
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import time
import unittest

BIN = os.environ.get("TILED_BIN", "build/tiled")
# TILED_WRAP prefixes the daemon command, e.g. "valgrind --leak-check=full
# --error-exitcode=1"; the daemon's exit status is then the wrapper's.
# TILED_QUICK=1 skips the tests too slow for such a wrapper.
WRAP = shlex.split(os.environ.get("TILED_WRAP", ""))
QUICK = os.environ.get("TILED_QUICK", "") not in ("", "0")


class Daemon:
    """A tiled daemon on a free port; stderr (the logs) kept in a file."""

    def __init__(self, *args, env=None, scheme="http"):
        # The daemon's stderr. Opened appending (O_APPEND) and never read through: the daemon
        # shares this open file's offset, so a reader seeking it would have the daemon's lines
        # land where the reader stands, and the daemon's appends would move the reader past
        # lines it has not read. log_bytes() reads through an open file of its own.
        self.log_path = f"/tmp/tiled-test-{os.getpid()}-{id(self)}.log"
        open(self.log_path, "wb").close()
        self.log = open(self.log_path, "ab")
        full_env = dict(os.environ, **(env or {}))
        self.wrap_log = None
        if WRAP and os.path.basename(WRAP[0]) == "valgrind" and "VALGRIND_OPTS" not in full_env:
            # valgrind's report goes to its own file, so stderr stays the daemon's log.
            self.wrap_log = f"/tmp/tiled-test-{os.getpid()}-{id(self)}.valgrind"
            full_env["VALGRIND_OPTS"] = f"--log-file={self.wrap_log}"
        self.proc = subprocess.Popen([*WRAP, BIN, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=self.log, env=full_env)
        ready, _, _ = select.select([self.proc.stdout], [], [], 120 if WRAP else 10)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the daemon did not start listening in time")
        line = self.proc.stdout.readline().decode()
        # The host as --host gave it: an IPv4 or (bracketed) IPv6 literal, or a name.
        host_port = r"://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d+)\n"
        m = re.fullmatch(r"listening on " + scheme + host_port, line)
        if not m:
            raise RuntimeError(f"unexpected first line {line!r}")
        self.host, self.port = m.group(1).strip("[]"), int(m.group(2))
        self.grpc_port = None
        if "--grpc-port" in args and args[args.index("--grpc-port") + 1] != "-1":
            line = self.proc.stdout.readline().decode()
            m = re.fullmatch(r"listening on " + ("grpcs" if scheme == "https" else "grpc") + host_port, line)
            if not m:
                raise RuntimeError(f"unexpected second line {line!r}")
            self.grpc_port = int(m.group(2))

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp, data

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(180 if WRAP else 30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.returncode and self.wrap_log and os.path.exists(self.wrap_log):
            with open(self.wrap_log, errors="replace") as f:
                print(f"\n--- {self.wrap_log} (exit status {self.proc.returncode})\n{f.read()[-20000:]}")
        return self.proc.returncode

    def log_bytes(self):
        """What the daemon has logged so far."""
        with open(self.log_path, "rb") as f:
            return f.read()

    def log_lines(self):
        return self.log_bytes().decode(errors="replace").split("\n")[:-1]  # whole lines only

    def access_lines(self, keep=lambda a: True, count=1, deadline=60):
        """The access lines (parsed) that `keep` selects, once there are at least `count` of them:
        access lines are written together, up to --log-flush-ms after their request ended. The
        deadline is for a hang only."""
        end = time.monotonic() + deadline
        while True:
            lines = [json.loads(l) for l in self.log_lines() if '"event":"access"' in l]
            lines = [a for a in lines if keep(a)]
            if len(lines) >= count or time.monotonic() > end:
                return lines
            time.sleep(0.005)  # a poll interval: the count decides


class DaemonCase(unittest.TestCase):
    """A daemon (started with `daemon_args`) shared by a test class."""

    daemon_args = ()

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(*cls.daemon_args)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "daemon exit status"


def read_until_close(s, limit=1 << 20):
    """Everything the server sends on socket `s` until it closes (or the
    socket times out): (bytes, whether it closed)."""
    out = b""
    try:
        while len(out) < limit:
            chunk = s.recv(65536)
            if not chunk:
                return out, True
            out += chunk
    except socket.timeout:
        return out, False
    except ConnectionResetError:
        return out, True
    return out, False


def wait_for(cond, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()
