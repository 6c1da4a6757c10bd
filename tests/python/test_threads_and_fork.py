"""Intra-op threads across fork: a process that ran oneDNN products (linear layers, matmuls) on several threads
forks a child (a DataLoader worker, a multiprocessing child); the child's own products finish, with the parent's
results, instead of waiting forever on the OpenMP workers fork did not copy."""
import os
import signal
import sys
import time

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

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
