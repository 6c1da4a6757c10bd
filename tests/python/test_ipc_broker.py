"""The node's broker of shared device memory (launcher/ipc_broker.h) as the
workers meet it: hosted by the agent (TRAINRUN_IPC_BROKER) or by a plain
parent process, leases taken before a handle is sent, claimed and released
by the receiver, given back when the receiver dies (SIGKILL included), and
the leak report naming what a process left behind. The books are the same
for any device, so these run without a GPU; test_cuda_ipc.py runs the CUDA
tensors over them where a GPU is found."""
import multiprocessing
import os
import pathlib
import signal
import threading
import time

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

from trainrun import _C  # noqa: E402
from trainrun.multiprocessing import _broker  # noqa: E402

TIMEOUT = 60
MiB = 1 << 20


def wait_for_file(path, seconds=TIMEOUT):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.01)
    time.sleep(0.01)  # written whole (small files, one write)
    return pathlib.Path(path).read_text()


# ---- under the agent ---------------------------------------------------------------------------------------
def leases_between_two_workers(folder):
    """Rank 0 exports two blocks and sends rank 1 a lease on the first (the second is never opened); rank 1 claims
    it and exits without releasing it; rank 0 must hear of the release."""
    rank = int(os.environ["RANK"])
    path = os.environ[_broker.ENV]
    assert path.startswith("/tmp/trainrun-") and path.endswith("/ipc.sock"), path
    c = _broker.client_for_export()
    assert c.path == path, "a worker hosted its own broker instead of using the agent's"
    if rank == 0:
        released = []
        got = threading.Event()
        c.export("rank0:a", MiB, "cuda:0", lambda lease: (released.append(lease), got.set()))
        c.export("rank0:b", 2 * MiB, "cuda:0", lambda lease: None)
        lease = c.lease("rank0:a")
        c.lease("rank0:b")  # sent nowhere: the leak report's "never opened"
        report = c.report()
        assert sorted(l["bytes"] for l in report["leases"]) == [MiB, 2 * MiB], report
        pathlib.Path(folder, "lease.tmp").write_text(lease)
        os.rename(os.path.join(folder, "lease.tmp"), os.path.join(folder, "lease"))
        assert got.wait(TIMEOUT), "rank 1 exited holding a lease and rank 0 never heard it was released"
        assert released == [lease]
        left = c.report()["leases"]
        assert [l["bytes"] for l in left] == [2 * MiB] and not left[0]["claimed"], left
    else:
        lease = wait_for_file(os.path.join(folder, "lease"))
        _broker.client_at(path).claim(lease)
        claimed = [l for l in c.report()["leases"] if l["lease"] == lease]
        assert claimed and claimed[0]["claimed"] and claimed[0]["holder_rank"] == 1, claimed
        # Returns (and exits) still holding it.


def test_the_agent_hosts_the_broker_and_reports_what_workers_left_behind(ranks, tmp_path):
    run = ranks.run_function(2, leases_between_two_workers, str(tmp_path))
    out = run.stdout + run.stderr
    assert "shared device memory the workers left behind" in out, run.failure_text()
    assert "rank 1 (pid" in out and "exited still using 1.00 MiB of cuda:0 owned by rank 0" in out, \
        run.failure_text()
    assert "exited with 2.00 MiB of cuda:0 it sent" in out and "never opened by the receiver" in out, \
        run.failure_text()


def no_leases(_):
    c = _broker.client_for_export()
    export_id = f"{os.getpid()}:x"  # (ids are per process, as the CUDA exports' are: both ranks export one)
    c.export(export_id, 4096, "cuda:0", lambda lease: None)
    _broker.client_at(c.path).release(c.lease(export_id))


def test_a_job_that_gives_everything_back_has_no_leak_report(ranks, tmp_path):
    run = ranks.run_function(2, no_leases, "-")
    assert "left behind" not in run.stdout + run.stderr, run.failure_text()


# ---- without an agent ------------------------------------------------------------------------------------
def _claim_then_die(path, lease, claimed):
    c = _broker.BrokerClient(path)
    c.claim(lease)
    c.report()  # the claim is in the books before the parent is told
    claimed.set()
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_consumer_killed_with_sigkill_gives_its_lease_back(tmp_path):
    broker = _C._IpcBroker(str(tmp_path / "broker.sock"))
    owner = _broker.BrokerClient(broker.socket_path)
    released = []
    got = threading.Event()
    owner.export("blk", 3 * MiB, "cuda:1", lambda lease: (released.append(lease), got.set()))
    lease = owner.lease("blk")
    ctx = multiprocessing.get_context("fork")
    claimed = ctx.Event()
    child = ctx.Process(target=_claim_then_die, args=(broker.socket_path, lease, claimed), daemon=True)
    child.start()
    try:
        assert claimed.wait(TIMEOUT)
        child.join(TIMEOUT)
        assert child.exitcode == -signal.SIGKILL
        assert got.wait(TIMEOUT), "the broker did not give back the lease of a consumer killed with SIGKILL"
        assert released == [lease]
        stats = broker.stats()
        assert stats["leases_released_by_death"] == 1 and stats["leases_live"] == 0, stats
        assert f"pid {child.pid} exited still using 3.00 MiB of cuda:1" in broker.leak_report()
    finally:
        if child.is_alive():
            child.kill()
        owner.close()


def test_a_parent_hosts_a_broker_its_children_find(tmp_path, monkeypatch):
    monkeypatch.delenv(_broker.ENV, raising=False)
    monkeypatch.setitem(_broker._state, "hosted", None)
    monkeypatch.setitem(_broker._state, "clients", {})
    path = _broker.host_for_children()
    try:
        assert os.environ[_broker.ENV] == path and _broker.hosted_broker() is not None
        assert _broker.host_for_children() == path  # once per process
        assert _broker.client_for_export().path == path
    finally:
        _broker._close_hosted()
    assert _broker.ENV not in os.environ and not os.path.exists(path)


def test_refusals_name_what_is_wrong(tmp_path):
    with pytest.raises(_broker.BrokerError, match="cannot reach the shared-memory broker at /nonexistent/b.sock"):
        _broker.BrokerClient("/nonexistent/b.sock")
    broker = _C._IpcBroker(str(tmp_path / "b.sock"))
    c = _broker.BrokerClient(broker.socket_path, timeout=5)
    try:
        with pytest.raises(_broker.BrokerError, match="refused 'lease'.*'ghost', which this process has not exported"):
            c.lease("ghost")
        c.claim("no-such-lease")  # answered with an error nobody waits for: the connection stays usable
        assert c.report()["leases"] == []
    finally:
        c.close()
    with pytest.raises(ValueError, match="longer than the 107 bytes"):
        _C._IpcBroker("/tmp/" + "x" * 200)
