"""The flight recorder and the agent's control calls built on it, with real
jobs under `trainrun`: a rank that skips a collective (over shared memory and
over Gloo's TCP) gives a dump on every rank and the agent names the rank
behind and the collective; a mismatched collective names both calls, on
demand through GetFlightRecord and `trainrun flight`; Drain asks workers to
checkpoint and exit with 138; the service over TLS. Single-process checks of
trainrun.distributed.flight_record() come first."""
import json
import os
import pathlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from built_tree import ROOT

TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"

# Three allreduces on every rank, then what MODE says:
#   skip      rank 1 skips the 4th allreduce and sleeps; rank 0 times out in it (T seconds)
#   mismatch  rank 0 broadcasts while rank 1 allreduces a different shape (async, not waited), then both idle
#   drain     wait for the agent's Drain, write a checkpoint, exit 138 (rank IGNORE_DRAIN keeps sleeping)
WORKER = """
import datetime, os, pathlib, sys, time
import trainrun as torch
import trainrun.distributed as dist
from trainrun.distributed.elastic import DRAIN_EXIT_CODE, drain_requested
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("T", "3"))))
rank, mode, out = dist.get_rank(), os.environ["MODE"], pathlib.Path(os.environ["OUT"])
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)
if mode == "skip":
    if rank == 1:
        time.sleep(120)
    dist.all_reduce(t)
elif mode == "mismatch":
    if rank == 0:
        dist.broadcast(t, 0, async_op=True)
    else:
        dist.all_reduce(torch.ones(8), async_op=True)
    (out / f"ready.{rank}").touch()
    time.sleep(120)
elif mode == "drain":
    (out / f"ready.{rank}").touch()
    deadline = time.monotonic() + 120
    while not drain_requested() and time.monotonic() < deadline:
        time.sleep(0.02)
    if str(rank) == os.environ.get("IGNORE_DRAIN"):
        time.sleep(120)
    (out / f"checkpoint.{rank}").write_text(str(t.tolist()))
    sys.exit(DRAIN_EXIT_CODE)
"""


class Job:
    """`trainrun --nproc-per-node 2 [flags] worker.py` in its own session, its output collected line by line."""

    def __init__(self, tmp_path, mode, *flags, env=None):
        (tmp_path / "worker.py").write_text(WORKER)
        self.out = tmp_path
        full_env = dict(os.environ, MODE=mode, OUT=str(tmp_path), OMP_NUM_THREADS="1",
                        PYTHONPATH=str(ROOT / "python"), **(env or {}))
        self.proc = subprocess.Popen([str(TRAINRUN), "--nproc-per-node", "2", "--grace-period", "2", *flags,
                                      str(tmp_path / "worker.py")], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=full_env, start_new_session=True)
        self.lines, self.all = queue.Queue(), []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
            self.all.append(line.rstrip("\n"))

    def line_with(self, text, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if text in line:
                return line

    def port(self):
        return int(self.line_with("agent service on ").split(":")[-1].split()[0])

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while not all((self.out / f"ready.{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline and self.proc.poll() is None, "\n".join(self.all)
            time.sleep(0.02)

    def finish(self, timeout=60):
        rc = self.proc.wait(timeout=timeout)
        time.sleep(0.1)  # the reader thread takes the last lines
        return rc, "\n".join(self.all)

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def job(tmp_path):
    jobs = []

    def start(mode, *flags, **kwargs):
        jobs.append(Job(tmp_path, mode, *flags, **kwargs))
        return jobs[-1]
    yield start
    for j in jobs:
        j.close()


def _token(port):
    for port_file in pathlib.Path("/tmp").glob("trainrun-*/agent_port"):
        if pathlib.Path(f"/proc/{port_file.parent.name.rsplit('-', 1)[1]}").exists() and \
                port_file.read_text().strip() == str(port):
            return (port_file.parent / "agent_token").read_text().strip()
    raise AssertionError(f"no agent_port file names port {port}")


# ---- in one process ----------------------------------------------------------

def test_flight_record_of_one_process(tmp_path):
    code = f"""
import datetime, json, trainrun as torch, trainrun.distributed as dist
dist.init_process_group("gloo", init_method="file://{tmp_path}/store", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
t = torch.ones(3, 2)
dist.all_reduce(t)
dist.broadcast(t, 0)
sub = dist.new_group([0])
dist.all_reduce(t, group=sub)
print(json.dumps(dist.flight_record()))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), TRAINRUN_FR_BUFFER_SIZE="2")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout.splitlines()[-1])
    assert record["rank"] == 0 and record["capacity"] == 2
    assert [(g["name"], g["ranks"]) for g in record["groups"]] == [("default", [0]), ("group_1", [0])]
    # Only the last two operations are kept (TRAINRUN_FR_BUFFER_SIZE=2), oldest first.
    ops = [(e["group"], e["seq"], e["op"], e["state"], e["kind"]) for e in record["entries"]]
    assert ops == [("default", 2, "broadcast(float32 [3, 2], root 0)", "completed", "collective"),
                   ("group_1", 1, "allreduce(float32 [3, 2], SUM)", "completed", "collective")], ops
    for e in record["entries"]:
        assert 0 < e["time_created_ns"] <= e["time_started_ns"] <= e["time_completed_ns"]


def test_a_bad_buffer_size_is_refused_by_name(tmp_path):
    code = f"""
import trainrun.distributed as dist
dist.init_process_group("gloo", init_method="file://{tmp_path}/store", rank=0, world_size=1)
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), TRAINRUN_FR_BUFFER_SIZE="lots")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode != 0 and "TRAINRUN_FR_BUFFER_SIZE must be a count of operations" in out.stderr, out.stderr


# ---- under the launcher --------------------------------------------------------

@pytest.mark.parametrize("transport", ["shared memory", "tcp"])
def test_a_rank_that_skips_a_collective_is_named(job, transport):
    env = {"TRAINRUN_SHM_COLLECTIVES": "0"} if transport == "tcp" else {}
    j = job("skip", env=env)
    rc, out = j.finish()
    assert rc == 1, out
    finding = ("group 'default': rank 1 is behind: it has not called collective #4 (rank 0 called "
               "allreduce(float32 [4], SUM) [failed]); its last is #3 allreduce(float32 [4], SUM)")
    assert finding in out, out
    m = re.search(r"flight recorder \(2 of 2 local ranks dumped, in (\S+)\):", out)
    assert m, out
    dump_dir = pathlib.Path(m.group(1))
    try:
        dumps = {r: json.loads((dump_dir / f"rank{r}.json").read_text()) for r in (0, 1)}
        assert dumps[0]["entries"][-1]["state"] == "failed" and "allreduce #4" in dumps[0]["reason"]
        assert [e["seq"] for e in dumps[1]["entries"]] == [1, 2, 3]
        assert "another rank asked" in dumps[1]["reason"]
        # The same findings offline, from the directory the agent kept.
        offline = subprocess.run([str(TRAINRUN), "flight", str(dump_dir)], capture_output=True, text=True,
                                 timeout=30)
        assert offline.returncode == 0 and finding in offline.stdout, offline.stdout + offline.stderr
    finally:
        shutil.rmtree(dump_dir.parent.parent, ignore_errors=True)


def test_get_flight_record_names_both_calls_of_a_mismatch(job):
    j = job("mismatch", "--agent-port", "0")
    port = j.port()
    j.wait_ready()
    grpc = pytest.importorskip("grpc", reason="python3-grpcio is not installed")
    sys.path.insert(0, str(ROOT / "bazel-bin" / "proto"))
    agent_pb2 = pytest.importorskip("agent_pb2", reason="bazel build //proto:agent_py first")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        get = channel.unary_unary("/trainrun.agent.v1.Agent/GetFlightRecord",
                                  request_serializer=agent_pb2.GetFlightRecordRequest.SerializeToString,
                                  response_deserializer=agent_pb2.GetFlightRecordResponse.FromString)
        with pytest.raises(grpc.RpcError) as e:
            get(agent_pb2.GetFlightRecordRequest(), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        response = get(agent_pb2.GetFlightRecordRequest(), timeout=30,
                       metadata=(("authorization", "Bearer " + _token(port)),))
    mismatch = ("group 'default': collective #4 does not match across ranks: rank 0 called broadcast(float32 [4], "
                "root 0); rank 1 called allreduce(float32 [8], SUM)")
    assert mismatch in list(response.findings), response
    assert sorted(w.global_rank for w in response.workers) == [0, 1]
    for w in response.workers:
        assert w.error == "" and json.loads(w.record_json)["rank"] == w.global_rank
    cli = subprocess.run([str(TRAINRUN), "flight", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30)
    assert cli.returncode == 0 and mismatch in cli.stdout, cli.stdout + cli.stderr
    subprocess.run([str(TRAINRUN), "stop", f"127.0.0.1:{port}"], capture_output=True, timeout=30)
    assert j.finish()[0] == 128 + signal.SIGTERM


def test_drain_checkpoints_and_exits_138_without_restarting(job):
    j = job("drain", "--agent-port", "0", "--max-restarts", "3")
    port = j.port()
    j.wait_ready()
    out = subprocess.run([str(TRAINRUN), "drain", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "exit with 138" in out.stdout, out.stdout + out.stderr
    rc, log = j.finish()
    assert rc == 138, log
    assert "drained: the workers have exited; exiting with 138" in log and "restarting" not in log, log
    assert all((j.out / f"checkpoint.{r}").read_text() == "[8.0, 8.0, 8.0, 8.0]" for r in (0, 1))


def test_drain_stops_a_worker_that_ignores_it_and_refuses_bad_calls(job):
    grpc = pytest.importorskip("grpc", reason="python3-grpcio is not installed")
    sys.path.insert(0, str(ROOT / "bazel-bin" / "proto"))
    agent_pb2 = pytest.importorskip("agent_pb2", reason="bazel build //proto:agent_py first")
    j = job("drain", "--agent-port", "0", env={"IGNORE_DRAIN": "1"})
    port = j.port()
    j.wait_ready()
    token = (("authorization", "Bearer " + _token(port)),)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        drain = channel.unary_unary("/trainrun.agent.v1.Agent/Drain",
                                    request_serializer=agent_pb2.DrainRequest.SerializeToString,
                                    response_deserializer=agent_pb2.DrainResponse.FromString)
        with pytest.raises(grpc.RpcError) as e:
            drain(agent_pb2.DrainRequest(timeout_seconds=1), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as e:
            drain(agent_pb2.DrainRequest(timeout_seconds=-1), metadata=token, timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "timeout_seconds" in e.value.details()
        assert not (j.out / "checkpoint.0").exists() and j.proc.poll() is None  # refused calls changed nothing
        start = time.monotonic()
        drain(agent_pb2.DrainRequest(timeout_seconds=1), metadata=token, timeout=10)
    rc, log = j.finish()
    assert rc == 138, log
    assert (j.out / "checkpoint.0").exists() and not (j.out / "checkpoint.1").exists()
    assert "the drain timeout passed: stopping the workers" in log, log
    assert time.monotonic() - start < 30


def _certificate(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (needed to make a test certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True, timeout=60)
    return cert, key


def test_the_agent_service_over_tls(job, tmp_path):
    cert, key = _certificate(tmp_path)
    j = job("drain", "--agent-port", "0", "--agent-tls-cert", str(cert), "--agent-tls-key", str(key))
    line = j.line_with("agent service on ")
    assert line.endswith("(TLS)"), line
    port = int(line.split(":")[-1].split()[0])
    j.wait_ready()
    address = f"127.0.0.1:{port}"
    verified = subprocess.run([str(TRAINRUN), "status", address, "--tls-ca", str(cert)], capture_output=True,
                              text=True, timeout=30)
    assert verified.returncode == 0 and "running (ready)" in verified.stdout, verified.stdout + verified.stderr
    plain = subprocess.run([str(TRAINRUN), "status", address, "--timeout", "2"], capture_output=True, text=True,
                           timeout=30)
    assert plain.returncode == 1 and "no agent answered" in plain.stderr, plain.stdout + plain.stderr
    drained = subprocess.run([str(TRAINRUN), "drain", address], capture_output=True, text=True, timeout=30,
                             env=dict(os.environ, TRAINRUN_AGENT_TLS_CA=str(cert)))
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert j.finish()[0] == 138


def test_bad_tls_options_are_refused_by_name(tmp_path):
    (tmp_path / "noop.py").write_text("")
    only_cert = subprocess.run([str(TRAINRUN), "--agent-port", "0", "--agent-tls-cert", "c.pem",
                                str(tmp_path / "noop.py")], capture_output=True, text=True, timeout=60)
    assert only_cert.returncode == 2, only_cert.stdout + only_cert.stderr
    assert "--agent-tls-cert and --agent-tls-key go together (got only --agent-tls-cert)" in only_cert.stderr
    missing = subprocess.run([str(TRAINRUN), "--agent-port", "0", "--agent-tls-cert", str(tmp_path / "none.pem"),
                              "--agent-tls-key", str(tmp_path / "none.key"), str(tmp_path / "noop.py")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0, missing.stdout + missing.stderr
    assert f"cannot read the TLS certificate {tmp_path / 'none.pem'}" in missing.stderr + missing.stdout


def test_a_cpp_worker_answers_dump_stacks_and_get_flight_record(tmp_path):
    """A worker without Python (tests/launcher/launcher_worker.cc): init_process_group starts the native handler."""
    grpc = pytest.importorskip("grpc", reason="python3-grpcio is not installed")
    sys.path.insert(0, str(ROOT / "bazel-bin" / "proto"))
    agent_pb2 = pytest.importorskip("agent_pb2", reason="bazel build //proto:agent_py first")
    worker = ROOT / "bazel-bin" / "tests" / "launcher" / "launcher_worker"
    proc = subprocess.Popen([str(TRAINRUN), "--agent-port", "0", "--nproc-per-node", "2", "--no-python", str(worker),
                             "idle", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        port = None
        for line in proc.stdout:
            if "agent service on " in line:
                port = int(line.split(":")[-1].split()[0])
                break
        assert port, "the agent did not start its service"
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready.{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        token = (("authorization", "Bearer " + _token(port)),)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stacks = channel.unary_unary("/trainrun.agent.v1.Agent/DumpStacks",
                                         request_serializer=agent_pb2.DumpStacksRequest.SerializeToString,
                                         response_deserializer=agent_pb2.DumpStacksResponse.FromString)(
                agent_pb2.DumpStacksRequest(), metadata=token, timeout=30)
            record = channel.unary_unary("/trainrun.agent.v1.Agent/GetFlightRecord",
                                         request_serializer=agent_pb2.GetFlightRecordRequest.SerializeToString,
                                         response_deserializer=agent_pb2.GetFlightRecordResponse.FromString)(
                agent_pb2.GetFlightRecordRequest(), metadata=token, timeout=30)
        assert sorted(w.global_rank for w in stacks.workers) == [0, 1]
        for w in stacks.workers:
            assert w.error == "", w.error
            assert "waiting_in_a_named_function" in w.stacks and "main+" in w.stacks, w.stacks
            assert f"(pid {w.pid})" in w.stacks
        for w in record.workers:
            entries = json.loads(w.record_json)["entries"]
            assert [(e["seq"], e["op"], e["state"]) for e in entries] == \
                [(s, "allreduce(float32 [4], SUM)", "completed") for s in (1, 2, 3)], entries
        assert "group 'default': every rank completed collective #3 allreduce(float32 [4], SUM)" in record.findings
        (tmp_path / "go").touch()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
