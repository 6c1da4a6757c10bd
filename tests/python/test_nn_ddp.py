"""trainrun.nn, optim and DDP from Python: Modules defined in Python
(parameters, children, state_dict), an optimizer step against the update
rule, DDP on 2 ranks under the launcher, @record's root cause, and the
README's main job (the digits classifier) reaching its promised accuracy."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
sys.path.insert(0, str(ROOT / "python"))
if not (ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so").exists() or not TRAINRUN.exists():
    pytest.skip("trainrun._C or the launcher is not built (bazel build //...)", allow_module_level=True)

import trainrun as tr  # noqa: E402
from trainrun import nn  # noqa: E402


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(tr.full([4], 2.0))
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x):
        return self.inner(self.fc(x) * self.scale)


def test_python_modules_register_parameters_children_and_state():
    b = Block()
    names = [n for n, _ in b.named_parameters()]
    assert names == ["scale", "fc.weight", "fc.bias", "inner.0.weight", "inner.0.bias"]
    assert b.fc.weight.shape == (4, 3) and b.scale.tolist() == [2.0] * 4
    out = b(tr.ones([2, 3]))
    assert out.shape == (2, 4) and out.requires_grad
    state = b.state_dict()
    other = Block()
    other.load_state_dict(state)
    np.testing.assert_array_equal(other(tr.ones([2, 3])).detach().numpy(), out.detach().numpy())
    del state["scale"]
    with pytest.raises(RuntimeError, match="Missing key\\(s\\) in state_dict: \"scale\""):
        other.load_state_dict(state)
    assert not b.eval().training and b.train().training
    with pytest.raises(AttributeError, match="'Block' has no attribute"):
        b.nothing


def test_sgd_step_follows_the_update_rule():
    w = nn.Parameter(tr.tensor([1.0, -2.0]))
    opt = tr.optim.SGD([w], lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
    # v1 = 2w0, w1 = w0 - 0.1 v1; v2 = 0.9 v1 + 2 w1, w2 = w1 - 0.1 v2
    w0 = np.array([1.0, -2.0])
    v1 = 2 * w0
    w1 = w0 - 0.1 * v1
    w2 = w1 - 0.1 * (0.9 * v1 + 2 * w1)
    np.testing.assert_allclose(w.detach().numpy(), w2, rtol=1e-6)


def test_training_matches_pytorch_step_for_step():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no peer to compare with")
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ours = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
    ours.load_state_dict({k: tr.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 6)).astype(np.float32), rng.integers(0, 4, size=12)
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=1e-2)
    opt_o = tr.optim.AdamW(ours.parameters(), lr=1e-2)
    for _ in range(4):
        opt_t.zero_grad()
        loss_t = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(y))
        loss_t.backward()
        opt_t.step()
        opt_o.zero_grad()
        loss_o = nn.functional.cross_entropy(ours(tr.tensor(x)), tr.tensor(y))
        loss_o.backward()
        opt_o.step()
        assert abs(loss_o.item() - loss_t.item()) < 1e-5
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_ddp_from_python_matches_one_process(ranks):
    r = ranks.run_script(2, "tests/python/ddp_worker.py", "ddp")
    assert "[rank0]:rank 0: ddp ok" in r.stdout and "[rank1]:rank 1: ddp ok" in r.stdout


def test_torch_distributed_api_on_three_ranks(ranks):
    """Every collective, point-to-point and object call of torch.distributed,
    with timedelta timeouts, on 3 ranks under the launcher."""
    r = ranks.run_script(3, "tests/python/collectives_worker.py", deadline=180)
    for rank in range(3):
        assert f"[rank{rank}]:rank {rank}: ok" in r.stdout, r.stdout + r.stderr


def test_init_process_group_takes_pytorchs_arguments():
    import datetime
    import trainrun.distributed as dist
    with pytest.raises(TypeError, match="timeout must be a datetime.timedelta"):
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore(), timeout="10s")
    with pytest.raises(ValueError, match="Invalid backend: 'mpi'"):
        dist.init_process_group("mpi", rank=0, world_size=1, store=dist.HashStore())
    with pytest.raises(ValueError, match="both init_method and store"):
        dist.init_process_group("gloo", "env://", rank=0, world_size=1, store=dist.HashStore())
    # PyTorch's positional order: backend, init_method, timeout, world_size, rank.
    dist.init_process_group("gloo", None, datetime.timedelta(seconds=20), 1, 0, dist.HashStore())
    try:
        assert dist.get_backend() == dist.Backend.GLOO == "gloo"
        t = tr.ones([2])
        dist.all_reduce(t, async_op=True).wait(timeout=datetime.timedelta(seconds=5))
        assert t.tolist() == [1.0, 1.0]
        solo = dist.new_group([0], timeout=datetime.timedelta(seconds=1))
        assert abs(solo.timeout_seconds() - 1.0) < 1e-9 and dist.get_process_group_ranks(solo) == [0]
        with pytest.raises(TypeError, match="new_group: timeout must be a datetime.timedelta"):
            dist.new_group([0], timeout="1s")
    finally:
        dist.destroy_process_group()


def test_record_gives_the_launcher_the_python_root_cause(ranks):
    r = ranks.run_script(2, "tests/python/ddp_worker.py", "fail", launcher_flags=["--grace-period", "1"], check=False)
    assert r.returncode == 1, r.stderr
    assert "rank:      1 (local rank 1)" in r.stderr
    assert "message:   ValueError: rank 1 found a NaN in batch 3" in r.stderr
    assert "raise ValueError" in r.stderr  # the traceback


def test_main_job_reaches_its_accuracy(ranks):
    r = ranks.run_script(2, "examples/train_digits.py", "--epochs", "15")
    line = next(l for l in r.stdout.splitlines() if l.startswith("[rank0]:held-out accuracy "))
    assert float(line.split()[2]) >= 0.95, line
    assert "checkpoint reloaded" in line


def test_pip_installs_the_package_into_a_venv(tmp_path):
    """pip install (offline, Debian's setuptools) into a venv made with
    --system-site-packages; the installed package imports from anywhere."""
    import shutil
    source = tmp_path / "src"
    shutil.copytree(ROOT / "python", source / "python", ignore=shutil.ignore_patterns("__pycache__", "csrc"))
    (source / "bazel-bin" / "python" / "trainrun").mkdir(parents=True)
    shutil.copy2(ROOT / "bazel-bin" / "python" / "trainrun" / "_C.so",
                 source / "bazel-bin" / "python" / "trainrun" / "_C.so")
    (source / "bazel-bin" / "proto").mkdir(parents=True)
    shutil.copy2(ROOT / "bazel-bin" / "proto" / "checkpoint_pb2.py", source / "bazel-bin" / "proto")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "-q",
                        str(source / "python")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import trainrun, pathlib; import trainrun.distributed.checkpoint, "
                        "trainrun.distributed.fsdp, trainrun.distributed.pipelining; "
                        "print(pathlib.Path(trainrun.__file__).parent.parent.name, (trainrun.ones([2]) * 3).tolist())"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["site-packages", "[3.0,", "3.0]"], r.stdout


def test_stores_from_python():
    import trainrun.distributed as dist
    s = dist.HashStore()
    s.set("a", "1")
    assert s.get("a") == b"1" and s.add("n", 5) == 5 and s.add("n", 1) == 6
    assert s.check(["a"]) and not s.check(["missing"])
    with pytest.raises(TimeoutError):
        s.wait(["missing"], timeout=0.05)
    master = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", master.port, timeout=10)
    client.set("k", b"\x00\xff")
    assert master.get("k") == b"\x00\xff"
    prefixed = dist.PrefixStore("job", client)
    prefixed.set("x", "y")
    assert client.get("job/x") == b"y"
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    t = tr.ones([3])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert dist.get_world_size() == 1 and t.tolist() == [1.0, 1.0, 1.0]
    dist.destroy_process_group()


def _blocks_until_another_thread_acts(call, act, delay=0.2):
    """Runs call() on this thread while another Python thread runs act()
    after `delay`. call() must block for the other thread and return once it
    acts: if call() held the GIL, the other thread could never run and call()
    would end in its timeout instead."""
    import threading
    import time
    done = threading.Event()

    def later():
        time.sleep(delay)
        act()
        done.set()

    helper = threading.Thread(target=later)
    start = time.monotonic()
    helper.start()
    try:
        result = call()
    finally:
        helper.join(timeout=30)
    assert done.is_set(), "the other thread never ran"
    assert time.monotonic() - start < 8, "the call waited out its timeout: was the GIL released?"
    return result


def test_blocking_store_calls_release_the_gil(tmp_path):
    import trainrun.distributed as dist
    master = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, wait_for_workers=False, timeout=10)
    client = dist.TCPStore("127.0.0.1", master.port, timeout=10)
    stores = {"hash": (dist.HashStore(),) * 2, "tcp": (client, master),
              "file": (dist.FileStore(str(tmp_path / "fs"), timeout=10),
                       dist.FileStore(str(tmp_path / "fs"), timeout=10)),
              "prefix": (dist.PrefixStore("p", client), dist.PrefixStore("p", master))}
    for name, (waiter, setter) in stores.items():
        got = _blocks_until_another_thread_acts(lambda: waiter.get(f"{name}-g"), lambda: setter.set(f"{name}-g", "v"))
        assert got == b"v", name
        _blocks_until_another_thread_acts(lambda: waiter.wait([f"{name}-w"], timeout=10),
                                          lambda: setter.set(f"{name}-w", "1"))
    # A master store waiting for its worker (on a port found free just before).
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workers = []
    master2 = _blocks_until_another_thread_acts(
        lambda: dist.TCPStore("127.0.0.1", port, world_size=2, is_master=True, wait_for_workers=True, timeout=10),
        lambda: workers.append(dist.TCPStore("127.0.0.1", port, world_size=2, timeout=10)))
    assert master2.port == port and len(workers) == 1


def test_cnn_layers_and_functional_ops_from_python():
    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.pool = nn.MaxPool2d(2)
            self.head = nn.Linear(4 * 4 * 4, 3)

        def forward(self, x):
            return self.head(self.pool(tr.relu(self.bn(self.conv(x)))).flatten(1))

    m = Cnn()
    x = tr.randn([5, 1, 8, 8])
    loss = nn.functional.cross_entropy(m(x), tr.tensor([0, 1, 2, 0, 1]))
    loss.backward()
    assert m.conv.weight.grad.shape == (4, 1, 3, 3)
    assert [n for n, _ in m.named_buffers()] == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    a = np.random.default_rng(3).normal(size=(4, 6)).astype(np.float32)
    values, indices = tr.topk(tr.tensor(a), 2, 1)
    np.testing.assert_allclose(values.numpy(), -np.sort(-a, 1)[:, :2], rtol=1e-6)
    np.testing.assert_allclose(tr.cumsum(tr.tensor(a), 1).numpy(), np.cumsum(a, 1), rtol=1e-5)
    np.testing.assert_allclose(tr.logsumexp(tr.tensor(a), [1]).numpy(), np.log(np.exp(a).sum(1)), rtol=1e-5)
    assert [c.shape for c in tr.chunk(tr.tensor(a), 2, 1)] == [(4, 3), (4, 3)]


def test_lr_schedulers_follow_pytorch():
    w = nn.Parameter(tr.ones([1]))
    opt = tr.optim.SGD([w], lr=1.0)
    warmup = tr.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    decay = tr.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5 ** step)
    schedule = tr.optim.lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[2])
    lrs = []
    for _ in range(5):
        lrs.append(schedule.get_last_lr()[0])
        opt.step()
        schedule.step()
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no peer to compare with")
    tw = torch.nn.Parameter(torch.ones(1))
    topt = torch.optim.SGD([tw], lr=1.0)
    tsched = torch.optim.lr_scheduler.SequentialLR(
        topt, [torch.optim.lr_scheduler.LinearLR(topt, start_factor=0.5, total_iters=2),
               torch.optim.lr_scheduler.LambdaLR(topt, lambda step: 0.5 ** step)], milestones=[2])
    expected = []
    for _ in range(5):
        expected.append(tsched.get_last_lr()[0])
        topt.step()
        tsched.step()
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
