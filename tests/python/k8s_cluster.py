"""An emulated Kubernetes cluster on one machine, for tests of deploy/'s templates.

Runs inside a private user, network and mount namespace (`unshare -rnm`), so it needs no privileges and
touches nothing outside: each pod is a network and UTS namespace of its own with an address on a bridge
(10.77.0.0/24) and its pod name as host name; names resolve through /etc/hosts, bind-mounted from a file
the cluster writes (DNS records can be held back to emulate DNS lagging pod start). A pod runs what the
rendered manifest says, as the kubelet would: its command and arguments with $(VAR) expanded, its
environment with the Downward API (status.podIP, the Job's completion index annotation, labels) and what
Kubernetes injects (JOB_COMPLETION_INDEX) filled in; emptyDir mounts become directories of the test; the
image's /opt/trainrun is this source tree and `trainrun` the built binary. Deleting a pod sends SIGTERM,
then SIGKILL after its terminationGracePeriodSeconds, as the kubelet does.

    unshare -rnm /usr/bin/python3 tests/python/k8s_cluster.py SCENARIO RENDERED.yaml OUT_DIR [EXTRA_ARG ...]

Scenarios (each writes OUT_DIR/result.json; pod logs go to OUT_DIR/<pod>.log):
  static    every pod of the workload (an Indexed Job, a JobSet or a Volcano Job) runs to the end
  dns-lag   the same, with node 0's DNS record published only 4 s after every pod has started
  preempt   once every pod is ready (the readiness probe, asked as the kubelet would), every pod is deleted
  elastic   the store Deployment and 3 of the worker Job's pods; one pod is lost, the others re-form; a
            replacement joins; then every pod is deleted
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUBNET = "10.77.0"


def expand(text, env):
    """Kubernetes' $(VAR) expansion: defined names are replaced, $$ escapes, unknown ones stay."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), str(text))


class Pod:
    def __init__(self, cluster, name, spec, labels, annotations, subdomain=None):
        self.cluster, self.name, self.spec = cluster, name, spec
        self.labels, self.annotations, self.subdomain = labels, annotations, subdomain
        self.index = len(cluster.pods) + 10
        self.ip = f"{SUBNET}.{self.index}"
        self.process = None
        self.conditions = []
        self.injected = {}  # what a controller adds to the container's environment (Volcano's VK_TASK_INDEX)
        self.failure_action = lambda pod: "Count"  # what the owner does with a failed pod
        self.log = cluster.out / f"{name}.log"
        # A namespace holder: its network and UTS namespaces are the pod's.
        self.holder = subprocess.Popen(["unshare", "-n", "-u", "sleep", "infinity"])
        time.sleep(0.05)
        veth = f"veth{self.index}"
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(self.holder.pid)])
        run(["ip", "link", "set", veth, "master", "br0", "up"])
        self.enter(["ip", "addr", "add", f"{self.ip}/24", "dev", "eth0"])
        self.enter(["ip", "link", "set", "eth0", "up"])
        self.enter(["ip", "link", "set", "lo", "up"])
        self.enter(["hostname", name])

    def enter(self, argv):
        return run(["nsenter", "-t", str(self.holder.pid), "-n", "-u", "--", *argv])

    def container(self):
        return self.spec["containers"][0]

    def environment(self):
        """The container's environment as the kubelet builds it."""
        env = {"PATH": f"{self.cluster.bin}:/usr/bin:/bin", "HOSTNAME": self.name,
               "PYTHONPATH": str(ROOT / "python"), "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE",
                                                                                     "SkylakeX"),
               "HOME": str(self.cluster.out)}
        if "batch.kubernetes.io/job-completion-index" in self.annotations:
            env["JOB_COMPLETION_INDEX"] = self.annotations["batch.kubernetes.io/job-completion-index"]
        env.update(self.injected)
        fields = {"status.podIP": self.ip, "metadata.name": self.name, "metadata.namespace": "default"}
        for e in self.container().get("env") or []:
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
                continue
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            m = re.fullmatch(r"metadata\.(annotations|labels)\['(.+)'\]", path)
            if m:
                source = self.annotations if m.group(1) == "annotations" else self.labels
                env[e["name"]] = source.get(m.group(2), "")
            else:
                env[e["name"]] = fields[path]
        return env

    def argv(self, env, extra):
        c = self.container()
        argv = [expand(a, env) for a in (c.get("command") or []) + (c.get("args") or [])] + list(extra)
        # The image's paths, mapped onto this machine: the source tree and the pod's emptyDir volumes.
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts") or [] if m["mountPath"] != "/dev/shm"}
        mapped = []
        for a in argv:
            a = a.replace("/opt/trainrun/", f"{ROOT}/")
            for path, volume in mounts.items():
                if a.startswith(path):
                    directory = self.cluster.out / "volumes" / volume  # shared, as a ReadWriteMany claim
                    directory.mkdir(parents=True, exist_ok=True)
                    a = str(directory) + a[len(path):]
            mapped.append(a)
        return mapped

    def start(self, extra=()):
        env = self.environment()
        argv = self.argv(env, extra)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(["nsenter", "-t", str(self.holder.pid), "-n", "-u", "--", *argv],
                                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.cluster.out,
                                            start_new_session=True)
        self.started = time.monotonic()

    def running(self):
        return self.process is not None and self.process.poll() is None

    def delete(self, disruption=False):
        """The kubelet's deletion: SIGTERM, then SIGKILL after the pod's grace period."""
        if disruption:
            self.conditions.append("DisruptionTarget")
        grace = self.spec.get("terminationGracePeriodSeconds", 30)
        if self.running():
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
                return False
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                return True
        return False

    def lose(self):
        """The node under the pod is gone: everything in it dies at once."""
        self.conditions.append("DisruptionTarget")
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def exit_code(self):
        """As the container runtime reports it: the code, or 128 + the signal."""
        rc = self.process.returncode
        return 128 - rc if rc is not None and rc < 0 else rc

    def close(self):
        if self.running():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.holder.kill()
        self.holder.wait()


def run(argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True)


class Cluster:
    def __init__(self, docs, out):
        self.docs, self.out, self.pods = docs, pathlib.Path(out), []
        self.bin = self.out / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        if not (self.bin / "trainrun").exists():
            (self.bin / "trainrun").symlink_to(ROOT / "bazel-bin" / "launcher" / "trainrun")
        run(["ip", "link", "set", "lo", "up"])
        run(["ip", "link", "add", "br0", "type", "bridge"])
        run(["ip", "addr", "add", f"{SUBNET}.1/24", "dev", "br0"])
        run(["ip", "link", "set", "br0", "up"])
        self.hosts = self.out / "hosts"
        self.records = {}
        self.write_hosts()
        run(["mount", "--bind", str(self.hosts), "/etc/hosts"])

    def write_hosts(self):
        lines = ["127.0.0.1 localhost"] + [f"{ip} {' '.join(names)}" for ip, names in self.records.items()]
        # In place (same inode): the bind mount keeps showing this file.
        with open(self.hosts, "w") as f:
            f.write("\n".join(lines) + "\n")

    def publish(self, ip, *names):
        self.records.setdefault(ip, [])
        for n in names:
            self.records[ip] += [n, f"{n}.default.svc.cluster.local"]
        self.write_hosts()

    def unpublish(self, ip):
        self.records.pop(ip, None)
        self.write_hosts()

    def find(self, kind, api=None):
        return [d for d in self.docs if d["kind"] == kind and (api is None or d["apiVersion"] == api)]

    def job_pod(self, job, index, dns=True):
        """Pod `index` of an Indexed Job, its DNS name published when its subdomain is a headless Service."""
        template = job["spec"]["template"]
        name = f"{job['metadata']['name']}-{index}"
        labels = dict(template.get("metadata", {}).get("labels") or {}, **{"job-name": job["metadata"]["name"]})
        annotations = {"batch.kubernetes.io/job-completion-index": str(index)}
        subdomain = template["spec"].get("subdomain")
        pod = Pod(self, name, template["spec"], labels, annotations, subdomain)
        pod.failure_action = lambda p: pod_failure_action(job["spec"], p)
        self.pods.append(pod)
        if dns:
            self.publish_pod(pod)
        return pod

    def jobset_pods(self, jobset, dns=True):
        """What the JobSet controller makes: pods <jobset>-<job>-<jobIndex>-<podIndex> on the network's
        subdomain (a headless Service it creates), with the coordinator annotation and its labels."""
        name, spec = jobset["metadata"]["name"], jobset["spec"]
        subdomain = (spec.get("network") or {}).get("subdomain") or name
        c = spec.get("coordinator")
        coordinator = f"{name}-{c['replicatedJob']}-{c.get('jobIndex', 0)}-{c.get('podIndex', 0)}.{subdomain}" if c \
            else None
        pods = []
        for rj in spec["replicatedJobs"]:
            job_spec = rj["template"]["spec"]
            for j in range(rj.get("replicas", 1)):
                for i in range(job_spec.get("completions", 1)):
                    labels = {"jobset.sigs.k8s.io/jobset-name": name,
                              "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                              "jobset.sigs.k8s.io/job-index": str(j), "jobset.sigs.k8s.io/restart-attempt": "0"}
                    annotations = {"batch.kubernetes.io/job-completion-index": str(i)}
                    if coordinator:
                        annotations["jobset.sigs.k8s.io/coordinator"] = coordinator
                    pod = Pod(self, f"{name}-{rj['name']}-{j}-{i}", job_spec["template"]["spec"], labels, annotations,
                              subdomain)
                    pod.failure_action = lambda p, js=job_spec: pod_failure_action(js, p)
                    self.pods.append(pod)
                    pods.append(pod)
        if dns:
            for pod in pods:
                self.publish_pod(pod)
        return pods

    def volcano_pods(self, vcjob, dns=True):
        """What Volcano makes with the svc and env plugins: pods <job>-<task>-<index> on subdomain <job> (a
        headless Service), VK_TASK_INDEX in their environment; task policies map exit codes to actions."""
        name = vcjob["metadata"]["name"]
        pods = []
        for task in vcjob["spec"]["tasks"]:
            actions = {p["exitCode"]: p["action"] for p in task.get("policies") or [] if "exitCode" in p}
            for i in range(task.get("replicas", 1)):
                pod = Pod(self, f"{name}-{task['name']}-{i}", task["template"]["spec"],
                          {"volcano.sh/job-name": name}, {}, name)
                pod.injected = {"VK_TASK_INDEX": str(i), "VC_TASK_INDEX": str(i)}
                pod.failure_action = lambda p, a=actions: a.get(p.exit_code(), "RestartJob")
                self.pods.append(pod)
                pods.append(pod)
        if dns:
            for pod in pods:
                self.publish(pod.ip, pod.name, f"{pod.name}.{name}")
        return pods

    def workload_pods(self, dns=True):
        """The pods of the manifest's workload (an Indexed Job, a JobSet or a Volcano Job), the store host first;
        with dns=False none is published yet (publish_workload does it)."""
        if self.find("JobSet"):
            return self.jobset_pods(self.find("JobSet")[0], dns)
        if self.find("Job", "batch.volcano.sh/v1alpha1"):
            return self.volcano_pods(self.find("Job", "batch.volcano.sh/v1alpha1")[0], dns)
        job = self.find("Job", "batch/v1")[0]
        return [self.job_pod(job, i, dns) for i in range(job["spec"]["completions"])]

    def publish_workload_pod(self, pod):
        if "volcano.sh/job-name" in pod.labels or "jobset.sigs.k8s.io/jobset-name" in pod.labels:
            self.publish(pod.ip, pod.name, f"{pod.name}.{pod.subdomain}")  # the controller's headless Service
        else:
            self.publish_pod(pod)

    def publish_pod(self, pod):
        headless = {s["metadata"]["name"] for s in self.find("Service") if s["spec"].get("clusterIP") == "None"}
        names = [pod.name]
        if pod.subdomain in headless:
            names.append(f"{pod.name}.{pod.subdomain}")
        self.publish(pod.ip, *names)

    def deployment_pod(self, deployment):
        template = deployment["spec"]["template"]
        pod = Pod(self, f"{deployment['metadata']['name']}-0", template["spec"],
                  dict(template["metadata"].get("labels") or {}), {})
        self.pods.append(pod)
        # A ClusterIP Service selecting it: its name resolves to the (one) pod.
        for s in self.find("Service"):
            selector = s["spec"].get("selector") or {}
            if s["spec"].get("clusterIP") != "None" and all(pod.labels.get(k) == v for k, v in selector.items()):
                self.publish(pod.ip, s["metadata"]["name"])
        return pod

    def close(self):
        for p in self.pods:
            p.close()


def pod_failure_action(job_spec, pod):
    """What a Job's podFailurePolicy does with this failed pod (Kubernetes' rule order: first match)."""
    code = pod.exit_code()
    for rule in (job_spec.get("podFailurePolicy") or {}).get("rules") or []:
        on = rule.get("onExitCodes")
        if on and on.get("containerName") in (None, pod.container()["name"]):
            if (on["operator"] == "In") == (code in on["values"]):
                return rule["action"]
        for c in rule.get("onPodConditions") or []:
            if c["type"] in pod.conditions:
                return rule["action"]
    return "Count"


def agent_status(pod, timeout=5):
    """GetStatus from a pod's agent service (None when it does not answer)."""
    import grpc
    sys.path.insert(0, str(ROOT / "bazel-bin" / "proto"))
    import agent_pb2
    port = pod.environment()["TRAINRUN_AGENT_PORT"]
    try:
        with grpc.insecure_channel(f"{pod.ip}:{port}") as channel:
            call = channel.unary_unary("/trainrun.agent.v1.Agent/GetStatus",
                                       request_serializer=agent_pb2.GetStatusRequest.SerializeToString,
                                       response_deserializer=agent_pb2.GetStatusResponse.FromString)
            return call(agent_pb2.GetStatusRequest(), timeout=timeout)
    except grpc.RpcError:
        return None


def probe(pod, which):
    """The kubelet's gRPC probe of `which` (livenessProbe or readinessProbe): True when SERVING."""
    import grpc
    sys.path.insert(0, str(ROOT / "bazel-bin" / "proto"))
    import health_pb2
    spec = pod.container()[which]["grpc"]
    try:
        with grpc.insecure_channel(f"{pod.ip}:{spec['port']}") as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                        response_deserializer=health_pb2.HealthCheckResponse.FromString)
            reply = check(health_pb2.HealthCheckRequest(service=spec.get("service", "")), timeout=2)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def steps_logged(pods):
    """How many training steps the pods' logs show (examples/train_lm.py prints "step     2/N ...")."""
    return sum(len(re.findall(r'"msg":"step +[0-9]+/', p.log.read_text(errors="replace"))) for p in pods)


def trained(pod):
    return steps_logged([pod]) > 0


def wait_until(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


def wait_all(pods, timeout):
    wait_until("every pod to end", lambda: not any(p.running() for p in pods), timeout)


# ---- scenarios -------------------------------------------------------------------------------------------------

def static(cluster, extra, dns_lag=0.0):
    pods = cluster.workload_pods(dns=False)
    for p in pods[1:] if dns_lag else pods:  # with a lag, the store host's record comes last
        cluster.publish_workload_pod(p)
    for p in pods:
        p.start(extra)
    if dns_lag:
        time.sleep(dns_lag)
        cluster.publish_workload_pod(pods[0])
    wait_all(pods, 240)
    return {"pods": {p.name: {"exit_code": p.exit_code(), "action": p.failure_action(p) if p.exit_code()
                              else "Succeeded"} for p in pods}}


def preempt(cluster, extra):
    pods = cluster.workload_pods()
    for p in pods:
        p.start(extra)
    wait_until("every pod ready", lambda: all(probe(p, "readinessProbe") for p in pods), 120)
    # Preempted mid-training: once the job has logged its second step.
    wait_until("training steps", lambda: trained(pods[0]), 120)
    alive = all(probe(p, "livenessProbe") for p in pods)
    t0 = time.monotonic()
    killed = [p.delete(disruption=True) for p in pods]
    return {"live_when_ready": alive, "stop_seconds": time.monotonic() - t0,
            "pods": {p.name: {"exit_code": p.exit_code(), "sigkilled_by_kubelet": k,
                              "action": p.failure_action(p)} for p, k in zip(pods, killed)}}


def elastic(cluster, extra):
    store = cluster.deployment_pod(cluster.find("Deployment")[0])
    store.start()
    job = cluster.find("Job", "batch/v1")[0]
    events = []

    def statuses(pods):
        return [agent_status(p) for p in pods]

    def formed(pods, nnodes):
        s = statuses(pods)
        return all(x is not None and x.nnodes == nnodes and x.phase == 2 and len(x.workers) > 0 for x in s)

    # MAX pods: the first round closes as soon as they have all joined.
    n = job["spec"]["parallelism"]
    pods = [cluster.job_pod(job, i) for i in range(n)]
    for p in pods:
        p.start(extra)
    wait_until(f"{n} nodes running", lambda: formed(pods, n), 180)
    wait_until("training steps", lambda: any(trained(p) for p in pods), 180)
    # A checkpoint first, so that the re-formed group resumes from it.
    wait_until("a checkpoint", lambda: any(cluster.out.glob("volumes/*/*/ckpt/step_*/.committed")), 240)
    events.append({"step": "formed", "nnodes": n, "rounds": [s.rendezvous_round for s in statuses(pods)]})
    lost = pods[-1]
    lost.lose()
    cluster.unpublish(lost.ip)
    survivors = pods[:-1]
    wait_until("the survivors re-formed", lambda: formed(survivors, n - 1), 240)
    before = steps_logged(survivors)
    wait_until("training after the re-form", lambda: steps_logged(survivors) > before, 240)
    events.append({"step": "re-formed", "nnodes": n - 1,
                   "rounds": [s.rendezvous_round for s in statuses(survivors)],
                   "resumed": any("resumed from" in p.log.read_text(errors="replace") for p in survivors)})
    replacement = cluster.job_pod(job, n - 1)  # the Job recreates the failed index
    replacement.start(extra)
    everyone = survivors + [replacement]
    wait_until("the replacement joined", lambda: formed(everyone, n), 240)
    before = steps_logged(everyone)
    wait_until("training after the join", lambda: steps_logged(everyone) > before, 240)
    events.append({"step": "joined", "nnodes": n, "rounds": [s.rendezvous_round for s in statuses(everyone)]})
    for p in everyone:
        p.delete(disruption=True)
    store.delete()
    return {"events": events,
            "pods": {p.name: {"exit_code": p.exit_code(), "action": p.failure_action(p)} for p in everyone}}


def main():
    scenario, manifest, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    extra = sys.argv[4:]
    docs = [d for d in yaml.safe_load_all(open(manifest)) if d]
    cluster = Cluster(docs, out)
    result = {"scenario": scenario}
    try:
        t0 = time.monotonic()
        if scenario == "static":
            result.update(static(cluster, extra))
        elif scenario == "dns-lag":
            result.update(static(cluster, extra, dns_lag=4.0))
        elif scenario == "preempt":
            result.update(preempt(cluster, extra))
        elif scenario == "elastic":
            result.update(elastic(cluster, extra))
        else:
            raise ValueError(f"unknown scenario {scenario}")
        result["seconds"] = time.monotonic() - t0
    except Exception as e:  # the test prints it with the pods' logs
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        cluster.close()
    (out / "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
