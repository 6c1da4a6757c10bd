"""DTensor parameters as PyTorch shows them, on 2 ranks through the launcher: nn.Parameter(dtensor) assigned or
registered on a module (module.weight, named_parameters and isinstance(p, nn.Parameter) as in PyTorch; an
optimizer built from model.parameters() updates the module); model.parameters() after fully_shard and tensor
parallelism are DTensors; experimental.implicit_replication and local_map; the functional collectives
(_functional_collectives); cat/stack of DTensors; in-place updates of DTensors; collectives given a DTensor
work on its local piece. In one process: register_parameter(name, None), and plain calls of the functions
the DTensor layer wraps."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _setup():
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    dist.init_process_group("gloo")
    return dist, init_device_mesh("cpu", (dist.get_world_size(),))


def dtensor_parameters_register_and_train():
    dist, mesh = _setup()
    from trainrun.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
    torch.manual_seed(0)
    reference = nn.Linear(4, 6, bias=False)
    whole = reference.weight.detach().clone()

    def shard_rows(name, module, mesh):
        for pname, p in list(module.named_parameters(recurse=False)):
            module.register_parameter(pname, nn.Parameter(distribute_tensor(p.detach(), mesh, [Shard(0)])))
    model = distribute_module(nn.Linear(4, 6, bias=False), mesh, shard_rows)
    with torch.no_grad():
        model.weight.to_local().copy_(whole.chunk(2, 0)[dist.get_rank()])
    assert isinstance(model.weight, DTensor) and isinstance(model.weight, nn.Parameter), type(model.weight)
    assert model.weight.placements == (Shard(0),) and tuple(model.weight.shape) == (6, 4)
    params = dict(model.named_parameters())
    assert isinstance(params["weight"], DTensor), params
    assert sum(p.numel() for p in model.parameters()) == 24  # global sizes, as PyTorch counts them
    assert torch.equal(model.weight.full_tensor(), whole)
    # assignment registers too (and replaces the earlier one)
    model.weight = nn.Parameter(distribute_tensor(whole, mesh, [Shard(0)]))
    assert len(list(model.named_parameters())) == 1

    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x = torch.randn(3, 4)
    out = torch.nn.functional.linear(x, model.weight.full_tensor())
    out.sum().backward()
    reference(x).sum().backward()
    optimizer.step()
    with torch.no_grad():
        reference.weight -= 0.5 * reference.weight.grad
    assert torch.allclose(model.weight.full_tensor(), reference.weight, atol=1e-6)
    assert not isinstance(torch.ones(1), nn.Parameter)
    replicated = nn.Parameter(distribute_tensor(torch.ones(2), mesh, [Replicate()]), requires_grad=False)
    assert not replicated.requires_grad and isinstance(replicated, nn.Parameter)


def sharded_models_show_dtensor_parameters():
    dist, mesh = _setup()
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.distributed.tensor import DTensor, Shard
    from trainrun.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    reference = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    reference.load_state_dict(model.state_dict())
    fully_shard(model)
    for p in model.parameters():
        assert isinstance(p, DTensor) and p.placements == (Shard(0),), p
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in reference.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    ref_optimizer = torch.optim.AdamW(reference.parameters(), lr=0.1)
    x = torch.randn(4, 4)
    for _ in range(2):
        model(x).pow(2).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        reference(x).pow(2).sum().backward()
        ref_optimizer.step()
        ref_optimizer.zero_grad()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p.full_tensor(), q, atol=1e-5), name
        assert optimizer.state[p]["exp_avg"].shape == p.to_local().shape, name

    tp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    parallelize_module(tp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    kinds = {name: tuple(p.placements) for name, p in tp.named_parameters()}
    assert kinds["0.weight"] == (Shard(0),) and kinds["2.weight"] == (Shard(1),), kinds
    # a collective given a DTensor (a gradient averaged over a data-parallel group) works on its local piece
    tp(x).sum().backward()
    grad = tp[0].weight.grad
    expected = grad.to_local().clone()
    dist.all_reduce(expected, op=dist.ReduceOp.SUM)  # the plain tensor's result
    dist.all_reduce(grad, op=dist.ReduceOp.SUM)
    assert torch.allclose(tp[0].weight.grad.to_local(), expected)  # written into the parameter's gradient


def implicit_replication_local_map_and_concat():
    dist, mesh = _setup()
    from trainrun.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from trainrun.distributed.tensor.experimental import implicit_replication, local_map
    torch.manual_seed(0)
    whole, bias = torch.randn(4, 6), torch.randn(6)
    d = distribute_tensor(whole, mesh, [Shard(0)])
    with pytest.raises(TypeError, match="mixes a DTensor"):
        d + bias
    with implicit_replication():
        summed = d + bias
        product = d @ torch.ones(6, 2)
    assert torch.allclose(summed.full_tensor(), whole + bias)
    assert torch.allclose(product.full_tensor(), whole @ torch.ones(6, 2), atol=1e-5)

    row_sums = local_map(lambda t: t.sum(1), out_placements=[Shard(0)], in_placements=([Shard(0)],))
    out = row_sums(d)
    assert isinstance(out, DTensor) and torch.allclose(out.full_tensor(), whole.sum(1), atol=1e-5)
    partial_sums = local_map(lambda t: t.sum(0), out_placements=[Partial()])
    assert torch.allclose(partial_sums(d).full_tensor(), whole.sum(0), atol=1e-5)
    with pytest.raises(ValueError, match="in_placements"):
        local_map(lambda t: t, [Replicate()], in_placements=([Replicate()],))(d)
    moved = local_map(lambda t: t * 2, [Replicate()], in_placements=([Replicate()],), redistribute_inputs=True)(d)
    assert torch.allclose(moved.full_tensor(), whole * 2)

    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)],), in_grad_placements=None, device_mesh=mesh)
    def halve(t):  # (the decorator form)
        return t / 2
    assert torch.allclose(halve(d).full_tensor(), whole / 2)

    other = torch.randn(4, 6)
    e = distribute_tensor(other, mesh, [Shard(0)])
    along_cols = torch.cat([d, e], dim=1)
    assert along_cols.placements == (Shard(0),)  # sharded along another dim than the one joined: no communication
    assert torch.equal(along_cols.full_tensor(), torch.cat([whole, other], 1))
    along_rows = torch.cat([d, e], dim=0)
    assert torch.equal(along_rows.full_tensor(), torch.cat([whole, other], 0))
    stacked = torch.stack([d, e], dim=0)
    assert stacked.placements == (Shard(1),) and torch.equal(stacked.full_tensor(), torch.stack([whole, other]))
    assert torch.equal(d.unsqueeze(0).full_tensor(), whole.unsqueeze(0))
    flat = d.flatten()  # the sharded rows lead the merged dim: each rank's piece stays one block of it
    assert flat.placements == (Shard(0),) and torch.equal(flat.full_tensor(), whole.flatten())
    split = flat.view(2, 12)
    assert split.placements == (Shard(0),) and torch.equal(split.full_tensor(), whole.reshape(2, 12))


def functional_collectives_leave_their_input():
    dist, mesh = _setup()
    import trainrun.distributed._functional_collectives as funcol
    rank, n = dist.get_rank(), dist.get_world_size()
    x = torch.arange(12.).reshape(2, 6) + 100 * rank
    kept = x.clone()
    everyone = [torch.arange(12.).reshape(2, 6) + 100 * r for r in range(n)]
    assert torch.equal(funcol.all_reduce(x, "sum", mesh), sum(everyone))
    assert torch.equal(funcol.all_reduce(x, "max", (mesh, 0)), everyone[-1])
    assert torch.equal(funcol.all_gather_tensor(x, 0, mesh), torch.cat(everyone, 0))
    assert torch.equal(funcol.all_gather_tensor(x, 1, mesh), torch.cat(everyone, 1))
    total = sum(everyone)
    assert torch.equal(funcol.reduce_scatter_tensor(x, "sum", 1, mesh), total.chunk(n, 1)[rank])
    assert torch.equal(funcol.reduce_scatter_tensor(x, "sum", 0, mesh), total.chunk(n, 0)[rank])
    assert torch.equal(funcol.wait_tensor(funcol.broadcast(x, 1, mesh)), everyone[1])
    rows = torch.arange(4.) + 10 * rank
    swapped = funcol.all_to_all_single(rows, None, None, mesh)
    assert torch.equal(swapped, torch.cat([(torch.arange(4.) + 10 * r).chunk(n)[rank] for r in range(n)]))
    assert torch.equal(x, kept)
    with pytest.raises(ValueError, match="unknown reduce op"):
        funcol.all_reduce(x, "median", mesh)
    with pytest.raises(ValueError, match="not divisible"):
        funcol.reduce_scatter_tensor(torch.ones(3, 3), "sum", 0, mesh)
    from trainrun.distributed.distributed_c10d import ReduceOp, _get_default_group  # noqa: F401
    dist.all_reduce(torch.ones(1), group=_get_default_group())


def in_place_updates_of_dtensors():
    dist, mesh = _setup()
    from trainrun.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
    torch.manual_seed(0)
    whole, other = torch.randn(4, 6), torch.randn(4, 6)
    d = distribute_tensor(whole, mesh, [Shard(0)])
    with torch.no_grad():
        d.add_(1.0).mul_(2.0)
        d.add_(distribute_tensor(other, mesh, [Replicate()]), alpha=0.5)  # redistributed to d's placements
        d.sub_(other)  # a whole plain tensor: each rank takes its piece
    assert torch.allclose(d.full_tensor(), (whole + 1) * 2 + 0.5 * other - other, atol=1e-6)
    d.copy_(other)
    assert torch.equal(d.full_tensor(), other)
    d.clamp_(min=0.0)
    assert torch.equal(d.full_tensor(), other.clamp(min=0.0))
    partial = distribute_tensor(whole, mesh, [Replicate()]).redistribute(mesh, [Replicate()])
    summands = partial.to_local() / dist.get_world_size()
    from trainrun.distributed.tensor import DTensor
    p = DTensor.from_local(summands.clone(), mesh, [Partial()])
    p.mul_(3.0)
    assert torch.allclose(p.full_tensor(), whole * 3, atol=1e-5)
    with pytest.raises(ValueError, match="not linear"):
        p.add_(1.0)
    with pytest.raises(ValueError, match="not linear"):
        p.exp_()
    with pytest.raises(ValueError, match="whole tensor's shape"):
        d.add_(torch.ones(2, 6))


@pytest.mark.parametrize("function", [dtensor_parameters_register_and_train, sharded_models_show_dtensor_parameters,
                                      implicit_replication_local_map_and_concat,
                                      functional_collectives_leave_their_input, in_place_updates_of_dtensors])
def test_on_two_ranks(ranks, function):
    ranks.run_function(2, function)


def test_register_parameter_none_then_assign():
    class Layer(nn.Module):
        def __init__(self, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(3))
            if bias:
                self.bias = nn.Parameter(torch.zeros(3))
            else:
                self.register_parameter("bias", None)

        def forward(self, x):
            return x * self.weight + (self.bias if self.bias is not None else 0)

    layer = Layer(False)
    assert layer.bias is None and list(dict(layer.named_parameters())) == ["weight"]
    assert list(layer.state_dict()) == ["weight"]
    layer.bias = nn.Parameter(torch.full([3], 2.0))
    assert list(dict(layer.named_parameters())) == ["weight", "bias"]
    assert torch.equal(layer(torch.ones(3)), torch.full([3], 3.0))
    with pytest.raises(TypeError, match="parameter 'w'"):
        layer.register_parameter("w", 3)
    p = nn.Parameter()
    assert p.shape == (0,) and p.requires_grad


def test_plain_calls_keep_every_form_once_dtensor_is_imported():
    """Importing the DTensor layer wraps trainrun functions (cat, stack, where, max, ...); on plain tensors they
    take every argument form they took before."""
    import trainrun.distributed.tensor  # noqa: F401
    x = torch.arange(6.0).reshape(2, 3)
    assert tuple(torch.cat((x, x), axis=1).shape) == (2, 6)
    assert tuple(torch.concat([x, x], dim=0).shape) == (4, 3)
    assert tuple(torch.stack([x, x], 1).shape) == (2, 2, 3)
    assert torch.equal(torch.where(x > 2, x, torch.zeros_like(x)), torch.tensor([[0.0, 0, 0], [3, 4, 5]]))
    assert torch.max(x, dim=1).indices.tolist() == [2, 2] and float(torch.max(x)) == 5.0
    assert torch.argmax(x).item() == 5 and abs(float(torch.norm(x)) - float((x * x).sum().sqrt())) < 1e-5
    assert tuple(torch.ones_like(x, dtype=torch.float64).shape) == (2, 3)
