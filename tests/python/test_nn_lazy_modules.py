"""The lazy modules: channels from the first input (batched or not) or from a state dict loaded before it, the
real module's parameters, keys, attributes and repr afterwards, UninitializedParameter before; against PyTorch
1.13's shapes and keys."""
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
from trainrun import nn  # noqa: E402

CASES = [("LazyConv1d", (4, 3), (2, 3, 9)), ("LazyConv2d", (4, 3), (2, 3, 7, 7)),
         ("LazyConv3d", (4, 2), (2, 3, 4, 4, 4)),
         ("LazyConvTranspose1d", (4, 3), (2, 3, 5)), ("LazyConvTranspose2d", (4, 3, 2), (2, 3, 4, 4)),
         ("LazyConvTranspose3d", (4, 2), (2, 3, 3, 3, 3)), ("LazyBatchNorm1d", (), (5, 3)),
         ("LazyBatchNorm2d", (), (2, 3, 4, 4)), ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2)),
         ("LazyInstanceNorm2d", (), (2, 3, 4, 4)), ("LazyLinear", (4,), (2, 5, 3))]


@needs_torch
@pytest.mark.parametrize("name,args,shape", CASES, ids=[c[0] for c in CASES])
def test_lazy_modules_materialize_as_pytorchs(name, args, shape):
    kwargs = {"affine": True} if "InstanceNorm" in name else {}
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(peer.nn, name)(*args, **kwargs)
    assert ours.has_uninitialized_params()
    if "weight" in dict(theirs.named_parameters()) or name.endswith(("1d", "2d", "3d", "Linear")):
        assert isinstance(ours.weight, nn.parameter.UninitializedParameter)
    out, expected = ours(torch.randn(*shape)), theirs(peer.randn(*shape))
    assert tuple(out.shape) == tuple(expected.shape) and not ours.has_uninitialized_params()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert type(theirs).__name__ in repr(ours)


def test_unbatched_input_state_dict_before_the_first_call_and_training():
    conv = nn.LazyConv2d(6, 3)
    assert conv(torch.randn(4, 8, 8)).shape == (6, 6, 6) and conv.in_channels == 4
    torch.manual_seed(0)
    trained = nn.Sequential(nn.LazyConv2d(8, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(4))
    x = torch.randn(2, 3, 6, 6)
    trained(x)
    restored = nn.Sequential(nn.LazyConv2d(8, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(4))
    result = restored.load_state_dict(trained.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    trained.eval(), restored.eval()
    assert torch.equal(trained(x), restored(x))
    optimizer = torch.optim.SGD(restored.parameters(), lr=0.1)
    before = restored[4].weight.detach().clone()
    restored.train()
    restored(x).sum().backward()
    optimizer.step()
    assert not torch.equal(before, restored[4].weight)
    assert "LazyLinear(uninitialized)" in repr(nn.LazyLinear(3))
    from trainrun.nn.modules.lazy import LazyModuleMixin
    assert isinstance(nn.LazyConv1d(2, 1), LazyModuleMixin)


@needs_torch
def test_instance_norm_tracks_running_statistics_as_pytorchs():
    import numpy as np
    x = np.random.default_rng(0).standard_normal((4, 3, 5, 5)).astype(np.float32)
    ours = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    theirs = peer.nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    for _ in range(3):
        a, b = ours(torch.tensor(x)), theirs(peer.tensor(x))
    assert np.allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-5)
    assert np.allclose(ours.running_var.numpy(), theirs.running_var.numpy(), atol=1e-6)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 0  # (instance norms never count)
    ours.eval(), theirs.eval()
    assert np.allclose(ours(torch.tensor(x)).detach().numpy(), theirs(peer.tensor(x)).detach().numpy(), atol=1e-5)
