"""Intra-op threads: the default count follows OMP_NUM_THREADS (what the launcher sets for each of several
workers) as PyTorch's does; a process that ran oneDNN products (linear layers, matmuls) on several threads forks a
child (a DataLoader worker, a multiprocessing child), and the child's own products finish, with the parent's
results, instead of waiting forever on the OpenMP workers (oneDNN's) fork did not copy."""
import os
import signal
import subprocess
import sys
import time

import pytest

from built_tree import ROOT  # (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_products_in_a_child_forked_after_threaded_products_finish():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        layer = torch.nn.Linear(256, 256)
        x = torch.randn(256, 256)
        with torch.no_grad():
            want = [layer(x), torch.mm(x, x)]
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report whether its products equal the parent's, then leave at once
            code = 1
            try:
                with torch.no_grad():
                    got = [layer(x), torch.mm(x, x)]
                code = 0 if all(torch.equal(g, w) for g, w in zip(got, want)) else 2
            finally:
                os.write(write, bytes([code]))
                os._exit(0)
        os.close(write)
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's linear layer and matmul did not finish in 60 s")
        result = os.read(read, 1)
        os.close(read)
        assert status == 0 and result == bytes([0]), f"child status {status}, report {result!r}"
    finally:
        torch.set_num_threads(before)
        sys.stdout.flush()


def _default_threads(value):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if value is not None:
        env["OMP_NUM_THREADS"] = value
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", "import trainrun; print(trainrun.get_num_threads())"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


def test_the_default_thread_count_follows_omp_num_threads():
    cpus = os.cpu_count()
    assert _default_threads("3") == 3
    assert _default_threads("1") == 1
    assert _default_threads("2,1") == 2, "a nested list's first level"
    assert _default_threads(None) == cpus
    assert _default_threads("many") == cpus, "a value that is not a number leaves the default"
    assert _default_threads("0") == cpus
