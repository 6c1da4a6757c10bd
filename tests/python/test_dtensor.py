"""DeviceMesh and DTensor on several ranks under the trainrun launcher: the
redistribute matrix over meshes (4), (2, 2) and (2, 3), every op with a
sharding rule (forward and backward) against whole tensors, and tensor
parallelism against single-process training. Each worker checks its own
results and exits non-zero with the failures listed."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
WORKERS = ROOT / "tests" / "python" / "dtensor"
if not TRAINRUN.exists():
    pytest.skip("the trainrun launcher is not built (scripts/bazel.sh build //...)", allow_module_level=True)


def launch(nproc, worker, *args, timeout=240):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([str(TRAINRUN), "--nproc-per-node", str(nproc), str(WORKERS / worker), *args],
                       capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    return r.stdout


@pytest.mark.parametrize("mesh,nproc", [("4", 4), ("2x2", 4), ("2x3", 6)])
def test_redistribute_matrix(mesh, nproc):
    out = launch(nproc, "redistribute_worker.py", mesh)
    for rank in range(nproc):
        assert f"rank {rank}: redistribute ok" in out


@pytest.mark.parametrize("mesh,nproc", [("4", 4), ("2x2", 4)])
def test_ops_with_sharding_rules_match_whole_tensors(mesh, nproc):
    out = launch(nproc, "ops_worker.py", mesh)
    for rank in range(nproc):
        assert f"rank {rank}: dtensor ops ok" in out


@pytest.mark.parametrize("args,nproc", [(["2"], 2), (["4"], 4), (["2x2"], 4), (["2", "loss_parallel"], 2),
                                         (["4", "loss_parallel"], 4), (["2", "sequence_parallel"], 2),
                                         (["4", "sequence_parallel"], 4)])
def test_tensor_parallel_transformer_trains_as_one_process(args, nproc):
    out = launch(nproc, "tp_worker.py", *args)
    for rank in range(nproc):
        assert f"rank {rank}: tensor parallel ok" in out


def test_tp_example_learns():
    """The README's example: a dp=2 x tp=2 run lowers the loss well below uniform."""
    out = subprocess.run([str(TRAINRUN), "--nproc-per-node", "4", str(ROOT / "examples" / "tp_transformer.py"),
                          "--tp", "2", "--steps", "30"], capture_output=True, text=True, timeout=240,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    losses = [float(line.split("loss")[1].split()[0]) for line in out.stdout.splitlines() if "loss" in line]
    assert len(losses) >= 3 and losses[-1] < losses[0] - 0.8, out.stdout


@pytest.mark.parametrize("mode,nproc", [("plain", 2), ("plain", 4), ("tied", 2), ("hsdp", 4), ("accumulate", 2),
                                        ("bf16", 2), ("vocab1001", 2), ("frozen", 2)])
def test_fully_shard_trains_as_one_process(mode, nproc):
    out = launch(nproc, "fsdp_worker.py", mode)
    for rank in range(nproc):
        assert f"rank {rank}: fsdp {mode} ok" in out


def test_fsdp_example_learns():
    out = subprocess.run([str(TRAINRUN), "--nproc-per-node", "2", str(ROOT / "examples" / "tp_transformer.py"),
                          "--fsdp", "--steps", "30"], capture_output=True, text=True, timeout=240,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    losses = [float(line.split("loss")[1].split()[0]) for line in out.stdout.splitlines() if "loss" in line]
    assert len(losses) >= 3 and losses[-1] < losses[0] - 0.8, out.stdout
