"""The import paths older PyTorch 2.x scripts use (torch.distributed._tensor, torch.distributed._composable.fsdp,
torch.distributed.algorithms.Join) name the same objects as the current ones; the composable checkpoint(module)
recomputes the module's forward in backward and gives the gradients of the unchanged module."""
import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def test_old_paths_name_the_current_objects():
    from trainrun.distributed import _tensor, fsdp, tensor
    from trainrun.distributed._composable import fsdp as composable_fsdp
    from trainrun.distributed._tensor.device_mesh import init_device_mesh
    from trainrun.distributed._tensor.placement_types import Shard
    from trainrun.distributed.algorithms import Join, Joinable
    from trainrun.distributed.algorithms.join import Join as join_class
    assert _tensor.DTensor is tensor.DTensor and _tensor.distribute_tensor is tensor.distribute_tensor
    assert Shard is tensor.Shard and init_device_mesh is tensor.init_device_mesh
    assert composable_fsdp.fully_shard is fsdp.fully_shard
    assert composable_fsdp.MixedPrecisionPolicy is fsdp.MixedPrecisionPolicy
    assert Join is join_class and Joinable is not None


class Counted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 8)
        self.calls = 0

    def forward(self, x, scale=1.0):
        self.calls += 1
        return torch.nn.functional.gelu(self.inner(x)) * scale


def test_composable_checkpoint_recomputes_and_keeps_the_module():
    from trainrun.distributed._composable import checkpoint
    torch.manual_seed(0)
    checkpointed, plain = Counted(), Counted()
    plain.load_state_dict(checkpointed.state_dict())
    assert checkpoint(checkpointed) is checkpointed
    assert checkpoint(checkpointed) is checkpointed  # (twice: still one recomputation)
    assert list(checkpointed.state_dict()) == ["inner.weight", "inner.bias"]
    x = torch.randn(3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    (checkpointed(x, scale=2.0) ** 2).sum().backward()
    (plain(x2, scale=2.0) ** 2).sum().backward()
    assert checkpointed.calls == 2 and plain.calls == 1  # (the forward, and its recomputation in backward)
    assert torch.allclose(x.grad, x2.grad)
    for a, b in zip(checkpointed.parameters(), plain.parameters()):
        assert torch.allclose(a.grad, b.grad)


def replicate_trains_as_one_process():
    """On each rank: replicate(module) gives every rank rank 0's weights, keeps the module's class, and three
    SGD steps on the rank's half of a batch give the weights one process gets from the whole batch."""
    import numpy as np
    from trainrun import distributed as dist
    from trainrun.distributed._composable import replicate
    from trainrun.distributed._composable.replicate import replicate as replicate_path
    assert replicate is replicate_path
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    torch.manual_seed(rank + 10)  # different weights on purpose: replicate starts every rank from rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    if rank == 0:
        model.load_state_dict(reference.state_dict())
    assert replicate(model) is model and type(model) is torch.nn.Sequential and replicate.state(model) is not None
    try:
        replicate(model)
        raise AssertionError("replicating twice was accepted")
    except RuntimeError:
        pass
    x = torch.arange(24.0).reshape(8, 3).sin()
    y = torch.arange(16.0).reshape(8, 2).cos()
    mine = slice(rank * 8 // world, (rank + 1) * 8 // world)
    opt, opt_ref = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
        opt.step()
        opt_ref.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        opt_ref.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert np.allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-6), (p, q)
    dist.destroy_process_group()


def test_replicate_trains_as_one_process(ranks):
    ranks.run_function(2, replicate_trains_as_one_process)
