"""race.py - the race phase of `make bench-peers` (called by run.py): tiled against real
inference servers serving the same tile model.

Servers (each pinned to core 0, one at a time):
  tiled     build/tiled serve --workers 1
  triton    the tritonserver binary of PyPI's nvidia-pytriton, Python backend running
            numpy.tile (bench/peers/race/triton/tile: model.py, config.pbtxt)
  kserve    KServe's ModelServer (bench/peers/race/kserve_tile.py)
  mlserver  MLServer (bench/peers/race/mlserver/tile: MLModel, model-settings.json)
Clients (pinned to core 1): perf_analyzer over HTTP (binary tensors) and gRPC, h2load over
gRPC, wrk over HTTP with a v2 JSON body and with a binary-extension body; concurrency 1 and 8; a small output,
a 4 MiB output and a small int64 rank-3 case.

Before any load, every server answers every case over each protocol (bench/peers/race/check.py,
tritonclient) and the answers are compared with numpy.tile; a case a server refuses becomes a
"cannot serve: reason" cell and is not loaded. Traffic goes to 127.0.0.1 only, every load is
bounded in time, and every server started here is stopped here.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile

RACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "race")

# name -> dtype, input shape, repeats
CASES = {
    "small": {"dtype": "float32", "shape": [2, 2], "repeats": [2, 2], "label": "FP32 [2,2]x[2,2] (64 B out)"},
    "4MiB": {"dtype": "float32", "shape": [32, 32], "repeats": [32, 32], "label": "FP32 [32,32]x[32,32] (4 MiB out)"},
    "int64-r3": {"dtype": "int64", "shape": [2, 3, 4], "repeats": [2, 1, 2],
                 "label": "INT64 [2,3,4]x[2,1,2] (768 B out)"},
}
DT = {"float32": "FP32", "int64": "INT64"}
SERVERS = ("tiled", "triton", "kserve", "mlserver")
SERVER_LABEL = {"tiled": "tiled", "triton": "Triton (Python backend)", "kserve": "KServe ModelServer",
                "mlserver": "MLServer"}
# (client, protocol) -> which check.py protocol must pass first
CLIENTS = (("perf_analyzer", "http-binary", "http-binary"), ("perf_analyzer", "grpc", "grpc"),
           ("h2load", "grpc", "grpc"), ("wrk", "http-json", "http-json"), ("wrk", "http-binary", "http-binary"))
CONCS = (1, 8)
# Why a server refuses a check, when the refusal is a documented limit rather than a fault.
KNOWN = {
    ("triton", "int64-r3"): "one Triton model has one datatype and rank per tensor (config.pbtxt: FP32 rank 2)",
    ("mlserver", "http-binary"): "MLServer has no binary tensor extension over REST",
}


# Cases a client cannot send, whatever the server.
CLIENT_LIMITS = {
    ("perf_analyzer", "int64-r3"): "perf_analyzer sends each input in the datatype of the model's metadata "
                                   "(FP32 for input), so not INT64",
}


PA_CONFIG = ("perf_analyzer reads the model's configuration (Triton's extension: GET /v2/models/tile/config, "
             "gRPC ModelConfig), which this server does not implement")


def h2load_point(h, a, work, gport, case, conc, tag):
    """h2load (nghttp2's HTTP/2 load generator, C) sending one gRPC ModelInfer request per stream,
    one stream at a time per connection, conc connections. It counts HTTP status only, not
    grpc-status: the answers were checked before; p50/p99 from its per-request log."""
    body = os.path.join(work, "grpc-%s.bin" % case)
    if not os.path.exists(body):
        h.run("race", [venv_py(a, "triton"), os.path.join(RACE, "check.py"), "--grpc-body",
                       json.dumps(CASES[case]), body], timeout=60, record=False)
    url = "http://127.0.0.1:%d/inference.GRPCInferenceService/ModelInfer" % gport
    # The exact bytes h2load sends, once through curl: h2load counts HTTP status only.
    p = h.run("race", ["curl", "-s", "--http2-prior-knowledge", "-H", "content-type: application/grpc",
                       "-H", "te: trailers", "--data-binary", "@" + body, "-D", "-", "-o", "/dev/null", url],
              timeout=120, check=False, record=False)
    if not re.search(r"^grpc-status: 0\r?$", p.stdout, re.M):
        return {"error": "the h2load request got no grpc-status 0: " + " ".join(p.stdout.split())[:200]}
    logf = os.path.join(work, "h2load-%s.log" % tag)
    cmd = ["taskset", "-c", "1", "h2load", "-t1", "-c%d" % conc, "-m1", "-D%d" % a.dur, "--warm-up-time=200ms",
           "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", body, "--log-file", logf,
           url]
    p = h.run("race", cmd, timeout=a.dur + 60, check=False, record=a.dur > 1)
    m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", p.stdout)
    n = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", p.stdout)
    if not (m and n):
        return {"error": " ".join((p.stdout + p.stderr).split())[-300:]}
    lat = []
    with open(logf) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[1] == "200":
                lat.append(int(parts[2]))
    lat.sort()

    def pct(q):
        return float(lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else 0.0
    return {"rps": float(m.group(3)), "p50_us": pct(0.50), "p99_us": pct(0.99),
            "errors": int(n.group(5)) + int(n.group(6)) + int(n.group(7)), "requests": int(n.group(4))}


def venv_py(a, name):
    return os.path.join(a.race_venvs, "venv-race-" + name, "bin", "python")


def site_packages(py):
    return subprocess.run([py, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True).stdout.strip()


def triton_layout(a, tmp):
    """The backend directory tritonserver wants (backends/python/{libtriton_python.so, stub,
    triton_python_backend_utils.py}), made of the wheel's files for this Python."""
    py = venv_py(a, "triton")
    root = os.path.join(site_packages(py), "pytriton", "tritonserver")
    be = os.path.join(tmp, "backends", "python")
    os.makedirs(be)
    for f in os.listdir(os.path.join(root, "backends", "python")):
        os.symlink(os.path.join(root, "backends", "python", f), os.path.join(be, f))
    ver = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                         text=True, check=True).stdout.strip()
    stub = os.path.join(root, "python_backend_stubs", ver, "triton_python_backend_stub")
    if not os.path.exists(os.path.join(be, "triton_python_backend_stub")):
        os.symlink(stub, os.path.join(be, "triton_python_backend_stub"))
    return os.path.join(root, "bin", "tritonserver"), os.path.join(tmp, "backends"), site_packages(py)


def server_plan(a, h, tmp):
    """name -> (command, env, env note, http port, grpc port)"""
    plan = {}
    p, g = h.free_port(), h.free_port()
    plan["tiled"] = (["taskset", "-c", "0", a.tiled, "serve", "--port", str(p), "--grpc-port", str(g),
                      "--workers", "1", "--log-level", "warn"], None, "", p, g)
    tritonserver, backends, sp = triton_layout(a, tmp)
    p, g = h.free_port(), h.free_port()
    env = dict(h.peer_env(), PYTHONPATH=sp)
    plan["triton"] = (["taskset", "-c", "0", tritonserver, "--model-repository", os.path.join(RACE, "triton"),
                       "--backend-directory", backends, "--http-address", "127.0.0.1", "--http-port", str(p),
                       "--grpc-address", "127.0.0.1", "--grpc-port", str(g),
                       "--allow-metrics", "false", "--log-verbose", "0", "--log-info", "false"],
                      env, "PYTHONPATH=<venv-race-triton site-packages>", p, g)
    p, g = h.free_port(), h.free_port()
    plan["kserve"] = (["taskset", "-c", "0", venv_py(a, "kserve"), os.path.join(RACE, "kserve_tile.py"),
                       "--http_port", str(p), "--grpc_port", str(g), "--workers", "1"], h.peer_env(), "", p, g)
    p, g = h.free_port(), h.free_port()
    mdir = os.path.join(tmp, "mlserver")
    shutil.copytree(os.path.join(RACE, "mlserver"), mdir)
    with open(os.path.join(mdir, "settings.json"), "w") as f:
        json.dump({"http_port": p, "grpc_port": g, "metrics_port": h.free_port(), "metrics_endpoint": None,
                   "parallel_workers": 0, "host": "127.0.0.1", "debug": False}, f)
    plan["mlserver"] = (["taskset", "-c", "0", os.path.join(os.path.dirname(venv_py(a, "mlserver")), "mlserver"),
                         "start", mdir], h.peer_env(), "", p, g)
    return plan


def case_arrays(c):
    import numpy as np
    n = int(np.prod(c["shape"]))
    x = (np.arange(n) % 251).astype(c["dtype"]).reshape(c["shape"])
    return x, np.array(c["repeats"], dtype=np.int64)


def bodies(c):
    """(v2 JSON body, binary-extension body, its JSON header length) for a case."""
    x, reps = case_arrays(c)
    js = json.dumps({"inputs": [{"name": "input", "shape": c["shape"], "datatype": DT[c["dtype"]],
                                 "data": x.reshape(-1).tolist()},
                                {"name": "repeats", "shape": [len(c["repeats"])], "datatype": "INT64",
                                 "data": c["repeats"]}]}).encode()
    hdr = json.dumps({"inputs": [{"name": "input", "shape": c["shape"], "datatype": DT[c["dtype"]],
                                  "parameters": {"binary_data_size": x.nbytes}},
                                 {"name": "repeats", "shape": [len(c["repeats"])], "datatype": "INT64",
                                  "parameters": {"binary_data_size": reps.nbytes}}],
                      "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    return js, hdr + x.tobytes() + reps.tobytes(), len(hdr)


def wrk_point(h, work, base, body, headers, conns, dur, tag):
    script = os.path.join(work, "wrk-%s.lua" % tag)
    with open(script, "w") as f:
        f.write('wrk.method = "POST"\n')
        for k, v in headers.items():
            f.write('wrk.headers[%s] = %s\n' % (h.lua_str(k.encode()), h.lua_str(v.encode())))
        f.write('wrk.body = %s\n%s' % (h.lua_str(body), h.WRK_DONE))
    cmd = ["taskset", "-c", "1", "wrk", "-t1", "-c%d" % conns, "-d%ds" % dur, "--timeout", "20s", "-s", script,
           base + "/v2/models/tile/infer"]
    return h.wrk_result(h.run("race", cmd, timeout=dur + 60, record=dur > 1))


def pa_point(h, a, work, url, proto, case, conc, tag):
    c = CASES[case]
    x, reps = case_arrays(c)
    data = os.path.join(work, "pa-%s.json" % case)
    with open(data, "w") as f:
        json.dump({"data": [{"input": {"content": x.reshape(-1).tolist(), "shape": c["shape"]},
                             "repeats": {"content": c["repeats"], "shape": [len(c["repeats"])]}}]}, f)
    csv_path = os.path.join(work, "pa-%s.csv" % tag)
    # perf_analyzer keeps the responses of a run in memory: at 4 MiB each, time windows at
    # concurrency 8 grew it past 20 GiB until the kernel's OOM killer stopped it. Large outputs
    # are measured in windows of a fixed request count instead, and an address-space cap
    # (prlimit) turns any runaway into this point's error rather than a machine-wide OOM.
    if c["label"].endswith("MiB out)"):
        windows = ["--measurement-mode", "count_windows", "--measurement-request-count", "30", "-r", "4"]
    else:
        windows = ["--measurement-interval", str(max(300, a.dur * 1000 // 3)), "-r", "6"]
    cmd = ["prlimit", "--as=%d" % (6 << 30), "taskset", "-c", "1", "sh", os.path.join(h.ROOT, "scripts", "perf_analyzer.sh"), "-m", "tile",
           "-u", url, "-i", "http" if proto == "http-binary" else "grpc", "--input-data", data,
           "--shape", "input:" + ",".join(map(str, c["shape"])), "--shape", "repeats:%d" % len(c["repeats"]),
           "--concurrency-range", str(conc)] + windows + ["-s", "1000", "-f", csv_path]
    env = dict(os.environ, PA_DIR=os.path.join(h.ROOT, "build", "perf_analyzer"))
    p = h.run("race", cmd, timeout=a.dur * 6 + 120, env=env, check=False, record=a.dur > 1)
    if p.returncode != 0 or not os.path.exists(csv_path):
        return {"error": "exit %d: %s" % (p.returncode, " ".join((p.stdout + p.stderr).split())[-200:])}
    import csv
    rows = list(csv.DictReader(open(csv_path)))
    if not rows:
        return {"error": "perf_analyzer wrote no row"}
    r = rows[0]
    return {"rps": float(r["Inferences/Second"]), "p50_us": float(r["p50 latency"]),
            "p99_us": float(r["p99 latency"]), "errors": 0}


def race_bench(a, h):
    """The race: returns {"cells": [...], "points": [...]} for results.json."""
    work = os.path.join(a.work, "race")
    os.makedirs(work, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="tiled-race-")
    os.chmod(tmp, 0o755)
    res = {"points": [], "cells": [], "dur": a.dur, "cases": CASES, "versions": {}}
    t0 = h.cpu_times()
    res["loadavg_start"] = " ".join("%.2f" % v for v in os.getloadavg())
    try:
        plan = server_plan(a, h, tmp)
        for name in SERVERS:
            if a.race_servers and name not in a.race_servers:
                continue
            cmd, env, note, port, gport = plan[name]
            base = "http://127.0.0.1:%d" % port
            h.log("race: %s" % name)
            srv = h.Server(name, cmd, base + "/v2/health/ready", work, env, note, phase="race", timeout=120)
            try:
                res["versions"][name] = server_version(base)
                p = h.run("race", [venv_py(a, "triton"), os.path.join(RACE, "check.py"), "127.0.0.1:%d" % port,
                                   "127.0.0.1:%d" % gport, json.dumps(CASES)], timeout=300)
                checks = json.loads(p.stdout)
                for case in CASES:
                    js, binbody, hlen = bodies(CASES[case])
                    for client, proto, need in CLIENTS:
                        got = checks[case][need]
                        cell = {"server": name, "client": client, "protocol": proto, "case": case, "check": got}
                        res["cells"].append(cell)
                        if got != "ok":
                            reason = KNOWN.get((name, case)) or KNOWN.get((name, proto))
                            cell["status"] = "cannot serve: " + (reason or got)
                            h.log("  %s %s %s: %s" % (client, proto, case, cell["status"]))
                            continue
                        if (client, case) in CLIENT_LIMITS:
                            cell["status"] = "client cannot send: " + CLIENT_LIMITS[(client, case)]
                            continue
                        cell["status"] = "ok"
                        for conc in CONCS:
                            tag = "%s-%s-%s-%s-c%d" % (name, client, proto, case, conc)
                            if client == "h2load":
                                r = h2load_point(h, a, work, gport, case, conc, tag)
                            elif client == "wrk":
                                if proto == "http-json":
                                    body, hd = js, {"Content-Type": "application/json"}
                                else:
                                    body, hd = binbody, {"Content-Type": "application/octet-stream",
                                                         "Inference-Header-Content-Length": str(hlen)}
                                r = wrk_point(h, work, base, body, hd, conc, a.dur, tag)
                            else:
                                url = "127.0.0.1:%d" % (port if proto == "http-binary" else gport)
                                r = pa_point(h, a, work, url, proto, case, conc, tag)
                            # A client that stops leaves requests queued in a server that serves them
                            # one by one (Triton's Python backend, MLServer): the next point starts once
                            # one more request has come back, not into that backlog.
                            drain(base, js)
                            r.update({"server": name, "client": client, "protocol": proto, "case": case,
                                      "conc": conc})
                            if "failed to get model config" in r.get("error", ""):
                                cell["status"] = "client cannot drive: " + PA_CONFIG
                                h.log("  %s: %s" % (tag, cell["status"]))
                                break
                            res["points"].append(r)
                            if "error" in r:
                                h.log("  %s: client failed: %s" % (tag, r["error"]))
                            else:
                                h.log("  %s: %.0f req/s p50 %.0f us p99 %.0f us, %d errors"
                                      % (tag, r["rps"], r["p50_us"], r["p99_us"], r["errors"]))
            finally:
                srv.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["steal_pct"], res["busy_pct"] = h.steal_pct(t0, h.cpu_times())
    res["loadavg_end"] = " ".join("%.2f" % v for v in os.getloadavg())
    return res


def drain(base, body):
    import urllib.request
    req = urllib.request.Request(base + "/v2/models/tile/infer", data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            r.read()
    except OSError:
        pass  # an answer, even an error, says the queue in front of it has been served


def server_version(base):
    import urllib.request
    try:
        with urllib.request.urlopen(base + "/v2", timeout=10) as r:
            d = json.loads(r.read())
            return "%s %s" % (d.get("name", "?"), d.get("version", "?"))
    except (OSError, ValueError):
        return "?"


# ---------------------------------------------------------------- report

def fmt_point(p):
    if p is None:
        return "n/a"
    if "error" in p:
        if "bad_alloc" in p["error"]:
            return "client failed: perf_analyzer ran out of its 6 GiB address-space cap (std::bad_alloc)"
        return "client failed: " + p["error"][:80]
    if not p["rps"]:
        return "no answer within the point"
    s = "%s/s (%s / %s ms)" % (("%.0f" if p["rps"] >= 10 else "%.1f") % p["rps"], ms(p["p50_us"]),
                                ms(p["p99_us"]))
    if p.get("errors"):
        s += ", %d errors" % p["errors"]
    return s


def ms(us):
    return "%.2f" % (us / 1000) if us < 10000 else "%.0f" % (us / 1000)


def table(race):
    """Markdown lines: one row per client x protocol x case x concurrency, one column per server."""
    pts = {(p["server"], p["client"], p["protocol"], p["case"], p["conc"]): p for p in race["points"]}
    cells = {(c["server"], c["client"], c["protocol"], c["case"]): c for c in race["cells"]}
    servers = [s for s in SERVERS if any(c["server"] == s for c in race["cells"])]
    notes = {}

    def note(status):
        kind, _, why = status.partition(": ")
        if why not in notes:
            notes[why] = chr(ord("a") + len(notes))
        return "%s (%s)" % (kind, notes[why])
    L = ["| client | protocol | case | conc | " + " | ".join(SERVER_LABEL[s] for s in servers) +
         " | tiled / best peer |", "|---|---|---|---:|" + "---|" * len(servers) + "---:|"]
    for client, proto, _ in CLIENTS:
        for case in CASES:
            for conc in CONCS:
                row, best = [], 0.0
                for s in servers:
                    c = cells.get((s, client, proto, case))
                    if c is None:
                        row.append("not run")
                    elif c["status"] != "ok":
                        row.append(note(c["status"]))
                    else:
                        p = pts.get((s, client, proto, case, conc))
                        row.append(fmt_point(p))
                        if s != "tiled" and p and "rps" in p:
                            best = max(best, p["rps"])
                t = pts.get(("tiled", client, proto, case, conc))
                ratio = "%.1fx" % (t["rps"] / best) if t and "rps" in t and best else "n/a"
                L.append("| %s | %s | %s | %d | %s | %s |" % (client, proto, case, conc, " | ".join(row), ratio))
    L.append("")
    L.extend("(%s) %s  " % (k, why) for why, k in notes.items())
    return L


def plot(h, race, work, png):
    """Throughput per server and configuration (log scale), gnuplot as the other plots."""
    if not shutil.which("gnuplot"):
        return False
    pts = {(p["server"], p["client"], p["protocol"], p["case"], p["conc"]): p for p in race["points"]}
    configs = [(cl, pr, ca, co) for cl, pr, _ in CLIENTS for ca in CASES for co in CONCS]
    dat = os.path.join(work, "race.dat")
    servers = [s for s in SERVERS if any(c["server"] == s for c in race["cells"])]
    with open(dat, "w") as f:
        for i, s in enumerate(servers):
            f.write("%s# %s\n" % ("\n\n" if i else "", s))
            for j, (cl, pr, ca, co) in enumerate(configs):
                p = pts.get((s, cl, pr, ca, co))
                if p and "rps" in p and p["rps"] > 0:
                    f.write("%d %.1f\n" % (j, p["rps"]))
    xt = ", ".join('"%s %s %s c%d" %d' % ({"perf_analyzer": "pa"}.get(cl, cl),
                                           {"http-binary": "bin", "http-json": "json", "grpc": "grpc"}[pr], ca, co, j)
                   for j, (cl, pr, ca, co) in enumerate(configs))
    gp = ['set terminal pngcairo size 1300,600 font "sans,10"', 'set output "%s"' % png,
          'set title "Race: requests/s serving tile (server on core 0, client on core 1; higher is better; '
          'missing point = cannot serve)"',
          'set logscale y', 'set ylabel "requests/s"', 'set grid', 'set key top center horizontal',
          'set yrange [0.1:400000]',
          'set xtics rotate by 60 right font "sans,8"', 'set xtics (%s)' % xt,
          'set xrange [-0.5:%f]' % (len(configs) - 0.5), 'set bmargin 9']
    pts_style = [7, 5, 9, 11]
    gp.append("plot " + ", ".join('"%s" index %d using 1:2 with points pt %d ps 1.6 title "%s"'
                                  % (dat, i, pts_style[i % 4], SERVER_LABEL[s]) for i, s in enumerate(servers)))
    script = os.path.join(work, "race.gp")
    open(script, "w").write("\n".join(gp) + "\n")
    return h.run("report", ["gnuplot", script], timeout=60, check=False).returncode == 0


def section(race, plotted):
    L = ["## Race against inference servers", "",
         "Each server serves the tile model pinned to core 0 (`taskset -c 0`), one server at a time; the "
         "client runs on core 1. perf_analyzer (Triton's, unmodified) over HTTP with binary tensors and over "
         "gRPC, h2load over gRPC, wrk over HTTP with a v2 JSON body and with a binary-extension body, %d s per "
         "point (perf_analyzer: three stable windows; for 4 MiB outputs windows of 30 requests), concurrency "
         "1 and 8. Before its load every server answered every case over each protocol through tritonclient "
         "and each answer was compared with numpy.tile (bench/peers/race/check.py); a refused case is a "
         "\"cannot serve\" cell and was not loaded. Cells: requests/s (p50 / p99 latency in ms). Servers: %s. "
         "The machine is shared: over the phase its CPUs were %.0f%% busy (this run and others; %.1f%% "
         "stolen), load average %s at its start and %s at its end, so compare ratios within a row."
         % (race["dur"], "; ".join("%s (%s)" % (SERVER_LABEL[s], v) for s, v in race["versions"].items()),
            race.get("busy_pct", 0), race.get("steal_pct", 0), race.get("loadavg_start", "?"),
            race.get("loadavg_end", "?")), ""]
    L.append("Cases: " + "; ".join("%s = %s" % (k, v["label"]) for k, v in race["cases"].items()) + ".")
    L.append("")
    L.extend(table(race))
    L.append("")
    if plotted:
        L.append("![race requests/s](race-rps.png)")
        L.append("")
    L.append("Not raced: Triton with a C++ custom backend. Building one needs Triton's backend headers "
             "(tritonbackend.h, tritonserver.h of the triton-inference-server core and backend repositories); "
             "neither the nvidia-pytriton wheel nor any Debian package carries them, PyPI's `tritonserver` "
             "project offers no distribution pip can fetch for this machine, and this bench downloads from "
             "PyPI and Debian only.")
    L.append("")
    L.append("Clients: perf_analyzer cannot load KServe or MLServer, since it reads the model's configuration "
             "through Triton's own extension; h2load (nghttp2's C load generator) sends the same gRPC "
             "ModelInfer request (raw contents) to every server instead, one stream per connection at a time, "
             "and counts HTTP status only (the answers were checked before). p50/p99 for h2load come from its "
             "per-request log. KServe 0.21 binds 0.0.0.0 and [::] (hard-coded); every request here goes to "
             "127.0.0.1. perf_analyzer spends more per request than h2load and wrk, so where tiled "
             "answers faster than perf_analyzer asks (small outputs, and 4 MiB ones, which perf_analyzer "
             "keeps), its rows measure perf_analyzer more than the server. Triton's Python backend runs numpy.tile in a stub process beside the server, both "
             "on core 0; KServe and MLServer run their model in the server process (one worker).")
    L.append("")
    return L
