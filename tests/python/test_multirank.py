"""The N-rank runner the Python suites share (multirank.py): a function
runs on every rank and its collectives see each other; a rank's failure is
reported with its traceback; a hung run is killed at the deadline with
every process it started."""
import os
import pathlib
import time

import pytest


def sums_over_ranks(n):
    import trainrun as tr
    import trainrun.distributed as dist
    dist.init_process_group("gloo")
    t = tr.full([int(n)], float(dist.get_rank() + 1))
    dist.all_reduce(t)
    world = dist.get_world_size()
    assert t.tolist() == [world * (world + 1) / 2] * int(n), t.tolist()
    dist.destroy_process_group()


def rank_one_fails():
    if os.environ["RANK"] == "1":
        raise ValueError("rank one saw a bad batch")


def hangs_writing_pid(directory):
    pathlib.Path(directory, os.environ["RANK"]).write_text(str(os.getpid()))
    time.sleep(600)


def test_a_function_runs_on_every_rank(ranks):
    run = ranks.run_function(3, sums_over_ranks, 5)
    assert all("rank %d: ok" % r in run.per_rank(r) for r in range(3))


def test_a_failing_rank_is_reported_with_its_traceback(ranks):
    run = ranks.run_function(2, rank_one_fails, check=False)
    assert run.returncode != 0  # rank 0 may or may not finish first: the launcher stops it on rank 1's failure
    assert "ValueError: rank one saw a bad batch" in run.per_rank(1), run.failure_text()
    with pytest.raises(AssertionError, match="rank_one_fails on 2 ranks"):
        ranks.run_function(2, rank_one_fails)


def test_a_hung_run_is_killed_at_the_deadline_with_its_workers(ranks, tmp_path):
    start = time.monotonic()
    run = ranks.run_function(2, hangs_writing_pid, tmp_path, deadline=8, check=False)
    assert run.killed and time.monotonic() - start < 30
    pids = [int((tmp_path / str(r)).read_text()) for r in range(2)]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        time.sleep(0.05)
    assert not any(os.path.exists("/proc/%d" % p) for p in pids), "workers outlived the killed run"
