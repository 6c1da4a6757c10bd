"""deploy/'s Kubernetes templates, run as rendered in an emulated cluster on this machine (k8s_cluster.py: a
network namespace per pod on a bridge, DNS through a hosts file, the kubelet's environment and deletion):
the static Indexed Job trains 2 pods x 2 processes to the end; the same when node 0's DNS record appears
only seconds after the pods start; deleting every pod (preemption) once they are ready ends each with
143, which the podFailurePolicy ignores; the elastic job loses a pod and re-forms with the survivors, which
resume from the checkpoint, then a replacement pod joins."""
import importlib.util
import json
import shutil
import subprocess

import pytest

from built_tree import ROOT

TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
DRIVER = ROOT / "tests" / "python" / "k8s_cluster.py"
KUBERNETES = ROOT / "deploy" / "kubernetes"
# Short runs of the template's own command (train_lm.py): flags appended after the template's arguments.
SHORT = ["--steps", "4", "--eval-windows", "8", "--log-every", "2", "--ckpt-every", "100"]
LONG = ["--steps", "100000", "--eval-windows", "8", "--log-every", "2", "--ckpt-every", "5"]


def _missing():
    for tool in ("kubectl", "unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not TRAINRUN.exists():
        return "the trainrun launcher is not built"
    if importlib.util.find_spec("grpc") is None:
        return "python3-grpcio is not installed (the kubelet's probes)"
    probe = subprocess.run(["unshare", "-rnm", "ip", "link", "add", "br0", "type", "bridge"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        return f"this machine refuses unprivileged user and network namespaces: {probe.stderr.strip()}"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def _run(tmp_path, template, scenario, extra, timeout=600):
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(subprocess.run(["kubectl", "kustomize", str(KUBERNETES / template)], capture_output=True,
                                       text=True, check=True, timeout=60).stdout)
    out = subprocess.run(["unshare", "-rnm", "/usr/bin/python3", str(DRIVER), scenario, str(rendered),
                          str(tmp_path), *extra], capture_output=True, text=True, timeout=timeout)
    logs = "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:] for p in sorted(tmp_path.glob("*.log")))
    assert out.returncode == 0, out.stdout + out.stderr + logs
    result = json.loads((tmp_path / "result.json").read_text())
    assert "error" not in result, result["error"] + "\n" + logs
    return result, logs


def test_the_static_job_trains_to_the_end(tmp_path):
    result, logs = _run(tmp_path, "indexed-job", "static", SHORT)
    assert result["pods"] == {"trainrun-0": {"exit_code": 0, "action": "Succeeded"},
                              "trainrun-1": {"exit_code": 0, "action": "Succeeded"}}, logs
    # Node 0 ran global rank 0 of 4, which printed the job's last line.
    assert "after 4 steps on 4 ranks" in (tmp_path / "trainrun-0.log").read_text(), logs
    assert '"host":"trainrun-1"' in (tmp_path / "trainrun-1.log").read_text()  # its own host name


def test_the_job_waits_for_the_store_hosts_dns_record(tmp_path):
    result, logs = _run(tmp_path, "indexed-job", "dns-lag", SHORT)
    assert all(p["exit_code"] == 0 for p in result["pods"].values()), logs
    assert result["seconds"] > 4, result


def test_preempting_every_pod_ends_the_job_with_what_the_policy_ignores(tmp_path):
    result, logs = _run(tmp_path, "indexed-job", "preempt", LONG)
    assert result["live_when_ready"], logs
    for pod in result["pods"].values():
        # SIGTERM forwarded and the workers stopped within the pod's grace period: no SIGKILL from the kubelet.
        assert pod == {"exit_code": 143, "sigkilled_by_kubelet": False, "action": "Ignore"}, logs
    assert result["stop_seconds"] < 30, result


def test_the_elastic_job_reforms_after_losing_a_pod_and_grows_again(tmp_path):
    # --batch 24 divides over 8, 6 and 4 ranks (4, 3 and 2 pods of 2 processes).
    result, logs = _run(tmp_path, "elastic", "elastic", LONG + ["--batch", "24"])
    steps = {e["step"]: e for e in result["events"]}
    assert steps["formed"]["nnodes"] == 4 and set(steps["formed"]["rounds"]) == {0}, result
    assert steps["re-formed"]["nnodes"] == 3 and set(steps["re-formed"]["rounds"]) == {1}, result
    assert steps["re-formed"]["resumed"], logs  # from the checkpoint the 4 pods wrote
    assert steps["joined"]["nnodes"] == 4 and set(steps["joined"]["rounds"]) == {2}, result
    assert all(p["exit_code"] == 143 and p["action"] == "Ignore" for p in result["pods"].values()), result


@pytest.mark.parametrize("template,pods", [
    ("jobset", ["trainrun-node-0-0", "trainrun-node-0-1"]),
    ("volcano", ["trainrun-node-0", "trainrun-node-1"]),
])
def test_the_jobset_and_volcano_jobs_train_to_the_end(tmp_path, template, pods):
    """The JobSet's pods find the store through the coordinator annotation and name their rendezvous after the
    restart attempt; Volcano's take their node rank from VK_TASK_INDEX, expanded in the arguments."""
    result, logs = _run(tmp_path, template, "static", SHORT)
    assert sorted(result["pods"]) == pods, result
    assert all(p == {"exit_code": 0, "action": "Succeeded"} for p in result["pods"].values()), logs
    assert "after 4 steps on 4 ranks" in (tmp_path / f"{pods[0]}.log").read_text(), logs
    if template == "jobset":
        assert '"run_id":"trainrun-attempt-0"' in (tmp_path / f"{pods[1]}.log").read_text(), logs
