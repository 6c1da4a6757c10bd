"""PyTorch distributed APIs scripts call, on 2 ranks through the launcher: DDP's constructor as PyTorch's
(device_ids, device_mesh, static_graph, allreduce_hook); DTensor max/min/argmax/norm, indexing, where,
comparisons and *_like factories against the whole tensor; FSDP's set_requires_all_reduce on an HSDP mesh;
pipeline() split by pipe_split() markers trains as one process; DCP's DefaultLoadPlanner(allow_partial_load)
and the refusal of other planners; pipeline schedules without a loss_fn run forwards only;
DeviceMesh.from_group; distribute_module over C++ layers given DTensors; DDP with a Python communication hook
(GradBucket, Work.get_future().then()) and Join over uneven inputs equal single-process training."""
import datetime

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _setup():
    from trainrun import distributed as dist
    dist.init_process_group("gloo")
    return dist


def ddp_takes_pytorch_arguments():
    dist = _setup()
    from trainrun.distributed.algorithms.ddp_comm_hooks import default_hooks
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (2,))
    model = DDP(nn.Linear(3, 2), device_ids=None, output_device=None, static_graph=True, device_mesh=mesh,
                bucket_cap_mb=None, gradient_as_bucket_view=True)
    model.register_comm_hook(state=None, hook=default_hooks.allreduce_hook)
    x = torch.full([1, 3], float(dist.get_rank() + 1))
    model(x).sum().backward()
    assert torch.allclose(model.module.weight.grad, torch.full([2, 3], 1.5))  # the mean of 1 and 2
    with pytest.raises(ValueError, match="names several devices"):
        DDP(nn.Linear(3, 2), device_ids=[0, 1])
    with pytest.raises(RuntimeError, match="both process_group and device_mesh"):
        DDP(nn.Linear(3, 2), process_group=dist.new_group([0, 1]), device_mesh=mesh)
    dist.barrier(device_ids=[dist.get_node_local_rank()])  # (the NCCL-era call, accepted)
    assert dist.is_torchelastic_launched() and dist.get_node_local_rank() == dist.get_rank()


def dtensor_reductions_indexing_and_where():
    dist = _setup()
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    whole = torch.randn(4, 6)
    for placement in (Shard(0), Shard(1), Replicate()):
        d = distribute_tensor(whole, mesh, [placement])
        assert float(d.max().full_tensor()) == float(whole.max())
        for dim in (0, 1):
            got, want = d.max(dim=dim), whole.max(dim=dim)
            assert torch.equal(got.values.full_tensor(), want.values), (placement, dim)
            assert torch.equal(got.indices.full_tensor(), want.indices), (placement, dim)
            assert torch.equal(d.argmin(dim, keepdim=True).full_tensor(), whole.argmin(dim, keepdim=True))
        assert int(d.argmax().full_tensor()) == int(whole.argmax())
        assert abs(float(d.norm().full_tensor()) - float(whole.norm())) < 1e-5
        assert torch.allclose(d.norm(p=1, dim=1).full_tensor(), whole.norm(p=1, dim=1), atol=1e-5)
        assert torch.equal(d[1].full_tensor(), whole[1]) and torch.equal(d[:, 2:4].full_tensor(), whole[:, 2:4])
        positive = d > 0
        assert torch.equal(positive.full_tensor(), whole > 0)
        assert torch.equal(torch.where(positive, d, 0.0).full_tensor(), torch.where(whole > 0, whole, 0.0))
        zeros = torch.zeros_like(d)
        assert isinstance(zeros, DTensor) and zeros.placements == d.placements
        assert torch.equal(zeros.full_tensor(), torch.zeros(4, 6))
    grad_input = distribute_tensor(whole.clone().requires_grad_(), mesh, [Shard(0)])
    grad_input.max(dim=1).values.sum().backward()  # the gradient reaches each row's maximum only
    expected = torch.zeros(4, 6).scatter_(1, whole.argmax(1, keepdim=True), 1.0)
    assert torch.equal(grad_input.grad.full_tensor(), expected)


def hsdp_all_reduce_can_wait():
    dist = _setup()
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (2, 1), mesh_dim_names=("replicate", "shard"))  # two replicas of one shard
    torch.manual_seed(0)
    model = nn.Linear(2, 1, bias=False)
    fully_shard(model, mesh=mesh)
    x = torch.full([1, 2], float(dist.get_rank() + 1))
    model.set_requires_all_reduce(False)
    model(x).sum().backward()
    assert torch.equal(model.weight.grad.to_local(), x)  # this replica's own gradient
    model.weight.grad = None  # (PyTorch's idiom on a DTensor parameter)
    assert model.weight.grad is None
    model.set_requires_all_reduce(True)
    model(x).sum().backward()
    assert torch.equal(model.weight.grad.to_local(), torch.full([1, 2], 1.5))  # averaged over the replicas


class _Marked(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second, self.third = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        from trainrun.distributed.pipelining import pipe_split
        x = torch.relu(self.first(x))
        pipe_split()
        x = torch.relu(self.second(x))
        return self.third(x)


def pipe_split_marks_the_stages():
    dist = _setup()
    from trainrun.distributed.pipelining import ScheduleGPipe, pipeline
    torch.manual_seed(0)
    model, reference = _Marked(), _Marked()
    reference.load_state_dict(model.state_dict())
    x, y = torch.randn(4, 4), torch.randn(4, 2)
    pipe = pipeline(model, mb_args=(x[:2],))
    assert pipe.num_stages == 2
    stage = pipe.build_stage(dist.get_rank(), torch.device("cpu"))
    names = {n for n, _ in stage.submod.named_parameters()}
    assert names == ({"first.weight", "first.bias"} if dist.get_rank() == 0 else
                     {"second.weight", "second.bias", "third.weight", "third.bias"}), names
    loss = lambda out, target: ((out - target) ** 2).mean()  # noqa: E731
    schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss)
    if dist.get_rank() == 0:
        schedule.step(x)
    else:
        losses = ["from an earlier step"]
        schedule.step(target=y, losses=losses)
        assert len(losses) == 2 and all(isinstance(v, torch.Tensor) for v in losses)  # (cleared first)
    # scale_grads=True (the default): the gradient of the microbatches' mean loss
    ((loss(reference(x[:2]), y[:2]) + loss(reference(x[2:]), y[2:])) / 2).backward()
    for name, p in stage.submod.named_parameters():
        want = dict(reference.named_parameters())[name].grad
        assert torch.allclose(p.grad, want, atol=1e-5), name


def dcp_partial_load(folder):
    dist = _setup()
    import trainrun.distributed.checkpoint as dcp
    from trainrun.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
    saved = {"model": {"w": torch.ones(2)}, "step": 3}
    dcp.save(saved, checkpoint_id=folder, planner=DefaultSavePlanner())
    state = {"model": {"w": torch.zeros(2), "new": torch.full([2], 7.0)}, "step": 0}
    with pytest.raises(KeyError, match="new"):
        dcp.load(state, checkpoint_id=folder)
    dcp.load(state, checkpoint_id=folder, planner=DefaultLoadPlanner(allow_partial_load=True))
    assert torch.equal(state["model"]["w"], torch.ones(2)) and state["step"] == 3
    assert torch.equal(state["model"]["new"], torch.full([2], 7.0))  # not in the checkpoint: left as it was

    class Custom(DefaultLoadPlanner):
        pass
    with pytest.raises(NotImplementedError, match="planner Custom is not supported"):
        dcp.load(state, checkpoint_id=folder, planner=Custom())
    dist.barrier()


def mesh_from_group_and_distribute_module():
    dist = _setup()
    from trainrun.distributed.device_mesh import DeviceMesh
    from trainrun.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
    group = dist.new_group([1, 0])  # (group rank 0 is global rank 1)
    mesh = DeviceMesh.from_group(group, "cpu", mesh_dim_names=("dp",))
    assert mesh.mesh.tolist() == [1, 0] and mesh.get_group("dp") is group and mesh.mesh_dim_names == ("dp",)
    assert mesh.get_local_rank() == 1 - dist.get_rank()
    with pytest.raises(ValueError, match="need mesh= to lay them out"):
        DeviceMesh.from_group([group, group], "cpu")
    with pytest.raises(ValueError, match="group 0 has ranks"):
        DeviceMesh.from_group(group, "cpu", mesh=[0, 1])

    world = dist.group.WORLD  # the default group's ProcessGroup, as PyTorch's
    assert world is dist.group.WORLD and world.size() == 2 and world.rank() == dist.get_rank()
    from trainrun.distributed.distributed_c10d import _get_default_group, _get_default_store
    assert _get_default_group() is world and dist.get_process_group_ranks(world) == [0, 1]
    store = _get_default_store()  # the rendezvous store, shared by the ranks (scripts use it as a key-value store)
    store.set(f"surface/{dist.get_rank()}", str(dist.get_rank()))
    store.wait([f"surface/{1 - dist.get_rank()}"], datetime.timedelta(seconds=30))
    assert store.get(f"surface/{1 - dist.get_rank()}") == str(1 - dist.get_rank()).encode()
    mesh = DeviceMesh.from_group(world, "cpu")
    assert mesh.get_group() is world and mesh.get_group().size() == 2
    # C++ layers (Linear, LayerNorm) with replicated DTensor parameters and a batch-sharded DTensor input: their
    # functional forms run, and the output is batch-sharded, equal to the single-process result.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 2))
    reference = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 2))
    reference.load_state_dict(model.state_dict())

    # (no partition_fn: every parameter becomes a replicated DTensor, as PyTorch's default)
    distribute_module(model, mesh, input_fn=lambda module, inputs, mesh: tuple(
        distribute_tensor(i, mesh, [Shard(0)]) for i in inputs))
    assert all(isinstance(p, DTensor) and p.placements == (Replicate(),) for p in model.parameters())
    x = torch.randn(4, 4)
    out = model(x)
    assert isinstance(out, DTensor) and out.placements == (Shard(0),)
    assert torch.allclose(out.full_tensor(), reference(x), atol=1e-5)
    out.sum().backward()
    reference(x).sum().backward()
    grad = model[0].weight.grad
    assert isinstance(grad, DTensor)
    assert torch.allclose(grad.full_tensor(), reference[0].weight.grad, atol=1e-5)


def schedules_without_a_loss_run_forwards_only():
    dist = _setup()
    from trainrun.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    rank = dist.get_rank()
    torch.manual_seed(0)
    full = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    stage = PipelineStage(full[:2] if rank == 0 else full[2:], rank, 2, torch.device("cpu"))
    x = torch.randn(6, 4)
    for schedule in (ScheduleGPipe(stage, n_microbatches=3), Schedule1F1B(stage, n_microbatches=2)):
        out = schedule.step(x) if rank == 0 else schedule.step()
        if rank == 1:
            assert torch.allclose(out, full(x), atol=1e-6)
        assert all(p.grad is None for p in full.parameters())  # no backward ran
    dist.barrier()


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


def ddp_python_comm_hook_and_futures():
    dist = _setup()
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    rank, world = dist.get_rank(), dist.get_world_size()
    seen = []

    def scaled_allreduce(state, bucket):  # the documented shape of a hook, plus a scale
        seen.append((bucket.index(), bucket.is_last(), len(bucket.parameters())))
        tensor = bucket.buffer().div_(world)
        return dist.all_reduce(tensor, async_op=True).get_future().then(lambda fut: fut.value()[0] * state)
    model, reference = DDP(_mlp()), _mlp()
    model.register_comm_hook(2.0, scaled_allreduce)
    inputs = [torch.randn(3, 4, generator=torch.Generator().manual_seed(k)) for k in range(world)]
    model(inputs[rank]).sum().backward()
    for x in inputs:
        reference(x).sum().backward()  # the sum over ranks = 2 x their mean
    for p, q in zip(model.module.parameters(), reference.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5)
    assert seen == [(0, True, 4)]
    work = dist.all_reduce(torch.ones(2), async_op=True)
    assert work.get_future().wait()[0].tolist() == [2.0, 2.0]
    future = torch.futures.Future()
    chained = future.then(lambda f: f.value() + 1)
    future.set_result(3)
    assert chained.wait() == 4 and future.done()


def ddp_join_trains_on_uneven_inputs():
    dist = _setup()
    from trainrun.distributed.algorithms.join import Join
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    rank, world = dist.get_rank(), dist.get_world_size()
    batches = {r: [torch.randn(2, 4, generator=torch.Generator().manual_seed(10 * r + i)) for i in range(r + 1)]
               for r in range(world)}  # rank r has r + 1 batches
    for use_method in (False, True):  # Join([model]), then PyTorch's shorthand model.join()
        model, reference = DDP(_mlp()), _mlp()
        opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(reference.parameters(), lr=0.1)
        with (model.join() if use_method else Join([model])):
            for x in batches[rank]:
                model(x).sum().backward()
                opt.step()
                opt.zero_grad()
        for step in range(world):  # each step: the ranks that still have a batch, averaged over the whole world
            for r in range(world):
                if step < len(batches[r]):
                    (reference(batches[r][step]).sum() / world).backward()
            ref_opt.step()
            ref_opt.zero_grad()
        for p, q in zip(model.module.parameters(), reference.parameters()):
            assert torch.allclose(p, q, atol=1e-5)


def fully_sharded_parameters_initialize_as_pytorchs():
    """torchtitan's order: build on meta, fully_shard, to_empty, then nn.init on the DTensor parameters, in-place
    updates under no_grad, param.data = another DTensor; the model then runs."""
    dist = _setup()
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.distributed.tensor import DTensor
    with torch.device("meta"):
        model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 10))
    fully_shard(model)
    model.to_empty(device="cpu")
    for name, p in model.named_parameters():
        assert isinstance(p, DTensor) and p.device.type == "cpu", name
        if p.ndim == 2:
            nn.init.trunc_normal_(p, std=0.02, a=-0.04, b=0.04)
            assert p.full_tensor().abs().max().item() <= 0.04
            nn.init.xavier_uniform_(p)
        else:
            nn.init.ones_(p) if name.startswith("2.") else nn.init.zeros_(p)
    with torch.no_grad():
        w = model[1].weight
        w.copy_(torch.zeros_like(w))
        w.add_(torch.ones_like(w))
        replacement = w.data * 3
        w.data = replacement
    assert w.full_tensor().tolist() == [[3.0] * 8] * 8 and isinstance(w, nn.Parameter)
    with pytest.raises(TypeError, match="must be set to a DTensor"):
        w.data = torch.zeros(8, 8)
    assert sum(p.numel() for p in model.parameters()) == 258
    assert model(torch.tensor([[1, 2, 3]])).shape == (1, 3, 10)
    for opt in (torch.optim.RMSprop(model.parameters()), torch.optim.Adam(model.parameters())):
        out = model(torch.tensor([[1, 2, 3]]))
        out.sum().backward(retain_graph=True)
        opt.step()
        weight = model[3].weight  # (a DTensor: the optimizer's state is found by it, in Python and C++ ones)
        assert weight in opt.state and "step" in opt.state[weight], type(opt).__name__
    with pytest.raises(RuntimeError, match="saved for backward has no memory any more"):
        out.sum().backward()  # (the gathered parameters of that forward were freed by the first backward)
    dist.barrier()


def fully_shard_over_activation_checkpointing_trains_as_one_process():
    """torchtitan's recipe: checkpoint_wrapper on each block, then fully_shard on each block and the root; and a
    block that calls torch.utils.checkpoint in its own forward. The recomputation in backward runs with the
    gathered parameters; 3 SGD steps equal one process's training on the whole batch."""
    dist = _setup()
    from trainrun.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.utils.checkpoint import checkpoint
    rank, world = dist.get_rank(), dist.get_world_size()

    class Block(nn.Module):
        def __init__(self, inner_checkpoint):
            super().__init__()
            self.l1, self.l2, self.inner_checkpoint = nn.Linear(6, 12), nn.Linear(12, 6), inner_checkpoint

        def body(self, x):
            return x + self.l2(torch.tanh(self.l1(x)))

        def forward(self, x):
            return checkpoint(self.body, x, use_reentrant=False) if self.inner_checkpoint else self.body(x)

    def build():
        torch.manual_seed(0)
        return nn.Sequential(Block(False), Block(True), Block(False), nn.Linear(6, 1))
    model, reference = build(), build()
    for i in (0, 2):
        model[i] = checkpoint_wrapper(model[i])
    for block in list(model)[:3]:
        fully_shard(block)
    fully_shard(model)
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.05), torch.optim.SGD(reference.parameters(), lr=0.05)
    for step in range(3):
        batch = torch.randn(4 * world, 6, generator=torch.Generator().manual_seed(step))
        model(batch[4 * rank:4 * rank + 4]).pow(2).mean().backward()
        reference(batch).pow(2).mean().backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            assert torch.allclose(p.grad.full_tensor(), q.grad, atol=1e-5), (step, name)
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
    assert list(model.state_dict().keys()) == list(reference.state_dict().keys())
    dist.barrier()


def state_dict_api_names_parameters_without_wrappers():
    """get_state_dict/set_state_dict key a checkpoint-wrapped, fully sharded model and a compiled one by the same
    plain names (PyTorch's FQNs), so one's state loads into the other, optimizer state included."""
    dist = _setup()
    from trainrun.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from trainrun.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict, set_state_dict
    from trainrun.distributed.fsdp import fully_shard

    def build():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
        model[0] = checkpoint_wrapper(model[0])
        fully_shard(model[0])
        fully_shard(model)
        return model
    model = build()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    model_sd, optim_sd = get_state_dict(model, opt)
    names = ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert list(model_sd) == names and list(optim_sd["state"]) == names
    compiled = torch.compile(build())
    compiled_opt = torch.optim.Adam(compiled.parameters())
    set_state_dict(compiled, compiled_opt, model_state_dict=model_sd, optim_state_dict=optim_sd)
    assert list(get_model_state_dict(compiled)) == names
    assert torch.equal(compiled._orig_mod[0].weight.full_tensor(), model[0].weight.full_tensor())
    assert torch.equal(compiled_opt.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    dist.barrier()


@pytest.mark.parametrize("function", [ddp_takes_pytorch_arguments,
                                      dtensor_reductions_indexing_and_where,
                                      hsdp_all_reduce_can_wait, pipe_split_marks_the_stages,
                                      mesh_from_group_and_distribute_module,
                                      schedules_without_a_loss_run_forwards_only, ddp_python_comm_hook_and_futures,
                                      ddp_join_trains_on_uneven_inputs,
                                      fully_sharded_parameters_initialize_as_pytorchs,
                                      fully_shard_over_activation_checkpointing_trains_as_one_process,
                                      state_dict_api_names_parameters_without_wrappers])
def test_on_two_ranks(ranks, function):
    ranks.run_function(2, function)


def test_dcp_partial_load_on_two_ranks(ranks, tmp_path):
    ranks.run_function(2, dcp_partial_load, str(tmp_path / "ckpt"))
