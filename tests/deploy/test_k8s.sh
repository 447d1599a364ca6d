#!/bin/sh
# test_k8s.sh - renders deploy/k8s with `kubectl kustomize` and checks the
# objects: probes, resources, security context, graceful stop budget,
# configuration, Prometheus annotations, Service, HPA and PDB wiring. The
# configuration the ConfigMap and env give the pod is also fed to
# `tiled serve --print-config`, so the daemon must accept every value.
#
#   TILED_BIN=build/tiled sh tests/deploy/test_k8s.sh
#   TILED_K8S_DIR=path/to/overlay sh tests/deploy/test_k8s.sh   (same checks)
#
# Needs kubectl (or kustomize) and /usr/bin/python3 with yaml (python3-yaml).
# Debian 12's kubectl (kubernetes-client 1.20, kustomize 2 inside) renders
# deploy/k8s the same as newer ones; `make deps` installs it when no kubectl is there.
set -u
cd "$(dirname "$0")/../.." || exit 1
: "${TILED_BIN:=build/tiled}"
: "${TILED_K8S_DIR:=deploy/k8s}"
PY=/usr/bin/python3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiled-k8s.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

if command -v kubectl >/dev/null 2>&1; then
  render="kubectl kustomize $TILED_K8S_DIR"
elif command -v kustomize >/dev/null 2>&1; then
  render="kustomize build $TILED_K8S_DIR"
else
  echo "k8s: neither kubectl nor kustomize is installed (Debian: kubernetes-client; make deps)" >&2
  echo "k8s: 0 passed, 1 failed"
  exit 1
fi
if ! $PY -c 'import yaml' 2>/dev/null; then
  echo "k8s: $PY cannot import yaml (apt-get install python3-yaml)" >&2
  echo "k8s: 0 passed, 1 failed"
  exit 1
fi
if ! $render > "$tmp/rendered.yaml" 2> "$tmp/render.err"; then
  cat "$tmp/render.err" >&2
  echo "k8s: 0 passed, 1 failed"
  exit 1
fi

[ -x "$TILED_BIN" ] && "$TILED_BIN" serve --help > "$tmp/help.txt" 2>&1

TILED_BIN="$TILED_BIN" $PY - "$tmp/rendered.yaml" "$tmp/help.txt" <<'EOF'
import os, re, subprocess, sys
import yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
help_text = open(sys.argv[2]).read() if os.path.exists(sys.argv[2]) else ""
passed = failed = 0

def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok: " + name)
    else:
        failed += 1
        print("FAIL: " + name + (" (" + str(detail) + ")" if detail else ""), file=sys.stderr)

def one(kind, api=None):
    objs = [d for d in docs if d.get("kind") == kind and (api is None or d.get("apiVersion") == api)]
    check("exactly one %s%s" % (kind, " " + api if api else ""), len(objs) == 1, len(objs))
    return objs[0] if objs else {}

def g(obj, *path, default=None):
    for p in path:
        if isinstance(obj, dict) and p in obj:
            obj = obj[p]
        elif isinstance(obj, list) and isinstance(p, int) and p < len(obj):
            obj = obj[p]
        else:
            return default
    return obj

def cpu(v):
    v = str(v)
    return float(v[:-1]) / 1000 if v.endswith("m") else float(v)

UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 1e3, "M": 1e6, "G": 1e9}
def mem(v):
    m = re.fullmatch(r"([0-9.]+)([KMG]i?)?", str(v))
    return float(m.group(1)) * UNITS.get(m.group(2) or "", 1)

def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

dep = one("Deployment", "apps/v1")
svc = one("Service", "v1")
hpa = one("HorizontalPodAutoscaler", "autoscaling/v2")
pdb = one("PodDisruptionBudget", "policy/v1")
cms = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}

pod = g(dep, "spec", "template", default={})
spec = g(pod, "spec", default={})
labels = g(pod, "metadata", "labels", default={})
ctrs = g(spec, "containers", default=[])
check("one container in the pod", len(ctrs) == 1, len(ctrs))
c = ctrs[0] if ctrs else {}
check("Deployment selector matches the pod labels", matches(g(dep, "spec", "selector", "matchLabels"), labels))
spread = g(spec, "topologySpreadConstraints", default=[])
check("every topology spread constraint selects exactly the Deployment's pods",
      spread and all(g(t, "labelSelector", "matchLabels") == g(dep, "spec", "selector", "matchLabels") for t in spread),
      spread)
check("container image is tiled", str(c.get("image", "")).split("/")[-1].split(":")[0] == "tiled", c.get("image"))

# Environment as the pod sees it: envFrom ConfigMaps, then env.
env = {}
for ef in c.get("envFrom", []):
    name = g(ef, "configMapRef", "name")
    check("envFrom ConfigMap %s is rendered" % name, name in cms)
    env.update(g(cms.get(name, {}), "data", default={}))
for e in c.get("env", []):
    env[e["name"]] = e.get("value", e.get("valueFrom"))
check("TILED_HOST=0.0.0.0", env.get("TILED_HOST") == "0.0.0.0", env.get("TILED_HOST"))
if help_text:
    known = set(re.findall(r"\b(TILED_[A-Z_]+)\b", help_text))
    unknown = sorted(k for k in env if k.startswith("TILED_") and k not in known)
    check("every TILED_* variable is a tiled option", not unknown, unknown)

ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
port = int(env.get("TILED_PORT", 8080))
check("container port http = TILED_PORT (%d)" % port, ports.get("http") == port, ports)
gport = int(env.get("TILED_GRPC_PORT", -1))
check("gRPC on at 8081, beside HTTP (TILED_GRPC_PORT)", gport == 8081, gport)
check("container port grpc = TILED_GRPC_PORT (%d)" % gport, ports.get("grpc") == gport, ports)
# Behind the Service (an L4 balancer) a long-lived gRPC connection never
# moves: a maximum connection age makes clients reconnect and spread over
# replicas the autoscaler adds, within minutes, with a grace for open calls.
age = int(env.get("TILED_GRPC_MAX_CONNECTION_AGE", 0))
grace = int(env.get("TILED_GRPC_MAX_CONNECTION_AGE_GRACE", 0))
check("gRPC connections have a maximum age (TILED_GRPC_MAX_CONNECTION_AGE) of minutes", 60 <= age <= 3600, age)
check("and a bounded grace for their calls (TILED_GRPC_MAX_CONNECTION_AGE_GRACE)", 0 < grace <= age, grace)

def probe_port(p):
    v = g(c, p, "httpGet", "port")
    return ports.get(v) if isinstance(v, str) else v
check("readinessProbe httpGet /v2/health/ready", g(c, "readinessProbe", "httpGet", "path") == "/v2/health/ready")
check("readinessProbe on the serving port", probe_port("readinessProbe") == port)
check("livenessProbe httpGet /v2/health/live", g(c, "livenessProbe", "httpGet", "path") == "/v2/health/live")
check("livenessProbe on the serving port", probe_port("livenessProbe") == port)
check("liveness is more patient than readiness",
      g(c, "livenessProbe", "failureThreshold", default=3) * g(c, "livenessProbe", "periodSeconds", default=10)
      > g(c, "readinessProbe", "failureThreshold", default=3) * g(c, "readinessProbe", "periodSeconds", default=10))

res = c.get("resources", {})
for kind in ("cpu", "memory"):
    rq, lim = g(res, "requests", kind), g(res, "limits", kind)
    check("resources %s request and limit set" % kind, rq is not None and lim is not None, res)
    if rq is not None and lim is not None:
        conv = cpu if kind == "cpu" else mem
        check("resources %s request <= limit" % kind, conv(rq) <= conv(lim), (rq, lim))
max_body = env.get("TILED_MAX_BODY")
if max_body and g(res, "limits", "memory"):
    check("memory limit above TILED_MAX_BODY", mem(g(res, "limits", "memory")) > mem(str(max_body).replace("M", "Mi").replace("G", "Gi").replace("K", "Ki")))
wk = env.get("TILED_WORKERS")
check("TILED_WORKERS follows the CPU limit",
      isinstance(wk, dict) and g(wk, "resourceFieldRef", "resource") == "limits.cpu", wk)

psc, csc = spec.get("securityContext", {}), c.get("securityContext", {})
def sc(key):
    return csc.get(key, psc.get(key))
check("runAsNonRoot", sc("runAsNonRoot") is True)
check("runAsUser is not root", sc("runAsUser") not in (None, 0), sc("runAsUser"))
check("readOnlyRootFilesystem", csc.get("readOnlyRootFilesystem") is True)
check("allowPrivilegeEscalation false", csc.get("allowPrivilegeEscalation") is False)
check("capabilities drop ALL", g(csc, "capabilities", "drop", default=[]) == ["ALL"] and not g(csc, "capabilities", "add"))
check("privileged is not set", not csc.get("privileged"))
check("seccomp RuntimeDefault", g(sc("seccompProfile") or {}, "type") == "RuntimeDefault")
check("no service account token", spec.get("automountServiceAccountToken") is False)

cmd = g(c, "lifecycle", "preStop", "exec", "command", default=[])
sleep = int(cmd[1]) if len(cmd) == 2 and cmd[0] in ("/bin/sleep", "/usr/bin/sleep") and cmd[1].isdigit() else None
check("preStop exec sleep", sleep is not None and sleep > 0, cmd)
drain = int(env.get("TILED_DRAIN_TIMEOUT", 20))
grace = spec.get("terminationGracePeriodSeconds", 30)
check("terminationGracePeriodSeconds %s > preStop %s + drain timeout %s" % (grace, sleep, drain),
      sleep is not None and grace > sleep + drain)
check("rolling update never drops below the desired replicas",
      g(dep, "spec", "strategy", "rollingUpdate", "maxUnavailable") in (0, "0", "0%"))

ann = g(pod, "metadata", "annotations", default={})
check("prometheus.io/scrape true", ann.get("prometheus.io/scrape") == "true")
check("prometheus.io/port is the serving port", ann.get("prometheus.io/port") == str(port))
check("prometheus.io/path /metrics", ann.get("prometheus.io/path") == "/metrics")

check("Service selects the pods", matches(g(svc, "spec", "selector"), labels))
sp = g(svc, "spec", "ports", default=[{}])[0]
tp = sp.get("targetPort")
check("Service targetPort is the container port", (ports.get(tp) if isinstance(tp, str) else tp) == port, tp)
to_grpc = [p for p in g(svc, "spec", "ports", default=[])
           if (ports.get(p.get("targetPort")) if isinstance(p.get("targetPort"), str) else p.get("targetPort")) == gport]
check("Service exposes the gRPC port", len(to_grpc) == 1, g(svc, "spec", "ports"))
check("Service says the gRPC port speaks h2c (appProtocol)",
      len(to_grpc) == 1 and to_grpc[0].get("appProtocol") == "kubernetes.io/h2c", to_grpc)

check("HPA targets the Deployment",
      g(hpa, "spec", "scaleTargetRef", "kind") == "Deployment"
      and g(hpa, "spec", "scaleTargetRef", "name") == g(dep, "metadata", "name"))
mn, mx = g(hpa, "spec", "minReplicas", default=1), g(hpa, "spec", "maxReplicas", default=0)
check("HPA 2 <= minReplicas <= maxReplicas", 2 <= mn <= mx, (mn, mx))
cpu_metric = [m for m in g(hpa, "spec", "metrics", default=[])
              if m.get("type") == "Resource" and g(m, "resource", "name") == "cpu"]
check("HPA scales on CPU utilization",
      len(cpu_metric) == 1 and g(cpu_metric[0], "resource", "target", "type") == "Utilization"
      and 0 < g(cpu_metric[0], "resource", "target", "averageUtilization", default=0) <= 100)
check("HPA CPU utilization has a CPU request to work from", g(res, "requests", "cpu") is not None)

check("PDB selects the pods", matches(g(pdb, "spec", "selector", "matchLabels"), labels))
mu, ma = g(pdb, "spec", "maxUnavailable"), g(pdb, "spec", "minAvailable")
check("PDB sets exactly one of maxUnavailable, minAvailable", (mu is None) != (ma is None), (mu, ma))
check("PDB lets a drain evict a pod at minReplicas",
      (mu is not None and int(mu) >= 1) or (ma is not None and int(ma) < mn), (mu, ma, mn))

# The daemon itself must accept the configuration the pod gets.
binary = os.environ.get("TILED_BIN", "")
if os.access(binary, os.X_OK):
    penv = {"PATH": "/usr/bin:/bin"}
    penv.update({k: str(v) for k, v in env.items() if isinstance(v, str)})
    penv["TILED_WORKERS"] = str(int(cpu(g(res, "limits", "cpu", default=1)) + 0.999))
    r = subprocess.run([binary, "serve", "--print-config"], env=penv, capture_output=True, text=True)
    cfg = dict(l.split(" = ", 1) for l in r.stdout.splitlines() if " = " in l)
    check("tiled serve --print-config accepts the pod's environment", r.returncode == 0, r.stderr.strip())
    check("effective host 0.0.0.0, port %d, drain-timeout %d" % (port, drain),
          cfg.get("host") == "0.0.0.0" and cfg.get("port") == str(port) and cfg.get("drain-timeout") == str(drain), cfg)
    check("effective grpc-port %d" % gport, cfg.get("grpc-port") == str(gport), cfg.get("grpc-port"))
    # Everything the budgets let the daemon hold fits the pod's memory limit.
    sys.path.insert(0, "tests/deploy")
    import memory_bound
    worst, limit = memory_bound.worst_case(cfg), mem(g(res, "limits", "memory", default=0))
    check("the most the daemon may hold (%s MiB, docs/operations.md, Memory) fits the memory limit (%.0f MiB)"
          % (worst and worst >> 20, limit / 2**20), worst is not None and worst <= limit,
          memory_bound.terms(cfg))
    check("effective grpc-max-connection-age %d, grace %d" % (age, grace),
          cfg.get("grpc-max-connection-age") == str(age) and cfg.get("grpc-max-connection-age-grace") == str(grace),
          (cfg.get("grpc-max-connection-age"), cfg.get("grpc-max-connection-age-grace")))
else:
    print("k8s: %s not built; configuration not checked against the daemon" % binary)

print("k8s: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
EOF
