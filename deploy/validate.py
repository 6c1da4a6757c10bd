#!/usr/bin/python3
"""Offline checks of the Kubernetes templates in deploy/kubernetes.

    deploy/validate.py [KUSTOMIZATION_DIR ...]     (default: every base and overlay)

Each directory is rendered with `kubectl kustomize`, then every object is
checked three ways:

1. Schemas. Core objects (Job, Service, Deployment) with npm's
   kubernetes-models (types, enums, required fields; deploy/validate_core.mjs).
   Custom resources (JobSet, TrainJob, ClusterTrainingRuntime, PyTorchJob,
   Volcano Job) against their CRD's openAPIV3Schema
   (third_party/k8s-schemas) with python3-jsonschema. Every pod template
   and Job spec, whatever holds it, also against the pod and Job schemas the
   JobSet CRD embeds. Unknown fields are refused (the CRDs allow them;
   a typo would otherwise pass).
2. What these templates must get right for trainrun (the lint): the pod's
   subdomain matches a headless Service (or the JobSet's network), the
   rendezvous port is declared, the probes ask the agent's port (and
   readiness asks `trainrun.ready`) while the agent binds the pod's
   address, the grace period exceeds trainrun's, /dev/shm is a memory
   volume, and the podFailurePolicy's exit codes are the README's.

Prints one line per problem ("overlays/gpu-4x8: Job trainrun: ...") and exits
1 when there is any; tests/python/test_deploy.py feeds it broken copies."""
import argparse
import copy
import gzip
import json
import pathlib
import re
import shutil
import subprocess
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent
ROOT = DEPLOY.parent
KUBERNETES = DEPLOY / "kubernetes"
SCHEMAS = ROOT / "third_party" / "k8s-schemas"

CRDS = {
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobset.x-k8s.io_jobsets.yaml.gz",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainer.kubeflow.org_trainjobs.yaml.gz",
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): "trainer.kubeflow.org_clustertrainingruntimes.yaml.gz",
    ("kubeflow.org/v1", "PyTorchJob"): "kubeflow.org_pytorchjobs.yaml.gz",
    ("batch.volcano.sh/v1alpha1", "Job"): "batch.volcano.sh_jobs.yaml.gz",
}
CORE = {"v1", "apps/v1", "batch/v1"}
AGENT_READY_SERVICE = "trainrun.ready"
DEFAULT_GRACE_PERIOD = 5.0  # trainrun's --grace-period default
GRACE_MARGIN = 10  # seconds the pod's grace must exceed trainrun's: the agent's own exit, the log drain


def kustomizations():
    """Every directory with a kustomization.yaml under deploy/kubernetes."""
    return sorted(p.parent for p in KUBERNETES.rglob("kustomization.yaml"))


def render(directory):
    out = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ValueError(f"kubectl kustomize failed: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


# ---- schemas -------------------------------------------------------------------------------------------------

def strict(schema):
    """The schema with additionalProperties: false wherever properties are listed and unknown fields are not
    explicitly preserved, so a misspelt field is an error."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node and \
                    not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    return schema


class Schemas:
    def __init__(self):
        import jsonschema  # python3-jsonschema
        self.jsonschema = jsonschema
        self.crds = {}
        for (api_version, kind), file in CRDS.items():
            crd = yaml.safe_load(gzip.open(SCHEMAS / file, "rt"))
            version = api_version.split("/")[1]
            for v in crd["spec"]["versions"]:
                if v["name"] == version:
                    self.crds[(api_version, kind)] = strict(v["schema"]["openAPIV3Schema"])
        jobset = self.crds[("jobset.x-k8s.io/v1alpha2", "JobSet")]
        job_template = jobset["properties"]["spec"]["properties"]["replicatedJobs"]["items"]["properties"]["template"]
        self.job_spec = job_template["properties"]["spec"]
        self.pod_spec = self.job_spec["properties"]["template"]["properties"]["spec"]

    def errors(self, schema, instance):
        validator = self.jsonschema.Draft7Validator(schema)
        return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))]


def core_problems(docs):
    """kubernetes-models' verdict on the core objects (deploy/node_modules, installed by scripts/setup.sh)."""
    core = [d for d in docs if d.get("apiVersion") in CORE]
    if not core:
        return []
    if shutil.which("node") is None or not (DEPLOY / "node_modules" / "kubernetes-models").exists():
        raise RuntimeError("core objects need node and deploy/node_modules (run scripts/setup.sh)")
    out = subprocess.run(["node", str(DEPLOY / "validate_core.mjs")], input=json.dumps(core), capture_output=True,
                         text=True, timeout=120, cwd=DEPLOY)
    if out.returncode != 0:
        raise RuntimeError(f"validate_core.mjs failed: {out.stderr.strip()}")
    return [f"{p['kind']} {p['name']}: {p['message']}" for p in json.loads(out.stdout)]


# ---- where the pods are ---------------------------------------------------------------------------------------

def job_specs(doc):
    """(where, Job spec) for every batch Job spec an object holds."""
    kind, api = doc.get("kind"), doc.get("apiVersion")
    spec = doc.get("spec") or {}
    if api == "batch/v1" and kind == "Job":
        yield "spec", spec
    elif kind == "JobSet":
        for i, rj in enumerate(spec.get("replicatedJobs") or []):
            yield f"spec.replicatedJobs[{i}].template.spec", (rj.get("template") or {}).get("spec") or {}
    elif kind == "ClusterTrainingRuntime":
        for i, rj in enumerate(((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []):
            yield f"spec.template.spec.replicatedJobs[{i}].template.spec", (rj.get("template") or {}).get("spec") or {}


def pod_specs(doc):
    """(where, pod spec, owning Job spec or None) for every pod template an object holds."""
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    for where, job in job_specs(doc):
        yield f"{where}.template.spec", ((job.get("template") or {}).get("spec") or {}), job
    if kind == "Deployment":
        yield "spec.template.spec", (spec.get("template") or {}).get("spec") or {}, None
    elif kind == "PyTorchJob":
        for role, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
            pod = (replica.get("template") or {}).get("spec") or {}
            yield f"spec.pytorchReplicaSpecs.{role}.template.spec", pod, None
    elif doc.get("apiVersion", "").startswith("batch.volcano.sh/"):
        for i, task in enumerate(spec.get("tasks") or []):
            yield f"spec.tasks[{i}].template.spec", (task.get("template") or {}).get("spec") or {}, None


# ---- the lint -------------------------------------------------------------------------------------------------

def readme_exit_codes():
    """{'FailJob': {codes}, 'Ignore': {codes}} from the README's exit-code table (rows of one code)."""
    table = {"FailJob": set(), "Ignore": set()}
    for line in (ROOT / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"\d+", cells[0]) and cells[3] in table:
            table[cells[3]].add(int(cells[0]))
    if not table["FailJob"]:
        raise RuntimeError("README.md: no exit-code table with a podFailurePolicy column found")
    return table


def env_of(container):
    """The container's plain env values, and the names set from the pod's fields."""
    values, fields = {}, {}
    for e in container.get("env") or []:
        if "value" in e:
            values[e["name"]] = str(e["value"])
        field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field:
            fields[e["name"]] = field
    return values, fields


def trainrun_container(pod):
    for c in pod.get("containers") or []:
        if (c.get("command") or [None])[0] == "trainrun" and "store" not in (c.get("command") or []):
            return c
    return None


def lint_pod(where, pod, job, doc, docs, codes):
    problems = []
    container = trainrun_container(pod)
    if container is None:
        return problems
    name = container.get("name")
    values, fields = env_of(container)
    ports = {p.get("containerPort") for p in container.get("ports") or []}

    # The agent's service binds the pod's address, and both probes ask it.
    agent_port = values.get("TRAINRUN_AGENT_PORT")
    if agent_port is None:
        problems.append(f"{where}: container {name} sets no TRAINRUN_AGENT_PORT (the probes need the agent service)")
    else:
        if fields.get("TRAINRUN_AGENT_HOST") != "status.podIP":
            problems.append(f"{where}: TRAINRUN_AGENT_HOST must come from status.podIP, so the kubelet's probes "
                            "reach the agent")
        for probe in ("livenessProbe", "readinessProbe"):
            grpc = (container.get(probe) or {}).get("grpc")
            if not grpc:
                problems.append(f"{where}: container {name} has no gRPC {probe}")
            elif str(grpc.get("port")) != agent_port:
                problems.append(f"{where}: the {probe} asks port {grpc.get('port')}, but the agent serves "
                                f"TRAINRUN_AGENT_PORT={agent_port}")
            elif probe == "readinessProbe" and grpc.get("service") != AGENT_READY_SERVICE:
                problems.append(f"{where}: the readinessProbe must ask service {AGENT_READY_SERVICE!r}, not "
                                f"{grpc.get('service')!r}")

    # The store's port is declared where this pod may host it.
    master_port = values.get("PET_MASTER_PORT")
    if master_port is not None and int(master_port) not in ports:
        problems.append(f"{where}: the rendezvous port {master_port} (PET_MASTER_PORT) is not a containerPort")

    # The pod outlives trainrun's own stopping: SIGTERM, its grace, SIGKILL.
    trainrun_grace = float(values.get("TRAINRUN_GRACE_PERIOD", DEFAULT_GRACE_PERIOD))
    pod_grace = pod.get("terminationGracePeriodSeconds", 30)
    if pod_grace < trainrun_grace + GRACE_MARGIN:
        problems.append(f"{where}: terminationGracePeriodSeconds {pod_grace} must exceed trainrun's grace period "
                        f"{trainrun_grace:g} s by {GRACE_MARGIN} s, or the kubelet kills the workers mid-stop")

    # /dev/shm from memory.
    memory_volumes = {v["name"] for v in pod.get("volumes") or []
                      if (v.get("emptyDir") or {}).get("medium") == "Memory"}
    if not any(m.get("mountPath") == "/dev/shm" and m.get("name") in memory_volumes
               for m in container.get("volumeMounts") or []):
        problems.append(f"{where}: container {name} must mount a memory emptyDir at /dev/shm (the container "
                        "runtime's 64 MiB is too small for shared-memory collectives)")

    # The pod's DNS name: a headless Service of its subdomain (plain Jobs) or the JobSet's network.
    if doc.get("kind") == "Job" and doc.get("apiVersion") == "batch/v1" and "PET_MASTER_ADDR" in values:
        subdomain = pod.get("subdomain")
        headless = {d["metadata"]["name"] for d in docs if d.get("kind") == "Service"
                    and (d.get("spec") or {}).get("clusterIP") == "None"}
        if subdomain not in headless:
            problems.append(f"{where}: subdomain {subdomain!r} is not a headless Service of this render "
                            f"({sorted(headless) or 'none'}): pods get no DNS names")
        else:
            service = next(d for d in docs if d.get("kind") == "Service" and d["metadata"]["name"] == subdomain)
            if not service["spec"].get("publishNotReadyAddresses"):
                problems.append(f"{where}: Service {subdomain} must set publishNotReadyAddresses, or node 0's name "
                                "resolves only once it is ready (which needs the others)")
        master = values["PET_MASTER_ADDR"]
        expected = f"{doc['metadata']['name']}-0.{subdomain}"
        if master.split(".")[:2] != expected.split("."):
            problems.append(f"{where}: PET_MASTER_ADDR {master!r} is not pod 0's name {expected!r}")
    if doc.get("kind") == "JobSet":
        network = (doc.get("spec") or {}).get("network") or {}
        if pod.get("subdomain") and pod["subdomain"] != network.get("subdomain"):
            problems.append(f"{where}: subdomain {pod['subdomain']!r} differs from the JobSet's network.subdomain "
                            f"{network.get('subdomain')!r}")

    # Exit codes: what fails the job at once and what is ignored, as the README documents.
    if job is not None:
        rules = (job.get("podFailurePolicy") or {}).get("rules") or []
        if not rules:
            problems.append(f"{where}: the Job has no podFailurePolicy (permanent exit codes would be retried)")
        else:
            if pod.get("restartPolicy") != "Never":
                problems.append(f"{where}: podFailurePolicy needs restartPolicy Never")
            for action in ("FailJob", "Ignore"):
                got = set()
                for r in rules:
                    on = r.get("onExitCodes") or {}
                    if r.get("action") == action and on.get("operator") == "In":
                        if on.get("containerName") not in (None, name):
                            problems.append(f"{where}: a {action} rule names container {on.get('containerName')!r}, "
                                            f"not {name!r}")
                        got |= set(on.get("values") or [])
                if got != codes[action]:
                    problems.append(f"{where}: podFailurePolicy {action} exit codes {sorted(got)} differ from the "
                                    f"README's {sorted(codes[action])}")
            if not any(r.get("action") == "Ignore" and any(c.get("type") == "DisruptionTarget"
                                                          for c in r.get("onPodConditions") or [])
                       for r in rules):
                problems.append(f"{where}: preemption (DisruptionTarget) must be ignored by the podFailurePolicy")
    if doc.get("apiVersion", "").startswith("batch.volcano.sh/"):
        for task in (doc.get("spec") or {}).get("tasks") or []:
            aborts = {p.get("exitCode") for p in task.get("policies") or [] if p.get("action") == "AbortJob"}
            if aborts != codes["FailJob"]:
                problems.append(f"{where}: AbortJob exit codes {sorted(aborts)} differ from the README's permanent "
                                f"{sorted(codes['FailJob'])}")
    return problems


# ---- driver -----------------------------------------------------------------------------------------------------

def check(directory, schemas, codes):
    """Every problem of one kustomization, as lines."""
    try:
        docs = render(directory)
    except ValueError as e:
        return [str(e)]
    problems = [f"core schema: {p}" for p in core_problems(docs)]
    for doc in docs:
        label = f"{doc.get('kind')} {(doc.get('metadata') or {}).get('name', '?')}"
        crd = schemas.crds.get((doc.get("apiVersion"), doc.get("kind")))
        if crd is not None:
            problems += [f"{label}: CRD schema: {e}" for e in schemas.errors(crd, doc)]
        elif doc.get("apiVersion") not in CORE:
            problems.append(f"{label}: no schema for {doc.get('apiVersion')} {doc.get('kind')}")
        for where, spec in job_specs(doc):
            problems += [f"{label}: Job schema at {where}: {e}" for e in schemas.errors(schemas.job_spec, spec)]
        for where, pod, job in pod_specs(doc):
            if job is None:  # (those in Jobs were checked with their Job)
                problems += [f"{label}: pod schema at {where}: {e}" for e in schemas.errors(schemas.pod_spec, pod)]
            problems += [f"{label}: {p}" for p in lint_pod(where, pod, job, doc, docs, codes)]
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=pathlib.Path, help="kustomization directories (default: all)")
    args = ap.parse_args()
    schemas, codes = Schemas(), readme_exit_codes()
    dirs = args.dirs or kustomizations()
    failed = 0
    for d in dirs:
        problems = check(d, schemas, codes)
        try:
            name = d.resolve().relative_to(KUBERNETES)
        except ValueError:
            name = d
        print(f"{name}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for p in problems:
            print(f"  {name}: {p}")
        failed += bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
