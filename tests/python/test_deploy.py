"""deploy/: the Kubernetes templates render and pass deploy/validate.py (schemas and the trainrun lint), and
every check fails on a broken copy of a template, naming what is wrong; the Slurm script and the container
recipe hold what they must."""
import pathlib
import shutil
import subprocess

import pytest

from built_tree import ROOT

DEPLOY = ROOT / "deploy"
VALIDATE = DEPLOY / "validate.py"


def _missing_tools():
    if shutil.which("kubectl") is None:
        return "kubectl is not installed (kubectl kustomize renders the templates)"
    if shutil.which("node") is None or not (DEPLOY / "node_modules" / "kubernetes-models").exists():
        return "node or deploy/node_modules is missing (scripts/setup.sh installs kubernetes-models with npm)"
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return "python3-jsonschema is not installed"
    return None


pytestmark = pytest.mark.skipif(_missing_tools() is not None, reason=_missing_tools() or "")


def _validate(*dirs):
    out = subprocess.run(["/usr/bin/python3", str(VALIDATE), *map(str, dirs)], capture_output=True, text=True,
                         timeout=300)
    return out.returncode, out.stdout + out.stderr


def test_every_template_renders_and_passes():
    rc, out = _validate()
    assert rc == 0, out
    for name in ("indexed-job", "elastic", "jobset", "trainer", "pytorchjob", "volcano", "overlays/cpu-2x2",
                 "overlays/gpu-4x8", "overlays/jobset-gpu-2x8"):
        assert f"{name}: ok" in out, out


def test_the_readme_exit_codes_are_what_the_lint_enforces():
    import importlib.util
    spec = importlib.util.spec_from_file_location("deploy_validate", VALIDATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.readme_exit_codes() == {"FailJob": {2, 126, 127, 139}, "Ignore": {138}}


def test_the_overlays_change_the_shape():
    out = subprocess.run(["kubectl", "kustomize", str(DEPLOY / "kubernetes" / "overlays" / "gpu-4x8")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "completions: 4" in out and 'value: "8"' in out and "nvidia.com/gpu" in out
    assert "image: registry.example.com/trainrun:0.1-cuda" in out


# (template file, text to replace, replacement, what the validator must say)
BROKEN = [
    ("indexed-job/job.yaml", "restartPolicy: Never", "restartPolicy: Nevr",
     "core schema: Job trainrun: data/spec/template/spec/restartPolicy must be equal to one of the allowed values"),
    ("jobset/jobset.yaml", "terminationGracePeriodSeconds: 60", "terminationGracePeriodSecond: 60",
     "Additional properties are not allowed ('terminationGracePeriodSecond' was unexpected)"),
    ("jobset/jobset.yaml", "action: FailJobSet", "action: FailJobset", "'FailJobset' is not one of"),
    ("pytorchjob/pytorchjob.yaml", "nprocPerNode:", "nprocsPerNode:", "'nprocsPerNode' was unexpected"),
    ("volcano/job.yaml", "      replicas: 2\n", "      replicas: two\n", "'two' is not of type 'integer'"),
    ("elastic/store.yaml", "containerPort: 29400", "containerPort: store",
     "core schema: Deployment trainrun-store"),
    ("indexed-job/job.yaml", "service: trainrun.ready", "service: ready",
     "the readinessProbe must ask service 'trainrun.ready', not 'ready'"),
    ("indexed-job/job.yaml", "          livenessProbe:\n            grpc:\n              port: 29501",
     "          livenessProbe:\n            grpc:\n              port: 29511",
     "the livenessProbe asks port 29511, but the agent serves TRAINRUN_AGENT_PORT=29501"),
    ("indexed-job/job.yaml", "fieldPath: status.podIP", "fieldPath: status.hostIP",
     "TRAINRUN_AGENT_HOST must come from status.podIP"),
    ("indexed-job/job.yaml", "mountPath: /dev/shm", "mountPath: /dev/shmem",
     "must mount a memory emptyDir at /dev/shm"),
    ("indexed-job/job.yaml", "terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 20",
     "terminationGracePeriodSeconds 20 must exceed trainrun's grace period 30 s by 10 s"),
    ("indexed-job/job.yaml", "values: [2, 126, 127, 139]", "values: [2, 126, 127]",
     "podFailurePolicy FailJob exit codes [2, 126, 127] differ from the README's [2, 126, 127, 139]"),
    ("indexed-job/job.yaml", "values: [138]", "values: [137, 138]",
     "podFailurePolicy Ignore exit codes [137, 138] differ from the README's [138]"),
    ("indexed-job/job.yaml", "          - type: DisruptionTarget", "          - type: ConfigIssue",
     "preemption (DisruptionTarget) must be ignored"),
    ("indexed-job/service.yaml", "  clusterIP: None\n", "",
     "subdomain 'trainrun' is not a headless Service of this render"),
    ("indexed-job/service.yaml", "publishNotReadyAddresses: true", "publishNotReadyAddresses: false",
     "Service trainrun must set publishNotReadyAddresses"),
    ("indexed-job/job.yaml", "value: trainrun-0.trainrun", "value: trainrun-1.trainrun",
     "PET_MASTER_ADDR 'trainrun-1.trainrun' is not pod 0's name 'trainrun-0.trainrun'"),
    ("indexed-job/job.yaml", "containerPort: 29500", "containerPort: 29600",
     "the rendezvous port 29500 (PET_MASTER_PORT) is not a containerPort"),
    ("trainer/runtime.yaml", "containerName: node\n                      operator: In\n                      values: [2",
     "containerName: trainer\n                      operator: In\n                      values: [2",
     "a FailJob rule names container 'trainer', not 'node'"),
    ("volcano/job.yaml", "        - exitCode: 139\n          action: AbortJob\n", "",
     "AbortJob exit codes [2, 126, 127] differ from the README's permanent [2, 126, 127, 139]"),
    ("jobset/jobset.yaml", "              subdomain: trainrun", "              subdomain: workers",
     "subdomain 'workers' differs from the JobSet's network.subdomain 'trainrun'"),
]


@pytest.mark.parametrize("file,old,new,message", BROKEN, ids=[f"{b[0]}:{b[3][:40]}" for b in BROKEN])
def test_a_broken_template_is_caught(tmp_path, file, old, new, message):
    copy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY / "kubernetes", copy)
    path = copy / file
    text = path.read_text()
    assert old in text, f"the test's anchor is not in {file}"
    path.write_text(text.replace(old, new, 1))
    rc, out = _validate(copy / pathlib.Path(file).parts[0])
    assert rc == 1, out
    assert message in out, out


def test_a_broken_overlay_is_caught(tmp_path):
    copy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY / "kubernetes", copy)
    overlay = copy / "overlays" / "gpu-4x8" / "kustomization.yaml"
    overlay.write_text(overlay.read_text().replace("path: /spec/template/spec/volumes/0/emptyDir/sizeLimit",
                                                   "path: /spec/template/spec/volumes/0/emptyDir/medium"))
    rc, out = _validate(copy / "overlays" / "gpu-4x8")
    assert rc == 1 and "must mount a memory emptyDir at /dev/shm" in out, out
    overlay.write_text("resources: [../../no-such-base]\n")
    rc, out = _validate(copy / "overlays" / "gpu-4x8")
    assert rc == 1 and "kubectl kustomize failed" in out, out
