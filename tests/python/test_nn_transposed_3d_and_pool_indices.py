"""conv_transpose3d / ConvTranspose3d (values and gradients), ConvTranspose{1,2,3}d's forward(output_size=...),
the max pools' indices (max_pool1d/3d, adaptive_max_pool1d/2d/3d, PyTorch's *_with_indices names), max_unpool1d
/3d and their modules, and lp_pool3d, against PyTorch 1.13."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402

F = torch.nn.functional


def _close(ours, theirs, atol=1e-5):
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert np.allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=atol), \
        np.abs(ours.detach().numpy() - theirs.detach().numpy()).max()


@needs_torch
@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 1), ((2, 1, 3), (0, 1, 1), (1, 0, 2), 2, 1), (1, 2, 0, 1, 2)])
def test_conv_transpose3d_matches_with_gradients(stride, padding, output_padding, groups, dilation):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 3, 4, 5), (4, 3, 2, 3, 3), (3 * groups,)))
    ours = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [peer.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = F.conv_transpose3d(*ours, stride, padding, output_padding, groups, dilation)
    expected = peer.nn.functional.conv_transpose3d(*theirs, stride, padding, output_padding, groups, dilation)
    _close(out, expected)
    weights = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
    (out * torch.tensor(weights)).sum().backward()
    (expected * peer.tensor(weights)).sum().backward()
    for a, b_ in zip(ours, theirs):
        _close(a.grad, b_.grad, atol=1e-4)


@needs_torch
def test_transposed_modules_take_output_size():
    torch.manual_seed(0)
    for n, make, make_peer in ((1, torch.nn.ConvTranspose1d, peer.nn.ConvTranspose1d),
                               (2, torch.nn.ConvTranspose2d, peer.nn.ConvTranspose2d),
                               (3, torch.nn.ConvTranspose3d, peer.nn.ConvTranspose3d)):
        ours, theirs = make(3, 2, 3, stride=2, padding=1), make_peer(3, 2, 3, stride=2, padding=1)
        with peer.no_grad():
            theirs.weight.copy_(peer.tensor(ours.weight.detach().numpy()))
            theirs.bias.copy_(peer.tensor(ours.bias.detach().numpy()))
        x = np.random.default_rng(n).standard_normal((1, 3) + (4,) * n).astype(np.float32)
        for size in ([7] * n, [8] * n, [1, 2] + [8] * n):
            _close(ours(torch.tensor(x), output_size=size), theirs(peer.tensor(x), output_size=size))
        with pytest.raises(ValueError, match="valid sizes range from 7 to 8"):
            ours(torch.tensor(x), output_size=[9] * n)
    assert list(torch.nn.ConvTranspose3d(2, 4, 3).state_dict()) == ["weight", "bias"]
    assert torch.nn.ConvTranspose3d(2, 4, (1, 2, 3), groups=2).weight.shape == (2, 2, 1, 2, 3)


@needs_torch
def test_pool_indices_match():
    rng = np.random.default_rng(0)
    x3 = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    for args in ((2, 2, 1), ((2, 3, 2), (1, 2, 2), (0, 1, 1), (2, 1, 2))):
        ours = F.max_pool3d(torch.tensor(x3), *args, return_indices=True)
        theirs = peer.nn.functional.max_pool3d(peer.tensor(x3), *args, return_indices=True)
        _close(ours[0], theirs[0])
        assert ours[1].tolist() == theirs[1].tolist()
    x1 = rng.standard_normal((2, 3, 11)).astype(np.float32)
    ours, theirs = F.max_pool1d_with_indices(torch.tensor(x1), 3, 2, 1), \
        peer.nn.functional.max_pool1d_with_indices(peer.tensor(x1), 3, 2, 1)
    _close(ours[0], theirs[0])
    assert ours[1].tolist() == theirs[1].tolist()
    _close(F.max_unpool1d(ours[0], ours[1], 3, 2, 1, output_size=[11]),
           peer.nn.functional.max_unpool1d(theirs[0], theirs[1], 3, 2, 1, output_size=[11]))
    for n, shape, size in ((1, (2, 3, 10), 4), (2, (2, 3, 7, 9), (3, 4)), (3, (2, 3, 5, 6, 7), (2, 3, 4)),
                           (2, (3, 7, 9), (None, 4))):
        x = rng.standard_normal(shape).astype(np.float32)
        name = f"adaptive_max_pool{n}d"
        ours, theirs = getattr(F, name)(torch.tensor(x), size, return_indices=True), \
            getattr(peer.nn.functional, name)(peer.tensor(x), size, return_indices=True)
        _close(ours[0], theirs[0])
        assert ours[1].tolist() == theirs[1].tolist()
    pooled = F.max_pool3d_with_indices(torch.tensor(x3), 2)
    unpool = torch.nn.MaxUnpool3d(2)
    theirs = peer.nn.functional.max_pool3d(peer.tensor(x3), 2, return_indices=True)
    _close(unpool(*pooled, output_size=x3.shape[2:]), peer.nn.MaxUnpool3d(2)(*theirs, output_size=x3.shape[2:]))
    x = torch.tensor(x3, requires_grad=True)
    values, _ = F.max_pool3d(x, 2, return_indices=True)
    values.sum().backward()
    assert x.grad.sum().item() == values.numel()  # (one 1 per window, at its maximum)


def test_lp_pool3d_is_the_power_mean_times_the_window():
    x = torch.rand(2, 3, 4, 4, 4) + 0.1
    expected = (F.avg_pool3d(x.pow(3), 2) * 8).pow(1 / 3)
    assert torch.allclose(F.lp_pool3d(x, 3, 2), expected, atol=1e-5)
    assert torch.allclose(torch.nn.LPPool3d(3, 2)(x), expected, atol=1e-5)


@needs_torch
def test_fractional_max_pool_matches_given_the_samples():
    rng = np.random.default_rng(0)
    x2, s2 = rng.standard_normal((2, 3, 9, 11)).astype(np.float32), rng.random((2, 3, 2)).astype(np.float32)
    for kwargs in ({"kernel_size": 2, "output_size": (5, 6)}, {"kernel_size": (3, 2), "output_ratio": (0.5, 0.7)}):
        ours = F.fractional_max_pool2d(torch.tensor(x2), return_indices=True, _random_samples=torch.tensor(s2),
                                       **kwargs)
        theirs = peer.nn.functional.fractional_max_pool2d(peer.tensor(x2), return_indices=True,
                                                          _random_samples=peer.tensor(s2), **kwargs)
        _close(ours[0], theirs[0])
        assert ours[1].tolist() == theirs[1].tolist()
    x3, s3 = rng.standard_normal((2, 3, 7, 8, 9)).astype(np.float32), rng.random((2, 3, 3)).astype(np.float32)
    ours = F.fractional_max_pool3d(torch.tensor(x3), 2, output_size=(4, 5, 6), return_indices=True,
                                   _random_samples=torch.tensor(s3))
    theirs = peer.nn.functional.fractional_max_pool3d(peer.tensor(x3), 2, output_size=(4, 5, 6),
                                                      return_indices=True, _random_samples=peer.tensor(s3))
    _close(ours[0], theirs[0])
    assert ours[1].tolist() == theirs[1].tolist()
    x = torch.tensor(x2, requires_grad=True)
    pooled = torch.nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5))(x)
    pooled.sum().backward()
    assert pooled.shape == (2, 3, 4, 5) and x.grad.sum().item() == pooled.numel()
    assert list(torch.nn.FractionalMaxPool2d(2, output_size=3).state_dict()) == []
    with pytest.raises(ValueError, match="either an output size, or a pooling ratio"):
        torch.nn.FractionalMaxPool2d(2)
