"""DDP's PowerSGD communication hooks (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook) on 2 ranks:
plain averaging before start_powerSGD_iter; at full rank the compressed gradients are the exact mean (error
feedback cancels over the ranks); at rank 1 a model still trains to PyTorch's loss level, the state reports its
compression rate and carries the error to the next step; the batched hook at full rank is exact too."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))


def _inputs(world, step):
    return [torch.randn(4, 6, generator=torch.Generator().manual_seed(100 * step + r)) for r in range(world)]


def _reference_grads(model, inputs):
    """The mean over the ranks' batches of each parameter's gradient, computed in this process."""
    model.zero_grad()
    for x in inputs:
        (model(x).pow(2).sum() / len(inputs)).backward()
    return [p.grad.clone() for p in model.parameters()]


def powersgd_matches_averaging_at_full_rank():
    from trainrun import distributed as dist
    from trainrun.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with pytest.raises(ValueError, match="start_powerSGD_iter"):
        powerSGD.PowerSGDState(process_group=None, start_powerSGD_iter=1)
    # Full rank: each matrix's smaller side (5 and 3); for the batched hook, the bucket's 53 numbers padded to an
    # 8 x 8 matrix whose last row is zero, so rank 7 spans it (rank 8 would orthonormalize rounding noise).
    for hook, full_rank in ((powerSGD.powerSGD_hook, 8), (powerSGD.batched_powerSGD_hook, 7)):
        model, reference = DDP(_model()), _model()
        state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=full_rank,
                                       start_powerSGD_iter=2, min_compression_rate=0)
        model.register_comm_hook(state, hook)
        for step in range(5):
            inputs = _inputs(world, step)
            model.module.zero_grad()
            model(inputs[rank]).pow(2).sum().backward()
            expected = _reference_grads(reference, inputs)
            for p, q in zip(model.module.parameters(), expected):
                assert torch.allclose(p.grad, q, atol=1e-4), (hook.__name__, step, (p.grad - q).abs().max())
        assert state.iter == 5 and state.compression_stats()[1] > 0
        assert set(state.error_dict) == {0}


def powersgd_rank_one_trains():
    from trainrun import distributed as dist
    from trainrun.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    target = nn.Linear(6, 3)
    final = {}
    for name in ("plain", "powersgd"):
        model = DDP(_model())
        state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=3)
        if name == "powersgd":
            model.register_comm_hook(state, powerSGD.powerSGD_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for step in range(60):
            x = _inputs(world, step)[rank]
            with torch.no_grad():
                y = target(x)
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses = torch.tensor([loss.item()])
        dist.all_reduce(losses)
        final[name] = losses.item() / world
        if name == "powersgd":
            rate, before, after = state.compression_stats()
            assert rate > 1.5 and before > after, state.compression_stats()
            assert state.error_dict[0].abs().sum().item() > 0  # rank 1 loses something, carried to the next step
    start = (_model()(_inputs(world, 0)[rank]) - target(_inputs(world, 0)[rank])).pow(2).mean().item()
    assert final["powersgd"] < 0.25 * start, (final, start)
    assert final["powersgd"] < 3 * final["plain"] + 1e-3, final


@pytest.mark.parametrize("function", [powersgd_matches_averaging_at_full_rank, powersgd_rank_one_trains])
def test_on_two_ranks(ranks, function):
    ranks.run_function(2, function)
