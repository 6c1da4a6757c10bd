"""More of PyTorch's distributed API, as its own examples and tutorials call it (pytorch/examples, pytorch/tutorials):
init_process_group(device_id=) and a device map of backends ("cpu:gloo,cuda:nccl"), environment values with
spaces, CommDebugMode keyed by torch.ops.c10d_functional and traced per module, DDP's built-in hooks called from
other hooks, new_group's newer arguments, DTensor.backward(inputs=), FSDPModule.set_unshard_in_backward and
PrepareModuleInputOutput; on 2 ranks through the launcher where they communicate."""
import datetime

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


def _setup():
    from trainrun import distributed as dist
    dist.init_process_group("gloo")
    return dist


def init_process_group_binds_device_id():
    """PyTorch's FSDP2 example: init_process_group(backend=None or the device's default, device_id=device)."""
    from trainrun import distributed as dist
    dist.init_process_group(device_id=torch.device("cpu"))  # no backend: the cpu device's, gloo
    assert dist.get_backend() == "gloo" and dist.get_backend_config() == "cpu:gloo"
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full([2], 2.0))
    dist.destroy_process_group()


def test_env_variables_may_carry_spaces_as_pythons_int_reads_them(monkeypatch):
    """PyTorch's own tutorials set MASTER_PORT = "12355 " (PyTorch parses it with int())."""
    import socket
    from trainrun import distributed as dist
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", f"{port} ")
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        assert dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()
    dist.init_process_group("cpu:gloo", init_method=f"tcp://127.0.0.1:{port}?use_libuv=0", rank=0, world_size=1)
    try:  # (PyTorch's init_method option for its TCPStore server: trainrun's one server serves both)
        assert dist.get_backend() == "cpu:gloo"
    finally:
        dist.destroy_process_group()
    with pytest.raises(ValueError, match="Invalid backend: 'cpu:mpi'"):
        dist.init_process_group("cpu:mpi", rank=0, world_size=1)
    monkeypatch.setenv("MASTER_PORT", f"{port}x")
    with pytest.raises(ValueError, match=f"MASTER_PORT '{port}x' \\(from the environment\\) is not an integer"):
        dist.init_process_group("gloo", rank=0, world_size=1)


def test_init_process_group_refuses_a_device_id_it_cannot_bind():
    from trainrun import distributed as dist
    with pytest.raises(ValueError, match="device_id must be a cuda device with an index, e.g. cuda:0"):
        dist.init_process_group("nccl", device_id=torch.device("cuda"))
    with pytest.raises(TypeError, match="device_id must be a torch.device or an int, not list"):
        dist.init_process_group(device_id=[0])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device_id=0 names an accelerator index, but this machine has no CUDA"):
            dist.init_process_group(device_id=0)
    assert not dist.is_initialized()


def one_backend_per_device():
    """backend="cpu:gloo,cuda:nccl" (PyTorch's device map): CPU collectives go to gloo, in the default group and
    in new groups; the backend string is the group's."""
    from trainrun import distributed as dist
    dist.init_process_group(backend="cpu:gloo,cuda:nccl")
    assert dist.get_backend() == "cpu:gloo,cuda:nccl" and dist.get_backend_config() == "cpu:gloo,cuda:nccl"
    t = torch.full([3], float(dist.get_rank() + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full([3], 3.0))
    gathered = [None, None]
    dist.all_gather_object(gathered, {"rank": dist.get_rank()})
    assert gathered == [{"rank": 0}, {"rank": 1}]
    sub = dist.new_group([0, 1])
    dist.broadcast(t, src=1, group=sub)
    dist.barrier(group=sub)
    dist.destroy_process_group()


def comm_debug_mode_counts_by_pytorchs_ops():
    """CommDebugMode's counts are keyed by torch.ops.c10d_functional's ops, which are callable with PyTorch's
    signatures (the group as its ranks)."""
    dist = _setup()
    from trainrun.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh
    from trainrun.distributed.tensor.debug import CommDebugMode
    funcol = torch.ops.c10d_functional
    mesh = init_device_mesh("cpu", (2,))
    x = distribute_tensor(torch.arange(8.0).view(4, 2), mesh, [Shard(0)])
    with CommDebugMode() as comm_mode:
        full = x.redistribute(placements=[Replicate()])
    assert comm_mode.get_comm_counts() == {funcol.all_gather_into_tensor: 1}, comm_mode.get_comm_counts()
    assert comm_mode.get_total_counts() == 1 and torch.equal(full.to_local(), torch.arange(8.0).view(4, 2))
    rank = dist.get_rank()
    summed = funcol.wait_tensor(funcol.all_reduce(torch.full([2], float(rank + 1)), "sum", "", [0, 1], 2))
    assert summed.tolist() == [3.0, 3.0]
    assert funcol.all_gather_into_tensor(torch.full([1], float(rank)), "", [0, 1], 2).tolist() == [0.0, 1.0]
    assert funcol.reduce_scatter_tensor(torch.ones(2), "sum", "", [0, 1], 2).tolist() == [2.0]
    assert funcol.broadcast(torch.full([1], float(rank)), 1, "", [0, 1], 2).tolist() == [1.0]
    assert repr(funcol.all_reduce) == "c10d_functional.all_reduce"
    # Per module, as PyTorch's recipe shows it: tensor parallelism's all-reduce in net2's forward, and the
    # replicated input's gradient summed in net1's backward.
    from trainrun.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    class MLPModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.net1, self.relu, self.net2 = nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8)

        def forward(self, x):
            return self.net2(self.relu(self.net1(x)))
    model = parallelize_module(MLPModule(), mesh, {"net1": ColwiseParallel(), "net2": RowwiseParallel()})
    with CommDebugMode() as comm_mode:
        model(torch.randn(4, 8))
    assert comm_mode.generate_comm_debug_tracing_table(noise_level=0) == (
        "Global\n  FORWARD PASS\n    *c10d_functional.all_reduce: 1\n    MLPModule\n      FORWARD PASS\n"
        "        *c10d_functional.all_reduce: 1\n        MLPModule.net1\n        MLPModule.relu\n"
        "        MLPModule.net2\n          FORWARD PASS\n            *c10d_functional.all_reduce: 1\n")
    with comm_mode:
        model(torch.randn(4, 8, requires_grad=True)).sum().backward()
    assert comm_mode.comm_module_counts["MLPModule.net1"] == {"forward": {}, "backward": {funcol.all_reduce: 1}}
    assert comm_mode.get_sharding_info()["MLPModule.net2"]["weight"] == (Shard(1),)
    assert "*weight: (Shard(dim=0),)" in comm_mode.generate_comm_debug_tracing_table(noise_level=1)
    dist.barrier()


def builtin_comm_hooks_run_from_python_and_groups_take_pytorchs_arguments():
    """allreduce_hook and fp16/bf16_compress_hook called from another hook (a compress wrapper's, a user's)
    return Futures, as PyTorch's, and every variant averages the gradient as DDP does; new_group and
    new_subgroups take group_desc (and new_group device_id)."""
    dist = _setup()
    from trainrun.distributed.algorithms.ddp_comm_hooks import default_hooks
    from trainrun.nn.parallel import DistributedDataParallel as DDP
    rank = dist.get_rank()
    variants = [None, default_hooks.allreduce_hook, default_hooks.fp16_compress_hook,
                default_hooks.fp16_compress_wrapper(default_hooks.allreduce_hook),
                default_hooks.bf16_compress_wrapper(default_hooks.allreduce_hook),
                lambda state, bucket: default_hooks.bf16_compress_hook(state, bucket)]
    for hook in variants:
        torch.manual_seed(0)
        model = DDP(nn.Linear(4, 2))
        if hook is not None:
            model.register_comm_hook(None, hook)
        model(torch.full([3, 4], float(rank + 1))).sum().backward()
        assert torch.allclose(model.module.weight.grad, torch.full([2, 4], 4.5)), hook  # the mean of 3 and 6
    sub = dist.new_group([0, 1], group_desc="both ranks", device_id=torch.device("cpu"))
    mine, _ = dist.new_subgroups(group_size=1, group_desc="each alone")
    alone, _ = dist.new_subgroups_by_enumeration([[0], [1]], group_desc="each alone again")
    for group in (sub, mine, alone):
        t = torch.ones(1)
        dist.all_reduce(t, group=group)
        assert t.item() == dist.get_world_size(group)
    dist.barrier()


def dtensor_backward_takes_inputs():
    """loss.backward(inputs=[...]) from a DTensor loss accumulates only the given DTensors' gradients."""
    _setup()
    from trainrun.distributed.tensor import Shard, distribute_tensor, init_device_mesh
    mesh = init_device_mesh("cpu", (2,))
    a = distribute_tensor(torch.arange(4.0), mesh, [Shard(0)]).requires_grad_()
    b = distribute_tensor(torch.ones(4), mesh, [Shard(0)]).requires_grad_()
    (a * b).sum().backward(inputs=[a])
    assert b.grad is None and a.grad.full_tensor().tolist() == [1.0] * 4


def fully_shard_set_unshard_in_backward():
    """set_unshard_in_backward(False) on an embedding (its backward reads only the indices): one all-gather
    fewer per step, the same gradients."""
    _setup()
    from trainrun.distributed.fsdp import fully_shard
    from trainrun.distributed.tensor.debug import CommDebugMode

    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 3))
    reference, ids = build(), torch.tensor([[1, 2, 3], [4, 5, 6]])
    reference(ids).sum().backward()
    gathers = {}
    for flag in (True, False):
        model = build()
        for module in (model[0], model[1], model):
            fully_shard(module)
        model[0].set_unshard_in_backward(flag)
        for _ in range(2):  # (the second step starts from what the first left)
            for p in model.parameters():
                p.grad = None
            with CommDebugMode() as comm:
                model(ids).sum().backward()
            for mine, theirs in zip(model.parameters(), reference.parameters()):
                assert torch.allclose(mine.grad.full_tensor(), theirs.grad), flag
        gathers[flag] = comm.get_comm_counts()[torch.ops.c10d_functional.all_gather_into_tensor]
    assert gathers[False] == gathers[True] - 1, gathers


def prepare_module_input_output():
    """PrepareModuleInputOutput: a module handed its input replicated (from a row shard) and giving its output
    back as a row shard."""
    dist = _setup()
    from trainrun.distributed.tensor import Replicate, Shard, init_device_mesh
    from trainrun.distributed.tensor.parallel import PrepareModuleInputOutput, parallelize_module
    mesh = init_device_mesh("cpu", (2,))
    seen = []

    class Double(nn.Module):
        def forward(self, x):
            seen.append(tuple(x.shape))
            return x * 2
    module = parallelize_module(Double(), mesh, PrepareModuleInputOutput(
        input_layouts=Shard(0), desired_input_layouts=Replicate(), use_local_input=True,
        output_layouts=Replicate(), desired_output_layouts=Shard(0)))
    rank = dist.get_rank()
    out = module(torch.full([2, 3], float(rank)))  # this rank's rows of a (4, 3) tensor
    assert seen == [(4, 3)] and out.shape == (2, 3) and torch.equal(out, torch.full([2, 3], 2.0 * rank))


@pytest.mark.parametrize("function", [init_process_group_binds_device_id,
                                      one_backend_per_device,
                                      comm_debug_mode_counts_by_pytorchs_ops,
                                      builtin_comm_hooks_run_from_python_and_groups_take_pytorchs_arguments,
                                      dtensor_backward_takes_inputs,
                                      fully_shard_set_unshard_in_backward,
                                      prepare_module_input_output])
def test_on_two_ranks(ranks, function):
    ranks.run_function(2, function)
