"""DTensor and custom ops (torch.distributed.tensor.experimental.register_sharding) on 2 ranks, and
debug.visualize_sharding: a row softmax op whose rule allows Replicate or sharding off the softmax dim runs on
Shard(0) pieces with no communication; on Shard(1) it redistributes first; values and gradients equal the op on
the whole tensor; uneven pieces get the right global shape with or without a fake; an op with no rule is refused
by name. visualize_sharding prints the blocks once, from rank 0."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def custom_op_sharding():
    from trainrun import distributed as dist
    from trainrun.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh
    from trainrun.distributed.tensor.debug import CommDebugMode, visualize_sharding
    from trainrun.distributed.tensor.experimental import register_sharding
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (2,))

    @torch.library.custom_op("shard_test::row_softmax", mutates_args=())
    def row_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
        return torch.softmax(x, dim)

    @row_softmax.register_fake
    def _(x, dim):
        return torch.empty_like(x)

    def backward(ctx, g):
        y, = ctx.saved_tensors
        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None

    def setup(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.dim = inputs[1]
    row_softmax.register_autograd(backward, setup_context=setup)

    @register_sharding(row_softmax)
    def rule(x, dim):
        dim = dim % x.ndim
        options = [([Replicate()], [Replicate(), None])]
        options += [([Shard(d)], [Shard(d), None]) for d in range(x.ndim) if d != dim]
        return options

    torch.manual_seed(0)
    whole = torch.randn(6, 4)
    expected = torch.softmax(whole, 1)
    x = distribute_tensor(whole.clone().requires_grad_(), mesh, [Shard(0)])
    with CommDebugMode() as comm:
        y = row_softmax(x, 1)
    assert comm.get_total_counts() == 0 and y.placements == (Shard(0),)
    assert torch.allclose(y.full_tensor(), expected, atol=1e-6)
    y.to_local().mul(torch.arange(4.0)).sum().backward()
    ref = whole.clone().requires_grad_()
    (torch.softmax(ref, 1) * torch.arange(4.0)).sum().backward()
    assert torch.allclose(x.grad.full_tensor(), ref.grad, atol=1e-6)
    # sharded along the softmax dim: redistributed to an allowed layout first
    col = distribute_tensor(whole, mesh, [Shard(1)])
    out = row_softmax(col, 1)
    assert out.placements[0] in (Replicate(), Shard(0)) and torch.allclose(out.full_tensor(), expected, atol=1e-6)
    # uneven rows (5 over 2 ranks: 3 and 2), with the fake and without one
    odd = distribute_tensor(whole[:5], mesh, [Shard(0)])
    assert row_softmax(odd, 1).shape == (5, 4)

    @torch.library.custom_op("shard_test::scale", mutates_args=())
    def scale(x: torch.Tensor, k: float) -> torch.Tensor:
        return x * k

    @register_sharding(torch.ops.shard_test.scale)
    def scale_rule(x, k):
        return [([Shard(0)], [Shard(0), None])]
    scaled = scale(odd, 2.0)
    assert scaled.shape == (5, 4) and torch.allclose(scaled.full_tensor(), whole[:5] * 2)

    @torch.library.custom_op("shard_test::no_rule", mutates_args=())
    def no_rule(x: torch.Tensor) -> torch.Tensor:
        return x.clone()
    with pytest.raises(RuntimeError, match="shard_test.no_rule.default does not have a sharding strategy"):
        no_rule(x)
    visualize_sharding(distribute_tensor(torch.zeros(4, 6), mesh, [Shard(1)]), header="cols")
    visualize_sharding(distribute_tensor(torch.zeros(5), mesh, [Shard(0)]))
    dist.barrier()


def test_on_two_ranks(ranks):
    run = ranks.run_function(2, custom_op_sharding)
    printed = run.per_rank(0)
    assert "cols" in printed and "Col 0-2" in printed and "Col 3-5" in printed and "cpu:0" in printed
    assert "Row 0-3" in printed and "cpu:1" in printed and "Col 0-2" in printed
    assert "Col" not in run.per_rank(1)  # (printed once)
