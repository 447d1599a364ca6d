"""gRPC drain and failover with clients and a proxy we did not write.

- NginxGrpc: three replicas behind Debian's nginx with deploy/nginx/tiled-grpc.conf
  (only its replica and listen addresses rewritten). Load from eight grpcio clients
  (each its own connection): SIGTERM of one replica fails no call; SIGKILL of another
  fails at most the calls in flight at that instant (one per client); the last
  replica serves the rest. Load from h2load (64 calls in flight): SIGTERM of a replica
  leaves every call answered grpc-status 0 in nginx's log.
- DirectRetry: a grpcio channel over two replicas (round robin) with gRPC's
  standard retry policy (retryPolicy on UNAVAILABLE): SIGTERM of a replica it is
  connected to fails no call.
- ConnectionAge: a client that never reconnects by itself, behind a round-robin TCP
  balancer (written here), reaches every replica once they have
  --grpc-max-connection-age; without it, it stays on one.

Every wait is for a condition, with a deadline only a hang reaches.

    cd tests/deploy && TILED_BIN=../../build/tiled ../../build/venv/bin/python -m unittest -v test_grpc_failover
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import grpc
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("TILED_BIN", os.path.join(ROOT, "build", "tiled"))
if not os.path.isabs(os.environ["TILED_BIN"]):
    os.environ["TILED_BIN"] = os.path.join(os.getcwd(), os.environ["TILED_BIN"])
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
from harness.daemon import Daemon, wait_for as harness_wait_for  # noqa: E402
from harness.grpcwire import INFER, infer_request, raw_method, raw_output  # noqa: E402

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CONF = os.path.join(ROOT, "deploy", "nginx", "tiled-grpc.conf")
ARRAY = np.arange(6, dtype=np.float32).reshape(2, 3)
REQUEST = infer_request(ARRAY, [2, 2])
EXPECTED = np.tile(ARRAY, (2, 2)).tobytes()
HANG = 120  # seconds: a deadline only a hang reaches


def replica(*extra):
    return Daemon("--grpc-port", "0", "--workers", "1", "--log-level", "warn", "--drain-timeout", "10", *extra)


def grpc_calls(d):
    """gRPC calls the replica answered (tiled_requests_total, transport grpc)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(m.group(1)) for m in re.finditer(r'^tiled_requests_total\{[^}]*transport="grpc"[^}]*\} (\S+)$',
                                                        text, re.M))


def wait_for(cond, timeout=HANG):
    return harness_wait_for(cond, timeout)


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=HANG).close()
        return True
    except ConnectionRefusedError:
        return False


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Load:
    """`clients` threads, each with its own channel (its own connections), calling
    ModelInfer back to back; every call's outcome is counted, with the time it ended."""

    def __init__(self, target, clients=int(os.environ.get("GRPC_CLIENTS", "8")), options=()):
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok, self.failed, self.started = 0, [], 0
        self.channels = [grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1), *options])
                         for _ in range(clients)]
        self.threads = [threading.Thread(target=self.run, args=(ch,)) for ch in self.channels]
        for t in self.threads:
            t.start()

    def run(self, channel):
        infer = raw_method(channel, INFER)
        while not self.stop.is_set():
            with self.lock:
                self.started += 1
            try:
                reply = infer(REQUEST, timeout=30)
                good = raw_output(reply) == EXPECTED
                with self.lock:
                    if good:
                        self.ok += 1
                    else:
                        self.failed.append((time.monotonic(), "wrong output"))
            except grpc.RpcError as e:
                with self.lock:
                    self.failed.append((time.monotonic(), f"{e.code()}: {e.details()}"))

    def count(self):
        with self.lock:
            return self.ok

    def wait_more(self, n):
        """Waits until n more calls have succeeded."""
        base = self.count()
        return wait_for(lambda: self.count() >= base + n)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(HANG)
        for ch in self.channels:
            ch.close()


class NginxGrpc(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tiled-nginx-grpc.")
        os.chmod(self.tmp, 0o755)  # nginx workers (nobody when started as root) use the temp dirs
        self.replicas = [replica() for _ in range(3)]
        self.port = free_port()
        text = open(CONF).read()
        up = re.search(r"upstream tiled_grpc \{.*?\n\}", text, re.S).group(0)
        servers = re.findall(r"^\s*server\s+\S+(.*);$", up, re.M)
        self.assertGreaterEqual(len(servers), 2, "the upstream lists fewer than two replicas")
        body = re.sub(r"^\s*server\s+\S+.*;\n", "", up, flags=re.M)
        lines = "".join(f"    server 127.0.0.1:{d.grpc_port}{servers[0]};\n" for d in self.replicas)
        text = text.replace(up, body.replace("upstream tiled_grpc {\n", "upstream tiled_grpc {\n" + lines, 1))
        text = re.sub(r"^\s*listen\s+\[::\].*;\n", "", text, flags=re.M)
        text = re.sub(r"^(\s*)listen\s+\S+", rf"\g<1>listen 127.0.0.1:{self.port}", text, flags=re.M)
        with open(os.path.join(self.tmp, "tiled-grpc.conf"), "w") as f:
            f.write(text)
        t = self.tmp
        with open(os.path.join(t, "nginx.conf"), "w") as f:
            f.write(f"""daemon off;
worker_processes 2;
pid {t}/nginx.pid;
error_log {t}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format failover '$status|$upstream_addr|$upstream_status|$upstream_http_grpc_status|$upstream_trailer_grpc_status';
    access_log {t}/access.log failover;
    client_body_temp_path {t}/client_body;
    proxy_temp_path {t}/proxy;
    fastcgi_temp_path {t}/fastcgi;
    uwsgi_temp_path {t}/uwsgi;
    scgi_temp_path {t}/scgi;
    include {t}/tiled-grpc.conf;
}}
""")
        args = [NGINX, "-p", t, "-c", f"{t}/nginx.conf", "-e", f"{t}/error.log"]
        check = subprocess.run([*args, "-t"], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, f"nginx -t rejects {CONF}: {check.stderr}")
        self.nginx = subprocess.Popen(args, stderr=subprocess.DEVNULL)
        # h2load gives up at once on a port nobody listens on yet
        self.assertTrue(wait_for(lambda: listening(self.port)), "nginx listens")

    def tearDown(self):
        self.nginx.send_signal(signal.SIGQUIT)
        self.nginx.wait(HANG)
        for d in self.replicas:
            d.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_sigterm_fails_nothing_and_sigkill_only_calls_in_flight(self):
        target = f"127.0.0.1:{self.port}"
        with grpc.insecure_channel(target) as ch:
            grpc.channel_ready_future(ch).result(timeout=HANG)
            self.assertEqual(raw_output(raw_method(ch, INFER)(REQUEST, timeout=HANG)), EXPECTED, "a call via nginx")
        load = Load(target)
        try:
            a, b, c = self.replicas
            self.assertTrue(wait_for(lambda: all(grpc_calls(d) > 0 for d in self.replicas)),
                            "every replica takes calls")
            self.assertTrue(load.wait_more(200))
            a.proc.send_signal(signal.SIGTERM)
            self.assertEqual(a.proc.wait(HANG), 0, "the SIGTERMed replica drains and exits 0")
            self.assertTrue(load.wait_more(500), "calls go on after the drain")
            with load.lock:
                after_term, failed_term = load.ok, list(load.failed)
            self.assertEqual(failed_term, [], "SIGTERM of a replica fails no call")
            b.proc.kill()
            b.proc.wait(HANG)
            self.assertTrue(load.wait_more(500), "the last replica serves the rest")
        finally:
            load.finish()
        print(f"\n  nginx gRPC failover: {load.ok} calls, {after_term} before the SIGKILL; "
              f"failed after SIGTERM: {len(failed_term)}, after SIGKILL: {len(load.failed)}")
        self.assertLessEqual(len(load.failed), len(load.threads),
                             f"SIGKILL fails at most the calls in flight (one per client): {load.failed}")
        print(f"  nginx retried {sum(1 for line in self.log() if ',' in line[1])} calls on another replica")
        self.assertEqual(c.stop(), 0, "the last replica exits 0")

    def log(self):
        """nginx's record of every call: status, upstreams tried, their statuses, grpc-status
        (Trailers-Only header), grpc-status (trailer)."""
        with open(os.path.join(self.tmp, "access.log")) as f:
            return [line.rstrip("\n").split("|") for line in f]

    def test_sigterm_under_h2load_fails_no_call(self):
        """Many calls in flight at once (h2load: 8 connections of 8 streams to nginx): the drain's
        races are likely here. Every call is answered with grpc-status 0, as nginx's log shows."""
        h2load = shutil.which("h2load")
        self.assertTrue(h2load, "h2load not found (apt-get install nghttp2-client)")
        with open(os.path.join(self.tmp, "req"), "wb") as f:
            f.write(bytes([0]) + len(REQUEST).to_bytes(4, "big") + REQUEST)
        total = 40000
        h = subprocess.Popen([h2load, "-n", str(total), "-c", "8", "-m", "8", "-d", os.path.join(self.tmp, "req"),
                              "-H", "content-type: application/grpc", "-H", "te: trailers",
                              f"http://127.0.0.1:{self.port}{INFER}"], stdout=subprocess.PIPE, text=True)
        try:
            a = self.replicas[0]
            self.assertTrue(wait_for(lambda: grpc_calls(a) > 1000 or h.poll() is not None), "replica takes calls")
            self.assertIsNone(h.poll(), "the load still runs at the SIGTERM")
            a.proc.send_signal(signal.SIGTERM)
            self.assertEqual(a.proc.wait(HANG), 0, "the SIGTERMed replica drains and exits 0")
            out, _ = h.communicate(timeout=HANG)
        finally:
            if h.poll() is None:
                h.kill()
                h.wait()
        summary = re.search(r"requests: (\d+) total.*?(\d+) succeeded, (\d+) failed, (\d+) errored", out)
        self.assertTrue(summary, out)
        log = self.log()
        bad = [line for line in log if line[0] != "200" or "0" not in (line[3], line[4])]
        print(f"\n  h2load through nginx across SIGTERM: {summary.group(0)}; nginx logged {len(log)} calls, "
              f"{sum(1 for line in log if ',' in line[1])} retried, {len(bad)} without grpc-status 0")
        self.assertEqual(int(summary.group(1)), total)
        self.assertEqual((summary.group(3), summary.group(4)), ("0", "0"), out)
        self.assertEqual(len(log), total)
        self.assertEqual(bad, [], "every call answered with grpc-status 0")
        for d in self.replicas[1:]:
            self.assertEqual(d.stop(), 0)


class DirectRetry(unittest.TestCase):
    def test_sigterm_with_retry_policy_fails_nothing(self):
        a, b = replica(), replica()
        config = json.dumps({
            "loadBalancingConfig": [{"round_robin": {}}],
            "methodConfig": [{
                "name": [{"service": "inference.GRPCInferenceService"}],
                "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "1s",
                                "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
            }],
        })
        target = f"ipv4:127.0.0.1:{a.grpc_port},127.0.0.1:{b.grpc_port}"
        load = Load(target, options=[("grpc.service_config", config), ("grpc.enable_retries", 1)])
        try:
            self.assertTrue(wait_for(lambda: grpc_calls(a) > 0 and grpc_calls(b) > 0), "both replicas take calls")
            self.assertTrue(load.wait_more(200))
            a.proc.send_signal(signal.SIGTERM)
            self.assertEqual(a.proc.wait(HANG), 0, "the SIGTERMed replica drains and exits 0")
            served_b = grpc_calls(b)
            self.assertTrue(load.wait_more(500), "calls go on after the drain")
            self.assertGreater(grpc_calls(b), served_b, "on the other replica")
        finally:
            load.finish()
            a.stop()
            b.stop()
        print(f"\n  direct retry-policy client: {load.ok} calls, {len(load.failed)} failed")
        self.assertEqual(load.failed, [], "SIGTERM of a replica the client is connected to fails no call")


class Balancer:
    """A round-robin TCP balancer: each connection accepted goes to the next backend,
    bytes copied both ways, as an L4 balancer (a Kubernetes Service) does."""

    def __init__(self, backends):
        self.backends, self.next = backends, 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            port = self.backends[self.next % len(self.backends)]
            self.next += 1
            self.accepted += 1
            try:
                server = socket.create_connection(("127.0.0.1", port))
            except OSError:
                client.close()
                continue
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self.pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (dst,):
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self):
        self.sock.close()


class ConnectionAge(unittest.TestCase):
    def spread(self, *extra, calls=None):
        """Three replicas behind the balancer, one client calling through it; returns the
        replicas' gRPC call counts once every replica has served or `calls` calls were made."""
        ds = [replica(*extra) for _ in range(3)]
        bal = Balancer([d.grpc_port for d in ds])
        try:
            with grpc.insecure_channel(f"127.0.0.1:{bal.port}") as ch:
                infer = raw_method(ch, INFER)
                n = 0
                deadline = time.monotonic() + HANG
                while time.monotonic() < deadline:
                    self.assertEqual(raw_output(infer(REQUEST, timeout=HANG)), EXPECTED)
                    n += 1
                    if calls is not None and n >= calls:
                        break
                    if calls is None and n % 20 == 0 and all(grpc_calls(d) > 0 for d in ds):
                        break
            return [grpc_calls(d) for d in ds], bal.accepted
        finally:
            bal.close()
            for d in ds:
                self.assertEqual(d.stop(), 0)

    def test_max_connection_age_spreads_a_long_lived_client(self):
        counts, conns = self.spread("--grpc-max-connection-age", "1", "--grpc-max-connection-age-grace", "5")
        print(f"\n  with --grpc-max-connection-age 1: calls per replica {counts}, {conns} connections")
        self.assertTrue(all(n > 0 for n in counts), f"every replica served the client: {counts}")

    def test_without_it_the_client_stays_on_one_replica(self):
        counts, conns = self.spread(calls=300)
        print(f"\n  without: calls per replica {counts}, {conns} connections")
        self.assertEqual(sorted(n > 0 for n in counts), [False, False, True], counts)
        self.assertEqual(conns, 1)


if __name__ == "__main__":
    unittest.main()
