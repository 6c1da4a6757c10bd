"""ShardedGradScaler (torch.distributed.fsdp.sharded_grad_scaler) with FSDP2 on 2 ranks: finite steps equal one
process training on the whole batch with the unscaled loss; an inf in one rank's gradient shard makes every
rank skip that step and back the scale off (the plain GradScaler, which checks only its own shard, lets the
ranks disagree: the rank without the inf would step)."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))


def _batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(8, 4, generator=g), torch.randn(8, 2, generator=g)


def sharded_scaler_agrees_across_ranks():
    from trainrun import distributed as dist
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
    from trainrun.amp import GradScaler
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, reference = _model(), _model()
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    scaler = ShardedGradScaler("cpu", init_scale=1024.0, growth_interval=2)
    for step in range(4):
        x, y = _batch(step)
        shard = slice(rank * 4, (rank + 1) * 4)
        loss = (model(x[shard]) - y[shard]).pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        if step == 2 and rank == 1:  # an overflow in rank 1's piece of the first weight only
            model[0].weight.grad.to_local()[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        if step != 2:  # the reference takes the same finite steps
            ref_opt.zero_grad()
            (reference(x) - y).pow(2).mean().backward()
            ref_opt.step()
        for p, q in zip(model.parameters(), reference.parameters()):
            assert torch.allclose(p.full_tensor(), q.detach(), atol=1e-5), (step, rank)
    # scale: 1024 -> (2 good steps) 2048 -> (the inf) 1024 -> 1024 (one good step of two)
    assert scaler.get_scale() == 1024.0
    scales = [torch.tensor([scaler.get_scale()]) for _ in range(world)]
    dist.all_gather(scales, torch.tensor([scaler.get_scale()]))
    assert all(s.item() == 1024.0 for s in scales)
    # The plain scaler checks only its own shard: rank 0 would not see rank 1's inf.
    plain = GradScaler("cpu")
    loss = model(_batch(9)[0]).sum()
    opt.zero_grad()
    plain.scale(loss).backward()
    if rank == 1:
        model[0].weight.grad.to_local()[0, 0] = float("nan")
    plain.unscale_(opt)
    assert plain._per_optimizer_states[id(opt)]["found_inf"] == (rank == 1)
    with pytest.raises(ValueError, match="growth factor"):
        ShardedGradScaler("cpu", growth_factor=0.5)


def test_on_two_ranks(ranks):
    ranks.run_function(2, sharded_scaler_agrees_across_ranks)
