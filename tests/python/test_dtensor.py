"""DeviceMesh and DTensor on several ranks under the trainrun launcher: the
redistribute matrix over meshes (4), (2, 2) and (2, 3), every op with a
sharding rule (forward and backward) against whole tensors, and tensor
parallelism against single-process training. Each worker checks its own
results and exits non-zero with the failures listed."""
import pytest

WORKERS = "tests/python/dtensor/"


@pytest.mark.parametrize("mesh,nproc", [("4", 4), ("2x2", 4), ("2x3", 6)])
def test_redistribute_matrix(ranks, mesh, nproc):
    out = ranks.run_script(nproc, WORKERS + "redistribute_worker.py", mesh).stdout
    for rank in range(nproc):
        assert f"rank {rank}: redistribute ok" in out


@pytest.mark.parametrize("mesh,nproc", [("4", 4), ("2x2", 4)])
def test_ops_with_sharding_rules_match_whole_tensors(ranks, mesh, nproc):
    out = ranks.run_script(nproc, WORKERS + "ops_worker.py", mesh).stdout
    for rank in range(nproc):
        assert f"rank {rank}: dtensor ops ok" in out


@pytest.mark.parametrize("args,nproc", [(["2"], 2), (["4"], 4), (["2x2"], 4), (["2", "loss_parallel"], 2),
                                         (["4", "loss_parallel"], 4), (["2", "sequence_parallel"], 2),
                                         (["4", "sequence_parallel"], 4)])
def test_tensor_parallel_transformer_trains_as_one_process(ranks, args, nproc):
    out = ranks.run_script(nproc, WORKERS + "tp_worker.py", *args).stdout
    for rank in range(nproc):
        assert f"rank {rank}: tensor parallel ok" in out


def test_tp_example_learns(ranks):
    """The README's example: a dp=2 x tp=2 run lowers the loss well below uniform."""
    out = ranks.run_script(4, "examples/tp_transformer.py", "--tp", "2", "--steps", "30")
    losses = [float(line.split("loss")[1].split()[0]) for line in out.stdout.splitlines() if "loss" in line]
    assert len(losses) >= 3 and losses[-1] < losses[0] - 0.8, out.stdout


@pytest.mark.parametrize("mode,nproc", [("plain", 2), ("plain", 4), ("tied", 2), ("hsdp", 4), ("accumulate", 2),
                                        ("bf16", 2), ("vocab1001", 2), ("frozen", 2)])
def test_fully_shard_trains_as_one_process(ranks, mode, nproc):
    out = ranks.run_script(nproc, WORKERS + "fsdp_worker.py", mode).stdout
    for rank in range(nproc):
        assert f"rank {rank}: fsdp {mode} ok" in out


def test_fsdp_example_learns(ranks):
    out = ranks.run_script(2, "examples/tp_transformer.py", "--fsdp", "--steps", "30")
    losses = [float(line.split("loss")[1].split()[0]) for line in out.stdout.splitlines() if "loss" in line]
    assert len(losses) >= 3 and losses[-1] < losses[0] - 0.8, out.stdout
