"""The launcher agent's gRPC service (--agent-port): gRPC's standard health
protocol ("" alive, "trainrun.ready" while every local worker is up, Watch
following it through a failure and restart), GetStatus and WatchEvents during
a job, `trainrun status` and `trainrun events`; and its Prometheus page
(--metrics-port) with the workers' put_metric values. Talks to the service
with python3-grpcio and the message classes protoc generates from proto/ (no
generated stubs needed)."""
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from built_tree import ROOT

grpc = pytest.importorskip("grpc", reason="python3-grpcio is not installed")
sys.path.insert(0, str(ROOT / "bazel-bin" / "proto"))
health_pb2 = pytest.importorskip("health_pb2", reason="bazel build //proto:agent_py first")
agent_pb2 = pytest.importorskip("agent_pb2", reason="bazel build //proto:agent_py first")

TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
Phase, State = agent_pb2.GetStatusResponse, agent_pb2.WorkerStatus

# Each worker waits for go.<attempt>, then rank FAIL_RANK exits with code 3 (the others succeed, or with
# LINGER, ignore the agent's SIGTERM and stay a few seconds, which holds the agent in its stopping phase).
WORKER = """
import os, pathlib, signal, time
if os.environ.get("LINGER"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.environ.get("PUT_METRIC"):
    from trainrun.distributed.elastic.metrics import put_metric
    put_metric("tokens_per_s", 1000 + int(os.environ["RANK"]), "train")
    put_metric("step", 7)
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
(pathlib.Path(os.environ["GO_DIR"]) / f"started.{attempt}.{os.environ['RANK']}").touch()
go = pathlib.Path(os.environ["GO_DIR"]) / ("go." + attempt)


def waiting_for_the_go_file():
    deadline = time.monotonic() + 120
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


waiting_for_the_go_file()
if os.environ["RANK"] == os.environ.get("FAIL_RANK"):
    raise SystemExit(3)
if os.environ.get("LINGER"):
    time.sleep(float(os.environ["LINGER"]))
"""


class Job:
    """`trainrun --agent-port 0 ...` in its own process group; the port is read from its first lines."""

    def __init__(self, tmp_path, *flags, fail_rank=None, nproc=2, linger=None):
        (tmp_path / "worker.py").write_text(WORKER)
        self.go_dir = tmp_path
        env = dict(os.environ, GO_DIR=str(tmp_path), OMP_NUM_THREADS="1", PUT_METRIC="1",
                   PYTHONPATH=str(ROOT / "python"))
        if fail_rank is not None:
            env["FAIL_RANK"] = str(fail_rank)
        if linger is not None:
            env["LINGER"] = str(linger)
        self.proc = subprocess.Popen([str(TRAINRUN), "--agent-port", "0", "--nproc-per-node", str(nproc), *flags,
                                      str(tmp_path / "worker.py")], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.port = self.metrics_url = None
        deadline = time.monotonic() + 30
        while self.port is None:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if "agent service on 127.0.0.1:" in line:
                self.port = int(line.rsplit(":", 1)[1])
            if "metrics on " in line:
                self.metrics_url = line.split("metrics on ", 1)[1]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")

        def method(kind, path, request, response):
            return getattr(self.channel, kind)(path, request_serializer=request.SerializeToString,
                                               response_deserializer=response.FromString)
        check, reply = health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        self.check = method("unary_unary", "/grpc.health.v1.Health/Check", check, reply)
        self.watch = method("unary_stream", "/grpc.health.v1.Health/Watch", check, reply)
        agent = "/trainrun.agent.v1.Agent/"
        self.get_status = method("unary_unary", agent + "GetStatus", agent_pb2.GetStatusRequest,
                                 agent_pb2.GetStatusResponse)
        self.stop = method("unary_unary", agent + "Stop", agent_pb2.StopRequest, agent_pb2.StopResponse)
        self.dump_stacks = method("unary_unary", agent + "DumpStacks", agent_pb2.DumpStacksRequest,
                                  agent_pb2.DumpStacksResponse)
        self.watch_events = method("unary_stream", agent + "WatchEvents", agent_pb2.WatchEventsRequest,
                                   agent_pb2.Event)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def health(self, service):
        return self.check(health_pb2.HealthCheckRequest(service=service), timeout=10).status

    def status(self):
        return self.get_status(agent_pb2.GetStatusRequest(), timeout=10)

    def wait_for(self, predicate, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if predicate(status):
                return status
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}; last status:\n{status}")

    def wait_started(self, attempt, nproc=2):
        """Until every worker's Python of this attempt is up (signal handlers installed, trainrun imported)."""
        deadline = time.monotonic() + 60
        while not all((self.go_dir / f"started.{attempt}.{r}").exists() for r in range(nproc)):
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.01)

    def go(self, attempt, nproc=2):
        self.wait_started(attempt, nproc)  # so the test's timeline is fixed
        (self.go_dir / f"go.{attempt}").touch()

    def close(self):
        self.channel.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def job(tmp_path):
    jobs = []

    def start(*flags, **kwargs):
        jobs.append(Job(tmp_path, *flags, **kwargs))
        return jobs[-1]
    yield start
    for j in jobs:
        j.close()


def _running(status):
    return status.phase == Phase.RUNNING and len(status.workers) == 2


def test_health_and_status_while_the_workers_run(job):
    j = job()
    assert j.health("") == SERVING
    status = j.wait_for(_running, "both workers running")
    assert j.health("trainrun.ready") == SERVING
    assert status.nnodes == 1 and status.node_rank == 0 and status.attempt == 0 and status.run_id
    assert sorted((w.global_rank, w.local_rank, w.state) for w in status.workers) == \
        [(0, 0, State.RUNNING), (1, 1, State.RUNNING)]
    for w in status.workers:
        os.kill(w.pid, 0)  # the pids are the live workers'
    with pytest.raises(grpc.RpcError) as e:
        j.health("no.such.service")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    # The command-line client prints the same.
    out = subprocess.run([str(TRAINRUN), "status", f"127.0.0.1:{j.port}"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert f"job {status.run_id}" in out.stdout and "running (ready)" in out.stdout
    assert f"rank 1 (local 1) pid {status.workers[1].pid}: running" in out.stdout
    # A client that leaves a WatchEvents stream early changes nothing for the job.
    early = j.watch_events(agent_pb2.WatchEventsRequest(from_start=True), timeout=30)
    assert next(early).kind == agent_pb2.Event.RENDEZVOUS
    early.cancel()
    # `trainrun events` prints the job's events until it ends.
    events = subprocess.Popen([str(TRAINRUN), "events", f"127.0.0.1:{j.port}"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    j.wait_for(_running, "the job after a client left")
    first = events.stdout.readline()  # it is connected (and replaying) before the job may end
    j.go(0)
    out = first + events.stdout.read()  # (not communicate(): it would skip what readline buffered)
    assert events.wait(timeout=60) == 0, out
    lines = out.splitlines()
    assert "rendezvous" in lines[0] and "workers started" in lines[1], out
    assert sum("worker exited" in line for line in lines) == 2 and "job done" in lines[-1], out
    assert j.proc.wait(timeout=60) == 0


def test_readiness_follows_a_failure_and_the_restart(job):
    j = job("--max-restarts", "1", fail_rank=1)
    j.wait_for(_running, "both workers running")
    updates = queue.Queue()
    stream = j.watch(health_pb2.HealthCheckRequest(service="trainrun.ready"), timeout=60)

    def pump():
        try:
            for response in stream:
                updates.put(response.status)
        except grpc.RpcError:
            pass  # cancelled when the test is done with it
    threading.Thread(target=pump, daemon=True).start()
    assert updates.get(timeout=10) == SERVING
    j.go(0)  # rank 1 fails: the group stops, then restarts
    assert updates.get(timeout=30) == NOT_SERVING
    assert updates.get(timeout=30) == SERVING
    status = j.wait_for(lambda s: s.attempt == 1 and _running(s), "the restarted group")
    assert all(w.restarts == 1 for w in status.workers)
    stream.cancel()
    j.go(1)  # it fails again: no restarts left, the job ends with the worker's exit code
    assert j.proc.wait(timeout=60) == 3


def test_watch_events_follows_the_job_to_its_end(job):
    j = job("--max-restarts", "1", fail_rank=1)
    j.wait_for(_running, "both workers running")
    Event = agent_pb2.Event
    stream = j.watch_events(agent_pb2.WatchEventsRequest(from_start=True), timeout=60)
    j.go(0)
    events = []
    for e in stream:  # a replay of what happened so far, then events as they come, until JOB_DONE ends it
        events.append(e)
        if e.kind == Event.RESTART:
            j.go(1)
    kinds = [e.kind for e in events]
    assert kinds[:2] == [Event.RENDEZVOUS, Event.WORKERS_STARTED]
    assert kinds[-1] == Event.JOB_DONE and events[-1].exit_code == 3
    failures = [e for e in events if e.kind == Event.WORKER_FAILED]
    assert [(e.global_rank, e.exit_code, e.attempt) for e in failures] == [(1, 3, 0), (1, 3, 1)]
    restart = kinds.index(Event.RESTART)
    assert kinds.index(Event.WORKER_FAILED) < restart
    assert kinds[restart + 1:restart + 3] == [Event.RENDEZVOUS, Event.WORKERS_STARTED]
    assert "rank 1 failed with exit code 3" in failures[0].message
    assert all(b.time >= a.time for a, b in zip(events, events[1:]))
    assert j.proc.wait(timeout=60) == 3


def test_a_failed_worker_is_reported_while_the_others_stop(job):
    # The surviving worker ignores SIGTERM, so the agent stays in its stopping phase for the grace period.
    j = job("--grace-period", "3", fail_rank=0, linger=30)
    j.wait_for(_running, "both workers running")
    j.go(0)
    status = j.wait_for(lambda s: any(w.state == State.FAILED for w in s.workers), "the failure to show")
    assert status.phase == Phase.STOPPING
    assert j.health("trainrun.ready") == NOT_SERVING
    failed = next(w for w in status.workers if w.state == State.FAILED)
    assert (failed.global_rank, failed.exit_code, failed.signal) == (0, 3, 0)
    survivor = next(w for w in status.workers if w.global_rank == 1)
    assert survivor.state == State.RUNNING  # still inside its grace period
    out = subprocess.run([str(TRAINRUN), "status", f"127.0.0.1:{j.port}"], capture_output=True, text=True,
                         timeout=30)
    assert "stopping its workers" in out.stdout and "rank 0 (local 0)" in out.stdout
    assert "failed (exit code 3)" in out.stdout
    assert j.proc.wait(timeout=60) == 3


def _scrape(url):
    prometheus = pytest.importorskip("prometheus_client.parser", reason="python3-prometheus-client is not installed")
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in prometheus.text_string_to_metric_families(page) for s in family.samples}
    return page, samples


def test_metrics_page_counts_the_job_and_carries_put_metric(job):
    j = job("--metrics-port", "0", "--max-restarts", "1", fail_rank=1)
    j.wait_for(_running, "both workers running")
    deadline = time.monotonic() + 30
    metric = "trainrun_worker_metric"
    wanted = [(metric, (("group", "train"), ("name", "tokens_per_s"), ("rank", str(r)))) for r in (0, 1)]
    wanted.append((metric, (("group", "torchelastic"), ("name", "step"), ("rank", "1"))))
    while True:  # each worker's put_metric values arrive once its Python is up (the ranks in either order)
        page, samples = _scrape(j.metrics_url)
        if all(key in samples for key in wanted):
            break
        assert time.monotonic() < deadline, page
        time.sleep(0.05)
    assert samples[("trainrun_worker_metric", (("group", "train"), ("name", "tokens_per_s"), ("rank", "0")))] == 1000
    assert samples[("trainrun_worker_metric", (("group", "torchelastic"), ("name", "step"), ("rank", "1")))] == 7
    assert samples[("trainrun_workers", (("state", "running"),))] == 2
    assert samples[("trainrun_restarts_total", ())] == 0
    assert samples[("trainrun_rendezvous_total", ())] == 1
    if shutil.which("promtool"):
        check = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, text=True,
                               timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
    j.go(0)  # rank 1 fails: one failure, one restart, the other rank succeeded or was stopped
    j.wait_for(lambda s: s.attempt == 1 and _running(s), "the restarted group")
    _, samples = _scrape(j.metrics_url)
    assert samples[("trainrun_restarts_total", ())] == 1
    assert samples[("trainrun_worker_exits_total", (("reason", "failure"),))] == 1
    assert samples[("trainrun_worker_exits_total", (("reason", "success"),))] + \
        samples[("trainrun_worker_exits_total", (("reason", "stopped"),))] == 1
    assert samples[("trainrun_rendezvous_total", ())] == 2
    j.go(1)
    assert j.proc.wait(timeout=60) == 3


def _token_file(port):
    """The token the agent wrote next to its port file (only the job's user can read it)."""
    for port_file in pathlib.Path("/tmp").glob("trainrun-*/agent_port"):
        if not pathlib.Path(f"/proc/{port_file.parent.name.rsplit('-', 1)[1]}").exists():
            continue  # an agent killed before it cleaned up
        if port_file.read_text().strip() == str(port):
            token_file = port_file.parent / "agent_token"
            assert token_file.stat().st_mode & 0o777 == 0o600
            return token_file.read_text().strip()
    raise AssertionError(f"no agent_port file names port {port}")


def test_stop_needs_the_jobs_token_and_then_ends_the_job(job):
    j = job()
    j.wait_for(_running, "both workers running")
    for metadata in ((), (("authorization", "Bearer wrong"),), (("authorization", "token"),)):
        with pytest.raises(grpc.RpcError) as e:
            j.stop(agent_pb2.StopRequest(), metadata=metadata, timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "needs the job's token" in e.value.details()
    assert _running(j.status()) and j.proc.poll() is None  # refused calls changed nothing
    token = _token_file(j.port)
    assert len(token) == 32
    # `trainrun stop` finds the token on this host by itself.
    out = subprocess.run([str(TRAINRUN), "stop", f"127.0.0.1:{j.port}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert j.proc.wait(timeout=60) == 128 + signal.SIGTERM


def test_dump_stacks_names_the_function_each_worker_is_in(job):
    j = job()
    j.wait_for(_running, "both workers running")
    j.wait_started(0)
    with pytest.raises(grpc.RpcError) as e:
        j.dump_stacks(agent_pb2.DumpStacksRequest(), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    token = (("authorization", "Bearer " + _token_file(j.port)),)
    response = j.dump_stacks(agent_pb2.DumpStacksRequest(), metadata=token, timeout=30)
    assert sorted(w.global_rank for w in response.workers) == [0, 1]
    for w in response.workers:
        assert w.error == "", w.error
        assert "in waiting_for_the_go_file" in w.stacks and "time.sleep(0.02)" in w.stacks, w.stacks
        assert f"(pid {w.pid})" in w.stacks
    out = subprocess.run([str(TRAINRUN), "stacks", f"127.0.0.1:{j.port}"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.count("in waiting_for_the_go_file") == 2, out.stdout + out.stderr
    j.go(0)
    assert j.proc.wait(timeout=60) == 0


def test_a_given_token_is_used_and_stop_through_grpc(job, monkeypatch):
    monkeypatch.setenv("TRAINRUN_AGENT_TOKEN", "s3cret-token")
    j = job()
    j.wait_for(_running, "both workers running")
    assert _token_file(j.port) == "s3cret-token"
    j.stop(agent_pb2.StopRequest(), metadata=(("authorization", "Bearer s3cret-token"),), timeout=10)
    assert j.proc.wait(timeout=60) == 128 + signal.SIGTERM


def test_bad_agent_ports_are_refused_by_name(tmp_path):
    (tmp_path / "noop.py").write_text("")
    r = subprocess.run([str(TRAINRUN), "--agent-port", "70000", str(tmp_path / "noop.py")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--agent-port: 70000 is not a port" in r.stderr + r.stdout
    r = subprocess.run([str(TRAINRUN), "--metrics-port", "-5", str(tmp_path / "noop.py")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--metrics-port: -5 is not a port" in r.stderr + r.stdout
    r = subprocess.run([str(TRAINRUN), "status", "127.0.0.1:1", "--timeout", "1"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "no agent answered at 127.0.0.1:1" in r.stderr + r.stdout
