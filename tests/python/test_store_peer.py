"""Wire compatibility of trainrun's TCPStore with PyTorch 1.13 (the peer):
torch's client against our server (`trainrun store`), a real 2-rank gloo
init_process_group whose rendezvous goes through our server, and our client
(tests/store/peer_client_check) against torch's server. Skips with a reason
when torch or the built binaries are missing."""
import datetime
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no peer to test against")
import torch.distributed as dist  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
PEER_CLIENT_CHECK = ROOT / "bazel-bin" / "tests" / "store" / "peer_client_check"
PYTHON = "/usr/bin/python3"


def need(path):
    if not path.exists():
        pytest.skip(f"{path.relative_to(ROOT)} is not built (run bazel build //...)")


@pytest.fixture
def trainrun_store():
    """A `trainrun store` server on a free port of 127.0.0.1; yields the port."""
    need(TRAINRUN)
    proc = subprocess.Popen([str(TRAINRUN), "store", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("trainrun store: listening on 127.0.0.1:"), line + proc.stderr.read()
        yield int(line.split()[-1].rsplit(":", 1)[1])
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0, f"trainrun store exited with {proc.returncode}"
        assert "stopping on SIGTERM" in out


def torch_client(port, timeout_s=10):
    return dist.TCPStore("127.0.0.1", port, 1, False, datetime.timedelta(seconds=timeout_s), wait_for_workers=False)


def test_torch_client_every_operation(trainrun_store):
    s = torch_client(trainrun_store)
    s.set("k1", b"v1")
    assert s.get("k1") == b"v1"
    assert s.add("cnt", 5) == 5
    assert s.add("cnt", -2) == 3
    assert s.get("cnt") == b"3"
    assert s.compare_set("k1", b"v1", b"new") == b"new"
    assert s.compare_set("k1", b"WRONG", b"x") == b"new"
    assert s.compare_set("fresh", b"", b"init") == b"init"
    assert s.compare_set("missing", b"exp", b"des") == b"exp"
    assert s.num_keys() == 3
    assert s.delete_key("fresh") is True
    assert s.delete_key("fresh") is False
    s.wait(["k1", "cnt"])
    s.set("big" * 100, b"x" * 70000)
    assert s.get("big" * 100) == b"x" * 70000


def test_torch_client_waits_are_woken_and_time_out(trainrun_store):
    waiter, writer = torch_client(trainrun_store), torch_client(trainrun_store)
    script = textwrap.dedent(f"""
        import datetime, torch.distributed as dist
        s = dist.TCPStore("127.0.0.1", {trainrun_store}, 1, False, datetime.timedelta(seconds=10),
                          wait_for_workers=False)
        s.wait(["ready"])
        print(s.get("ready").decode())
    """)
    proc = subprocess.Popen([PYTHON, "-c", script], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert proc.poll() is None, "the waiter returned before the key existed"
    writer.set("ready", b"yes")
    assert proc.communicate(timeout=20)[0].strip() == "yes"
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="Socket Timeout"):
        waiter.wait(["never"], datetime.timedelta(milliseconds=300))
    assert time.monotonic() - t0 >= 0.25
    waiter.set("after", b"1")  # 1.13's client carries on after a timeout; so must the server
    assert waiter.get("after") == b"1"


def test_gloo_init_process_group_through_our_server(trainrun_store):
    script = textwrap.dedent(f"""
        import datetime, sys, torch, torch.distributed as dist
        rank = int(sys.argv[1])
        store = dist.TCPStore("127.0.0.1", {trainrun_store}, 2, False, datetime.timedelta(seconds=60))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=60))
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t)
        dist.barrier()
        print(f"rank {{rank}} sum {{t.item()}}")
    """)
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
    procs = [subprocess.Popen([PYTHON, "-c", script, str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for r in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outs.append(out.strip())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert outs == ["rank 0 sum 3.0", "rank 1 sum 3.0"]
    assert torch_client(trainrun_store).num_keys() >= 4  # init/, rank addresses, the barrier's keys


def test_our_client_against_our_server(trainrun_store):
    need(PEER_CLIENT_CHECK)
    torch_client(trainrun_store).set("from_torch", b"hello")
    r = subprocess.run([str(PEER_CLIENT_CHECK), "127.0.0.1", str(trainrun_store)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "dialect=modern" in r.stdout
    assert torch_client(trainrun_store).get("from_trainrun") == b"world"


def test_our_client_against_torch_server():
    need(PEER_CLIENT_CHECK)
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip to keep torch's wildcard-bound server off the network")
    # torch 1.13's server binds every interface whatever host it is given:
    # run it in a private network namespace where only loopback exists.
    script = textwrap.dedent(f"""
        import datetime, subprocess, sys, torch.distributed as dist
        s = dist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=30), wait_for_workers=False)
        s.set("from_torch", b"hello")
        r = subprocess.run(["{PEER_CLIENT_CHECK}", "127.0.0.1", str(s.port)], capture_output=True, text=True,
                           timeout=60)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        assert r.returncode == 0
        assert s.get("from_trainrun") == b"world"
    """)
    r = subprocess.run(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" -c "$1"', PYTHON, script],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0 and "unshare failed" in r.stderr:
        pytest.skip(f"cannot create a network namespace here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dialect=torch-1.13" in r.stdout
    assert "all checks passed" in r.stdout
