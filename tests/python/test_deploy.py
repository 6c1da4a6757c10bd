"""deploy/: the Kubernetes templates render and pass deploy/validate.py (schemas and the trainrun lint), and
every check fails on a broken copy of a template, naming what is wrong; the Slurm script and the container
recipe hold what they must."""
import importlib.util
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
    if importlib.util.find_spec("jsonschema") is None:
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
    ("trainer/runtime.yaml", "containerName: node\n" + " " * 22 + "operator: In\n" + " " * 22 + "values: [2",
     "containerName: trainer\n" + " " * 22 + "operator: In\n" + " " * 22 + "values: [2",
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


# ---- Slurm: the sbatch script under a fake srun/scontrol on this machine -------------------------------------

FAKE_SCONTROL = """#!/bin/bash
# `scontrol show hostnames LIST` prints one host per line; other calls are logged.
# Many hosts, as a large allocation has: a reader that stops after the first line makes this one get SIGPIPE.
if [ "$1 $2" = "show hostnames" ]; then for i in $(seq 20000); do echo localhost; done; exit 0; fi
echo "$@" >> "$SLURM_TEST_DIR/scontrol.log"
"""

# srun --ntasks=N ... bash -c CMD ARGS: runs N tasks here, SLURM_NODEID=0..N-1; USR1 goes to every task.
FAKE_SRUN = """#!/bin/bash
while [[ "$1" == --* ]]; do shift; done
pids=()
for ((i = 0; i < SLURM_NNODES; i++)); do
  SLURM_NODEID=$i "$@" &
  pids+=($!)
done
trap 'kill -USR1 "${pids[@]}" 2>/dev/null' USR1
status=0
for p in "${pids[@]}"; do
  while true; do
    wait "$p"; s=$?
    kill -0 "$p" 2>/dev/null && continue
    break
  done
  [ "$s" -ne 0 ] && status=$s
done
exit $status
"""

SLURM_WORKER = """
import os, pathlib, signal, sys, time
import trainrun as torch
import trainrun.distributed as dist
out = pathlib.Path(os.environ["SLURM_TEST_DIR"])
got_usr1 = []
signal.signal(signal.SIGUSR1, lambda *a: got_usr1.append(1))
dist.init_process_group("gloo")
t = torch.ones(2)
dist.all_reduce(t)
(out / f"rank{dist.get_rank()}.of{dist.get_world_size()}").write_text(str(t.tolist()))
if os.environ.get("MODE") == "usr1":
    deadline = time.monotonic() + 60
    while not got_usr1 and time.monotonic() < deadline:
        time.sleep(0.02)
    (out / f"usr1.{dist.get_rank()}").touch()
dist.destroy_process_group()
sys.exit(int(os.environ.get("EXIT", "0")))
"""


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sbatch(tmp_path, mode="", exit_code=0):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "trainrun").symlink_to(ROOT / "bazel-bin" / "launcher" / "trainrun")
    (tmp_path / "worker.py").write_text(SLURM_WORKER)
    import os
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SLURM_TEST_DIR=str(tmp_path),
               SLURM_JOB_NODELIST="node[0-1]", SLURM_NNODES="2", SLURM_JOB_ID="4242", SLURM_CPUS_ON_NODE="8",
               TRAINRUN_NPROC="2", TRAINRUN_PORT=str(_free_port()), PYTHONPATH=str(ROOT / "python"),
               OMP_NUM_THREADS="1", MODE=mode, EXIT=str(exit_code))
    return subprocess.Popen(["bash", str(DEPLOY / "slurm" / "trainrun.sbatch"), str(tmp_path / "worker.py")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


@pytest.fixture
def sbatch(tmp_path):
    import os
    import signal
    procs = []

    def start(**kwargs):
        procs.append(_sbatch(tmp_path, **kwargs))
        return procs[-1]
    yield start
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)


def test_the_sbatch_script_runs_one_agent_per_node(sbatch, tmp_path):
    p = sbatch()
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    # 2 nodes x 2 processes, node ranks from SLURM_NODEID: every global rank ran once, in one group of 4.
    assert sorted(f.name for f in tmp_path.glob("rank*.of*")) == [f"rank{r}.of4" for r in range(4)], out
    assert (tmp_path / "rank3.of4").read_text() == "[4.0, 4.0]"
    assert not (tmp_path / "scontrol.log").exists()


def test_usr1_before_the_time_limit_reaches_every_worker(sbatch, tmp_path):
    import signal
    import time
    p = sbatch(mode="usr1")
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("rank*.of4"))) < 4:
        assert time.monotonic() < deadline and p.poll() is None, p.stdout.read() if p.poll() is not None else ""
        time.sleep(0.05)
    time.sleep(0.3)  # the workers are past their allreduce, in their wait for the signal
    p.send_signal(signal.SIGUSR1)  # what --signal=B:USR1@90 does
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    assert sorted(f.name for f in tmp_path.glob("usr1.*")) == [f"usr1.{r}" for r in range(4)], out


def test_a_drained_job_is_requeued(sbatch, tmp_path):
    p = sbatch(exit_code=138)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 138, out
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
