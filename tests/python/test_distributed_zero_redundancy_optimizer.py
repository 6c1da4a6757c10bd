"""ZeroRedundancyOptimizer on 2 ranks through the launcher: DDP + ZeRO(Adam) trains as one process's Adam on
the whole batch; each rank holds the state of only its share (PyTorch's greedy partition, largest first); a
scheduler's lr reaches the shares; consolidate_state_dict/state_dict/load_state_dict resume bit for bit."""
import datetime

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 1))


def _batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(8, 6, generator=g), torch.randn(8, 1, generator=g)


def zero_trains_as_one_process():
    import pytest
    from trainrun import distributed as dist
    from trainrun.distributed.optim import ZeroRedundancyOptimizer
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()

    reference = _model()
    ref_opt = torch.optim.Adam(reference.parameters(), lr=0.05)
    ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=2, gamma=0.5)
    model = DDP(_model())
    zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(zero, step_size=2, gamma=0.5)
    assert isinstance(zero, torch.optim.Optimizer)
    # The share: largest first, each to the rank holding fewest elements (ties: the lower rank).
    sizes = [p.numel() for p in model.parameters()]  # 96, 16, 128, 8, 8, 1
    owner_sizes = [0, 0]
    owners = []
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        r = min(range(2), key=lambda r: owner_sizes[r])
        owner_sizes[r] += sizes[i]
        owners.append((i, r))
    mine = sorted(i for i, r in owners if r == rank)
    assert len(zero.optim.param_groups[0]["params"]) == len(mine)

    for step in range(4):
        x, y = _batch(step)
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
        ref_sched.step()
        half = slice(rank * 4, rank * 4 + 4)
        zero.zero_grad()
        torch.nn.functional.mse_loss(model(x[half]), y[half]).backward()
        zero.step()
        sched.step()
    for a, b in zip(reference.parameters(), model.parameters()):
        assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()
    assert zero.param_groups[0]["lr"] == 0.05 * 0.25  # (the shares get it at the next step, as in PyTorch)
    # Only this rank's share has state.
    assert len(zero.optim.state_dict()["state"]) == len(mine)

    with pytest.raises(RuntimeError, match="has not been consolidated"):
        zero.state_dict()
    zero.consolidate_state_dict(to=0)
    full = [zero.state_dict() if rank == 0 else None]
    if rank == 0:
        reference_state = ref_opt.state_dict()
        assert sorted(full[0]["state"]) == sorted(reference_state["state"]) == list(range(6))
        for i, entry in reference_state["state"].items():
            assert torch.allclose(full[0]["state"][i]["exp_avg_sq"], entry["exp_avg_sq"], atol=1e-8)
    dist.broadcast_object_list(full, src=0)

    # A fresh model and optimizer resumed from the checkpoint step exactly as the running one.
    resumed_model = DDP(_model())
    resumed_model.module.load_state_dict(model.module.state_dict())
    resumed = ZeroRedundancyOptimizer(resumed_model.parameters(), optimizer_class=torch.optim.Adam, lr=0.05)
    resumed.load_state_dict(full[0])
    assert resumed.param_groups[0]["lr"] == 0.05 * 0.25
    for m, opt in ((model, zero), (resumed_model, resumed)):
        x, y = _batch(9)
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x[rank * 4:rank * 4 + 4]), y[rank * 4:rank * 4 + 4]).backward()
        opt.step()
    for a, b in zip(model.parameters(), resumed_model.parameters()):
        assert torch.equal(a, b)
    assert world == 2

    # A rank with no share yet (one parameter, two ranks); add_param_group gives the next one to rank 1.
    lone, later = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    small = ZeroRedundancyOptimizer([lone], optimizer_class=torch.optim.SGD, lr=0.1)
    assert (small.optim is None) == (rank == 1)
    small.add_param_group({"params": [later], "lr": 1.0})
    lone.grad, later.grad = torch.full([3], rank + 1.0), torch.full([2], rank + 1.0)  # (each owner's own grad)
    small.step()
    assert torch.allclose(lone, torch.full([3], 0.9)) and later.tolist() == [-1.0] * 2  # (by rank 0, rank 1)
    dist.destroy_process_group()


def test_zero_redundancy_optimizer_trains_as_one_process_and_resumes(ranks):
    ranks.run_function(2, zero_trains_as_one_process)


def zero_joins_uneven_inputs():
    """PyTorch's generic Join recipe: DDP and ZeRO together in Join, rank 1 with one input more. The rank that
    ran out keeps stepping its share (ZeRO's join hook) and shadowing DDP's all-reduces, so nothing hangs and
    both ranks end with the same weights."""
    from trainrun import distributed as dist
    from trainrun.distributed.algorithms.join import Join, Joinable
    from trainrun.distributed.optim import ZeroRedundancyOptimizer as ZeRO
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    optim = ZeRO(model.parameters(), torch.optim.Adam, lr=0.01)
    assert isinstance(optim, Joinable)
    seen = 0
    with Join([model, optim]):
        for x in [torch.tensor([1.0]) for _ in range(5 + rank)]:
            seen += 1
            model(x).sum().backward()
            optim.step()
    assert seen == 5 + rank
    weights = [torch.zeros(1), torch.zeros(1)]
    dist.all_gather(weights, model.module.weight.detach().reshape(1))
    assert torch.equal(weights[0], weights[1]), weights
    dist.destroy_process_group()


def test_zero_joins_uneven_inputs(ranks):
    ranks.run_function(2, zero_joins_uneven_inputs)
