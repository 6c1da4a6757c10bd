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
            for p, q in zip(model.module.parameters(), expected):  # (float32 orthogonalization: 1e-4 relative)
                assert torch.allclose(p.grad, q, rtol=1e-3, atol=1e-4), (hook.__name__, step,
                                                                         (p.grad - q).abs().max())
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


def _one_step_grads(model, x):
    model.module.zero_grad()
    model(x).pow(2).sum().backward()
    return [p.grad.clone() for p in model.module.parameters()]


def comm_hook_wrappers_and_registration_by_type():
    """fp16_compress_wrapper around a Python averaging hook gives what the built-in fp16_compress_hook gives
    (the mean of float16-rounded gradients); register_ddp_comm_hook by DDPCommHookType registers the named hook
    (POWER_SGD averages exactly before its start_powerSGD_iter of 1000); NOOP leaves each rank's own gradient."""
    from trainrun import distributed as dist
    from trainrun.distributed.algorithms.ddp_comm_hooks import (DDPCommHookType, default_hooks,
                                                                register_ddp_comm_hook)
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    inputs = _inputs(world, 3)
    expected = _reference_grads(_model(), inputs)
    seen_dtypes, fp16_grads = [], None

    def averaging_hook(state, bucket):
        seen_dtypes.append(bucket.buffer().dtype)
        tensor = bucket.buffer().div_(world)
        return dist.all_reduce(tensor, async_op=True).get_future().then(lambda fut: fut.value()[0])

    for wrapper, dtype in ((default_hooks.fp16_compress_wrapper, torch.float16),
                           (default_hooks.bf16_compress_wrapper, torch.bfloat16)):
        wrapped, builtin = DDP(_model()), DDP(_model())
        wrapped.register_comm_hook(None, wrapper(averaging_hook))
        builtin.register_comm_hook(None, default_hooks.fp16_compress_hook if dtype == torch.float16
                                   else default_hooks.bf16_compress_hook)
        got, want = _one_step_grads(wrapped, inputs[rank]), _one_step_grads(builtin, inputs[rank])
        fp16_grads = want if dtype == torch.float16 else fp16_grads
        assert seen_dtypes[-1] == dtype and all(g.dtype == torch.float32 for g in got)
        for g, w, e in zip(got, want, expected):
            assert torch.allclose(g, w, atol=1e-6), (dtype, (g - w).abs().max())
            assert torch.allclose(g, e, atol=1e-2) and not torch.equal(g, e)  # (rounded, so close, not equal)
    for hook_type, check in ((DDPCommHookType.POWER_SGD, expected), (DDPCommHookType.ALLREDUCE, expected),
                             (DDPCommHookType.FP16_COMPRESS, fp16_grads)):
        model = DDP(_model())
        register_ddp_comm_hook(hook_type, model)
        for g, e in zip(_one_step_grads(model, inputs[rank]), check):
            assert torch.allclose(g, e, atol=1e-5), (hook_type, (g - e).abs().max())
    model = DDP(_model())
    register_ddp_comm_hook(DDPCommHookType.NOOP, model)
    local = _reference_grads(_model(), [inputs[rank]])
    for g, e in zip(_one_step_grads(model, inputs[rank]), local):
        assert torch.allclose(g, e, atol=1e-6)
    with pytest.raises(TypeError, match="DDPCommHookType"):
        register_ddp_comm_hook("fp16", model)


@pytest.mark.parametrize("function", [powersgd_matches_averaging_at_full_rank, powersgd_rank_one_trains,
                                      comm_hook_wrappers_and_registration_by_type])
def test_on_two_ranks(ranks, function):
    ranks.run_function(2, function)
