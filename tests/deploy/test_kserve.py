"""deploy/kserve against KServe's own schema, without a cluster.

Each manifest is deserialised strictly into the `kserve` package's models
(V1alpha1ServingRuntime, V1beta1InferenceService, and the Kubernetes models
they embed): every key must be a field the model knows, every value of the
type it declares, and each model is constructed, so required fields are
checked by the models themselves. Then what makes the pair work is checked:
the InferenceService picks the runtime and a model format it supports, speaks
v2, is named after the model tiled serves, probes tiled's health endpoints on
the port tiled listens on (the environment is fed to `tiled serve
--print-config`), and runs under the same security context as deploy/k8s;
the gRPC InferenceService routes to the port tiled serves gRPC on, named h2c
as Knative requires.
Run with the virtual environment scripts/venv.sh makes:
  cd tests/deploy && ../../build/venv/bin/python -m unittest test_kserve
"""
import os
import re
import subprocess
import unittest

import kserve.models
import kubernetes.client.models
import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NATIVE = {"str": str, "int": int, "bool": bool, "float": (int, float)}


class StrictError(ValueError):
    pass


def model_class(name):
    for module in (kserve.models, kubernetes.client.models):
        if hasattr(module, name):
            return getattr(module, name)
    raise StrictError(f"no model class {name}")


def strict(value, kind, path="$"):
    """Deserialises `value` as the OpenAPI type `kind`, refusing anything the model does not declare."""
    if value is None:
        return None
    if kind == "object":
        return value
    if kind in NATIVE:
        if not isinstance(value, NATIVE[kind]) or (kind != "bool" and isinstance(value, bool)):
            raise StrictError(f"{path}: {value!r} is not {kind}")
        return value
    m = re.fullmatch(r"[lL]ist\[(.*)\]", kind)
    if m:
        if not isinstance(value, list):
            raise StrictError(f"{path}: expected a list")
        return [strict(v, m.group(1), f"{path}[{i}]") for i, v in enumerate(value)]
    m = re.fullmatch(r"dict\(str, (.*)\)|[dD]ict\[str, (.*)\]", kind)
    if m:
        if not isinstance(value, dict):
            raise StrictError(f"{path}: expected a map")
        return {k: strict(v, m.group(1) or m.group(2), f"{path}.{k}") for k, v in value.items()}
    cls = model_class(kind)
    if not isinstance(value, dict):
        raise StrictError(f"{path}: expected an object for {kind}")
    field_of = {json_key: attr for attr, json_key in cls.attribute_map.items()}
    kwargs = {}
    for key, v in value.items():
        if key not in field_of:
            raise StrictError(f"{path}: unknown field '{key}' for {kind}")
        attr = field_of[key]
        kwargs[attr] = strict(v, cls.openapi_types[attr], f"{path}.{key}")
    return cls(**kwargs)  # the model checks its required fields


def load(name):
    with open(os.path.join(ROOT, "deploy", "kserve", name)) as f:
        return yaml.safe_load(f)


class StrictDeserialiser(unittest.TestCase):
    """The checker itself refuses what KServe's schema does not allow."""

    def test_refuses_unknown_fields_wrong_types_and_missing_required(self):
        good = load("servingruntime.yaml")
        strict(good, "V1alpha1ServingRuntime")
        bad_key = yaml.safe_load(yaml.safe_dump(good))
        bad_key["spec"]["containers"][0]["readinesProbe"] = bad_key["spec"]["containers"][0].pop("readinessProbe")
        bad_type = yaml.safe_load(yaml.safe_dump(good))
        bad_type["spec"]["multiModel"] = "no"
        missing = yaml.safe_load(yaml.safe_dump(good))
        del missing["spec"]["containers"][0]["name"]
        for doc, word in ((bad_key, "unknown field 'readinesProbe'"), (bad_type, "is not bool"),
                          (missing, "name")):
            with self.assertRaises(ValueError) as cm:
                strict(doc, "V1alpha1ServingRuntime")
            self.assertIn(word, str(cm.exception))


class KServeManifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sr_doc = load("servingruntime.yaml")
        cls.isvc_doc = load("inferenceservice.yaml")
        cls.sr = strict(cls.sr_doc, "V1alpha1ServingRuntime")
        cls.isvc = strict(cls.isvc_doc, "V1beta1InferenceService")
        cls.grpc_doc = load("inferenceservice-grpc.yaml")
        cls.grpc = strict(cls.grpc_doc, "V1beta1InferenceService")
        with open(os.path.join(ROOT, "deploy", "k8s", "deployment.yaml")) as f:
            cls.deployment = yaml.safe_load(f)

    def test_kinds_and_api_versions(self):
        self.assertEqual((self.sr.api_version, self.sr.kind), ("serving.kserve.io/v1alpha1", "ServingRuntime"))
        self.assertEqual((self.isvc.api_version, self.isvc.kind), ("serving.kserve.io/v1beta1", "InferenceService"))

    def test_inference_service_selects_the_runtime_as_a_v2_model_server(self):
        model = self.isvc.spec.predictor.model
        self.assertEqual(model.runtime, self.sr.metadata.name)
        self.assertEqual(model.protocol_version, "v2")
        self.assertIn("v2", self.sr.spec.protocol_versions)
        formats = {(f.name, f.version) for f in self.sr.spec.supported_model_formats}
        self.assertIn((model.model_format.name, model.model_format.version), formats)
        # KServe routes /v2/models/<InferenceService name>/infer: the name is the model tiled serves.
        self.assertEqual(self.isvc.metadata.name, "tile")
        self.assertIsNone(model.storage_uri, "the model is built in; nothing to download")
        self.assertFalse(self.sr.spec.multi_model)

    def container(self):
        (c,) = self.sr.spec.containers
        return c

    def test_container_port_probes_and_resources(self):
        c = self.container()
        self.assertEqual(c.name, "kserve-container")
        self.assertEqual([(p.container_port, p.protocol) for p in c.ports], [(8080, "TCP")])
        self.assertEqual((c.readiness_probe.http_get.path, c.readiness_probe.http_get.port), ("/v2/health/ready", 8080))
        self.assertEqual((c.liveness_probe.http_get.path, c.liveness_probe.http_get.port), ("/v2/health/live", 8080))
        for res in (c.resources, self.isvc.spec.predictor.model.resources):
            self.assertTrue(res.requests["cpu"] and res.requests["memory"])
            self.assertTrue(res.limits["cpu"] and res.limits["memory"])

    def effective_config(self):
        env = dict(os.environ)
        env = {k: v for k, v in env.items() if not k.startswith("TILED_")}
        for e in self.container().env:
            env[e.name] = e.value if e.value is not None else "2"  # TILED_WORKERS from limits.cpu
        tiled = os.path.abspath(os.environ.get("TILED_BIN", os.path.join(ROOT, "build", "tiled")))
        r = subprocess.run([tiled, "serve", "--print-config"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return dict(line.split(" = ", 1) for line in r.stdout.splitlines() if " = " in line)

    def test_tiled_accepts_the_environment_and_listens_on_the_probed_port(self):
        config = self.effective_config()
        self.assertEqual(config["host"], "0.0.0.0")
        self.assertEqual(int(config["port"]), self.container().ports[0].container_port)

    def test_grpc_inference_service_routes_to_the_grpc_port(self):
        model = self.grpc.spec.predictor.model
        self.assertEqual(model.runtime, self.sr.metadata.name)
        self.assertEqual(model.protocol_version, "grpc-v2")
        self.assertIn("grpc-v2", self.sr.spec.protocol_versions)
        self.assertEqual(model.model_format, self.isvc.spec.predictor.model.model_format)
        self.assertIsNone(model.storage_uri)
        # Knative routes one port, HTTP/2 end to end when it is named h2c.
        self.assertEqual([(p.name, p.container_port, p.protocol) for p in model.ports], [("h2c", 8081, "TCP")])
        config = self.effective_config()
        self.assertEqual(int(config["grpc-port"]), 8081)
        # Long-lived gRPC connections spread over the replicas the autoscaler adds.
        self.assertTrue(60 <= int(config["grpc-max-connection-age"]) <= 3600, config["grpc-max-connection-age"])
        self.assertTrue(0 < int(config["grpc-max-connection-age-grace"]) <= int(config["grpc-max-connection-age"]))
        rest = dict(self.isvc_doc["spec"]["predictor"])
        grpc = dict(self.grpc_doc["spec"]["predictor"])
        del rest["model"], grpc["model"]
        self.assertEqual(grpc, rest)  # replicas, drain, security context: the REST service's

    def test_the_memory_limits_hold_what_the_budgets_allow(self):
        """The runtime's sizes are deploy/k8s's, and both memory limits (the runtime's and the
        InferenceService's, which overrides it) hold the most the daemon may hold with them
        (docs/operations.md, Memory)."""
        import memory_bound
        with open(os.path.join(ROOT, "deploy", "k8s", "kustomization.yaml")) as f:
            literals = yaml.safe_load(f)["configMapGenerator"][0]["literals"]
        k8s = dict(item.split("=", 1) for item in literals)
        runtime = {e.name: e.value for e in self.container().env}
        for name in ("TILED_MAX_BODY", "TILED_MAX_MEMORY", "TILED_MAX_CONNECTIONS", "TILED_MAX_OUTPUT"):
            self.assertEqual(runtime.get(name), k8s.get(name), name)
        worst = memory_bound.worst_case(self.effective_config())
        self.assertIsNotNone(worst, "TILED_MAX_MEMORY is not set: nothing bounds the requests' memory")
        for res in (self.container().resources, self.isvc.spec.predictor.model.resources,
                    self.grpc.spec.predictor.model.resources):
            limit = res.limits["memory"]
            self.assertRegex(limit, r"^[0-9]+Gi$")
            self.assertLessEqual(worst, int(limit[:-2]) << 30, (limit, worst >> 20))

    def test_same_security_context_as_deploy_k8s(self):
        pod = self.deployment["spec"]["template"]["spec"]
        (k8s_container,) = pod["containers"]
        self.assertEqual(self.isvc_doc["spec"]["predictor"]["securityContext"], pod["securityContext"])
        sr_sc = self.sr_doc["spec"]["containers"][0]["securityContext"]
        # A ServingRuntime has no pod-level context, so its container carries the pod's settings too.
        self.assertEqual(sr_sc, {**k8s_container["securityContext"], **pod["securityContext"]})
        self.assertEqual(self.isvc_doc["spec"]["predictor"]["automountServiceAccountToken"],
                         pod["automountServiceAccountToken"])


if __name__ == "__main__":
    unittest.main()
