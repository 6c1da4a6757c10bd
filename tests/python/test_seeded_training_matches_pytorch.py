"""The same training script, written for PyTorch, run under PyTorch 1.13 and under trainrun
(seeded_training_script.py: a transformer encoder layer with dropout, a shuffling DataLoader, AdamW, gradient
clipping) prints the same loss at every step: the seed gives both the same data, initial weights, dropout
masks and batch order. On two ranks too, with DDP over gloo and a DistributedSampler (PyTorch's side under
torch.distributed.run in a private network namespace: its store binds every address)."""
import os
import pathlib
import shutil
import signal
import subprocess

import pytest

from built_tree import needs_torch  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "python" / "seeded_training_script.py"
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "Haswell"))


def _losses(text):
    out = {}
    for line in text.splitlines():
        words = line.split(":", 1)[-1].split()
        if len(words) == 3 and words[0] == "loss":
            out[int(words[1])] = float(words[2])
    return out


def _run(command, deadline=180):
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{command[:3]} ran past {deadline} s:\n{err[-3000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"{' '.join(map(str, command))}: exit {proc.returncode}\n{err[-3000:]}"
    return out


def _same_curve(ours, theirs, steps):
    assert len(theirs) == steps and ours.keys() == theirs.keys(), (ours, theirs)
    for step in theirs:
        assert abs(ours[step] - theirs[step]) <= 5e-5, (step, ours[step], theirs[step])


@needs_torch
def test_one_process_follows_pytorchs_loss_curve():
    theirs = _losses(_run(["/usr/bin/python3", str(SCRIPT), "torch"]))
    ours = _losses(_run(["/usr/bin/python3", str(SCRIPT), "trainrun"]))
    _same_curve(ours, theirs, 16)  # 64 samples in batches of 8, two epochs


@needs_torch
@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None,
                    reason="unshare/ip are missing: no private network namespace for PyTorch's store")
def test_two_ranks_with_ddp_follow_pytorchs_loss_curve(ranks):
    torchrun = ("ip link set lo up && exec /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 "
                "--redirects 1 --tee 1 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29500 "
                f"{SCRIPT} torch")  # (its own namespace: the fixed port cannot collide)
    theirs = _losses(_run(["unshare", "-rn", "sh", "-c", torchrun]))
    ours = _losses(ranks.run(2, SCRIPT, "trainrun").stdout)
    _same_curve(ours, theirs, 8)  # each rank's 32 samples in batches of 8, two epochs
