"""ab_service.py - two tiled builds' small-request service rows in one run, against nginx.

    python3 bench/ab_service.py OLD_BIN NEW_BIN [--dur 3] [--reps 5] [--work build/bench-ab]
        [--kinds json,raw,npy,v2] [--floor build/bench/mhd_floor]

--floor puts libmicrohttpd's floor (bench/mhd_floor.c, bench-peers' floor rows) where nginx stands.

The service rows of `make bench-peers` (bench/peers/run.py: the same small JSON, raw, .npy and
v2 requests, each answer checked first; servers pinned to core 0, wrk with one thread on core 1),
for a before/after question such as "what does this change cost a small request", with every
feature on as by default (the access log included: --log-level info, where bench-peers runs
warn), and the CPU time each server spent per request, user and system apart: nginx
`return 200`, the OLD and the NEW daemon run side by side and are loaded back to back at each
point, `--reps` times, so both builds see the same background load. Prints the median requests
per second and p99 of each, and the ratios NEW/nginx and OLD/nginx. Traffic goes to 127.0.0.1
only; every load is bounded in time; every process started here is stopped here.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import run as peers  # noqa: E402  (bench/peers/run.py)



def proc_switches(pid):
    """Context switches, voluntary and not, of all the process's threads (/proc/PID/task/*/status)."""
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                n += sum(int(line.split()[1]) for line in f if "ctxt_switches:" in line)
        except OSError:
            pass  # a thread that ended
    return n


def proc_cpu_ticks(pid):
    """(user, system) clock ticks the process has used, all its threads together (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--dur", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--conns", default="16,64")
    ap.add_argument("--log-level", default="info",
                    help="the daemons' --log-level (info, their default, writes the access line of every request)")
    ap.add_argument("--old-log-level", default="",
                    help="OLD's --log-level instead (one build against itself: what the access log costs)")
    ap.add_argument("--work", default=os.path.join(peers.ROOT, "build", "bench-ab"))
    ap.add_argument("--floor", default="",
                    help="bench/mhd_floor's binary: the baseline is libmicrohttpd's floor (bench-peers' floor "
                         "rows) instead of nginx")
    ap.add_argument("--kinds", default="json,raw,npy,v2", help="the small requests to load, of json,raw,npy,v2")
    a = ap.parse_args()
    base = "floor" if a.floor else "nginx"  # the baseline's label (its key below is "nginx" either way)
    os.makedirs(a.work, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="tiled-ab-")
    os.chmod(tmp, 0o755)
    reqs = peers.small_requests()
    servers = []
    try:
        port = peers.free_port()
        if a.floor:
            live = [("nginx", peers.Server("mhd_floor", ["taskset", "-c", "0", os.path.abspath(a.floor), str(port)],
                                           "http://127.0.0.1:%d/small" % port, a.work), port)]
        else:
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(peers.nginx_conf(tmp, port))
            live = [("nginx", peers.Server("nginx", ["taskset", "-c", "0", "nginx", "-c", conf, "-p", tmp],
                                           "http://127.0.0.1:%d/small" % port, a.work), port)]
        for name, binary in (("old", a.old), ("new", a.new)):
            port = peers.free_port()
            level = a.old_log_level if name == "old" and a.old_log_level else a.log_level
            cmd = ["taskset", "-c", "0", os.path.abspath(binary), "serve", "--port", str(port), "--workers", "1",
                   "--log-level", level]
            live.append((name, peers.Server(name, cmd, "http://127.0.0.1:%d/v2/health/ready" % port, a.work), port))
        servers = [s for _, s, _ in live]
        server_of = {name: srv for name, srv, _ in live}
        for name, _, port in live[1:]:
            for fmt, (path, ctype, body, check) in reqs.items():
                status, resp = peers.post("http://127.0.0.1:%d%s" % (port, path), ctype, body)
                if status != 200 or not check(resp):
                    raise RuntimeError("%s %s: wrong answer %d %r" % (name, fmt, status, resp[:200]))
        rows = []
        for fmt, (path, ctype, body, _) in reqs.items():
            if fmt not in a.kinds.split(","):
                continue
            for conns in (int(c) for c in a.conns.split(",")):
                got = {name: [] for name, _, _ in live}
                for _ in range(a.reps):
                    for name, _, port in live:
                        p = "/small" if name == "nginx" else path
                        pid = server_of[name].pid()
                        t0, c0 = proc_cpu_ticks(pid), proc_switches(pid)
                        r = peers.wrk(a.work, "http://127.0.0.1:%d" % port, p, ctype, body, conns, a.dur,
                                      "%s-%s" % (name, fmt))
                        t1, c1 = proc_cpu_ticks(pid), proc_switches(pid)
                        r["switches_per_s"] = (c1 - c0) / a.dur
                        hz = os.sysconf("SC_CLK_TCK")
                        r["user_us"], r["sys_us"] = ((b - a_) * 1e6 / hz / r["requests"] for a_, b in zip(t0, t1))
                        if r["errors"]:
                            raise RuntimeError("%s %s c=%d: %d errors" % (name, fmt, conns, r["errors"]))
                        got[name].append(r)
                med = {n: (statistics.median(r["rps"] for r in rs), statistics.median(r["p99_us"] for r in rs),
                           statistics.median(r["user_us"] for r in rs), statistics.median(r["sys_us"] for r in rs),
                           statistics.median(r["switches_per_s"] for r in rs))
                       for n, rs in got.items()}
                rows.append((fmt, conns, med))
                print("%-5s c=%-3d %s %7.0f/s  old %7.0f/s p99 %5.0f us (%.2fx)  new %7.0f/s p99 %5.0f us "
                      "(%.2fx)  new/old %.3f" % (fmt, conns, base, med["nginx"][0], med["old"][0], med["old"][1],
                                                 med["old"][0] / med["nginx"][0], med["new"][0], med["new"][1],
                                                 med["new"][0] / med["nginx"][0], med["new"][0] / med["old"][0]),
                      flush=True)
        print(("\n| request | conns | %s req/s | old req/s (x %s) | new req/s (x %s) | new/old | "
               "p99 old / new (us) |\n|---|---:|---:|---:|---:|---:|---:|") % (base, base, base))
        for fmt, conns, med in rows:
            print("| %s | %d | %.0f | %.0f (%.2f) | %.0f (%.2f) | %.3f | %.0f / %.0f |"
                  % (fmt, conns, med["nginx"][0], med["old"][0], med["old"][0] / med["nginx"][0], med["new"][0],
                     med["new"][0] / med["nginx"][0], med["new"][0] / med["old"][0], med["old"][1], med["new"][1]))
        print("\nCPU per request, microseconds of the server's process (user + system, from /proc/PID/stat), and "
              "its context switches a second (all threads, /proc/PID/task/*/status); medians:\n\n"
              "| request | conns | %s | old | new | switches/s %s / old / new |\n|---|---:|---:|---:|---:|---:|"
              % (base, base))
        for fmt, conns, med in rows:
            print("| %s | %d | %s | %s |" % (fmt, conns, " | ".join("%.1f + %.1f" % (med[n][2], med[n][3])
                                                                   for n in ("nginx", "old", "new")),
                                           " / ".join("%.0f" % med[n][4] for n in ("nginx", "old", "new"))))
        print("\ncommand: python3 bench/ab_service.py %s %s --dur %d --reps %d --conns %s --log-level %s%s --kinds %s%s"
              % (peers.short(a.old), peers.short(a.new), a.dur, a.reps, a.conns, a.log_level,
                 " --old-log-level " + a.old_log_level if a.old_log_level else "", a.kinds,
                 " --floor " + peers.short(a.floor) if a.floor else ""))
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
