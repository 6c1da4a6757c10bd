"""A DTensor is a torch.Tensor to the code that asks, as PyTorch's (a Tensor subclass there): isinstance and
issubclass say so, pytree's tree_map_only(torch.Tensor, ...) visits DTensors, == and != are elementwise (hashing
stays identity, so DTensors remain dict keys) and testing.assert_close compares two DTensors' global values.
trainrun's own code still tells the core's tensors from DTensors (_C._is_cpp_tensor): an optimizer, a C++ layer
and clip_grad_norm_ given DTensors take their DTensor paths, and clip_grad_norm_ of a parameter sharded by hand
is the whole gradient's norm. On 2 ranks through the launcher; the single-process checks need no group."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun import _C  # noqa: E402


def test_functions_dtensor_wraps_still_pickle_by_name():
    import pickle

    import trainrun.distributed.tensor  # noqa: F401  (wraps trainrun.cat, F.gelu, ... for DTensor arguments)
    import trainrun.nn.functional as F
    layer = nn.TransformerEncoderLayer(16, 2, 32, activation=F.gelu, batch_first=True)
    assert pickle.loads(pickle.dumps(layer)).activation is F.gelu
    for fn in (torch.cat, torch.add, F.relu):
        assert pickle.loads(pickle.dumps(fn)) is fn


def test_isinstance_of_tensor_and_its_subclasses_in_one_process():
    from trainrun.distributed.tensor import DTensor
    t = torch.ones(2)
    assert isinstance(t, torch.Tensor) and _C._is_cpp_tensor(t)
    assert isinstance(nn.Parameter(t), torch.Tensor) and issubclass(nn.Parameter, torch.Tensor)
    assert issubclass(DTensor, torch.Tensor) and not issubclass(DTensor, nn.Parameter)
    assert not isinstance(t, DTensor)
    for other in (3, 2.0, [t], None, "x", torch.float32):
        assert not isinstance(other, torch.Tensor) and not _C._is_cpp_tensor(other)
    assert not issubclass(int, torch.Tensor) and not issubclass(list, torch.Tensor)
    assert isinstance(t, (int, torch.Tensor))  # tuples go through the same check

    class Plain:  # a class that does not declare itself tensor-like is not a Tensor, whatever it holds
        _local_tensor = t
    assert not isinstance(Plain(), torch.Tensor) and not issubclass(Plain, torch.Tensor)

    class NotQuite:  # the class attribute must be True itself
        _is_tensor_like = 1
    assert not isinstance(NotQuite(), torch.Tensor)


def dtensor_is_a_tensor():
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
    from trainrun.utils._pytree import tree_map_only
    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    whole = torch.randn(4, 3)
    x = distribute_tensor(whole, mesh, [Shard(0)])
    assert isinstance(x, torch.Tensor) and torch.is_tensor(x) and not _C._is_cpp_tensor(x)
    assert isinstance(x, DTensor) and not isinstance(x, nn.Parameter)
    assert isinstance(nn.Parameter(x), torch.Tensor) and isinstance(nn.Parameter(x), nn.Parameter)

    # == and != elementwise, as a tensor's; identity still finds a DTensor in dicts, sets and lists.
    same, differ = x == x, x != x * 2
    assert isinstance(same, DTensor) and same.dtype == torch.bool and same.placements == (Shard(0),)
    assert same.full_tensor().all().item() and torch.equal(differ.full_tensor(), whole != whole * 2)
    assert torch.equal((x == 0.0).full_tensor(), whole == 0.0)
    table = {x: "x"}
    assert table[x] == "x" and x in {x} and x in [x] and hash(x) == object.__hash__(x)

    # testing.assert_close compares DTensors' global values, whatever their placements (== is elementwise now).
    torch.testing.assert_close(x, distribute_tensor(whole, mesh, [Replicate()]))
    with pytest.raises(AssertionError, match="not close"):
        torch.testing.assert_close(x, x * 2)
    with pytest.raises(AssertionError, match="type"):
        torch.testing.assert_close(x, whole)

    # pytree over "every tensor": DTensors included, plain tensors too, others left.
    doubled = tree_map_only(torch.Tensor, lambda t: t * 2, {"w": x, "b": whole, "n": 3})
    assert isinstance(doubled["w"], DTensor) and torch.allclose(doubled["w"].full_tensor(), whole * 2)
    assert torch.allclose(doubled["b"], whole * 2) and doubled["n"] == 3

    # trainrun's own code still takes the DTensor paths: a C++ layer, an optimizer, clip_grad_norm_.
    layer = nn.Linear(3, 2)
    replicated = distribute_tensor(whole, mesh, [Replicate()])
    with pytest.raises(TypeError, match="linear mixes a DTensor with a Parameter weight"):
        layer(replicated)  # (a layer never distributed: PyTorch refuses the mix too)
    distribute_module(layer, mesh)  # its parameters replicated
    out = layer(replicated)
    assert isinstance(out, DTensor) and torch.allclose(out.full_tensor(), whole @ layer.weight.full_tensor().t()
                                                       + layer.bias.full_tensor(), atol=1e-6)
    p = nn.Parameter(distribute_tensor(whole.clone(), mesh, [Shard(0)]))
    opt = torch.optim.SGD([p], lr=0.5)
    (p * p).sum().backward()
    # A parameter sharded by hand (no fully_shard): its norm is the whole gradient's, not this rank's piece's.
    norm = nn.utils.clip_grad_norm_([p], max_norm=1e9)
    assert abs(norm.full_tensor().item() - (2 * whole).norm().item()) < 1e-4, (norm, (2 * whole).norm())
    largest = nn.utils.clip_grad_norm_([p], max_norm=1e9, norm_type="inf")
    assert abs(largest.full_tensor().item() - (2 * whole).abs().max().item()) < 1e-6
    opt.step()
    assert torch.allclose(p.full_tensor(), whole - 0.5 * 2 * whole, atol=1e-6)
    dist.destroy_process_group()


def test_dtensor_is_a_tensor_on_two_ranks(ranks):
    ranks.run_function(2, dtensor_is_a_tensor)
