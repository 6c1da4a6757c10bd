"""torch.nn.utils.prune (against PyTorch's: names, masks, pruning again among the kept entries, global pruning,
remove, structured pruning of a C++ layer's channels, training keeps pruned entries at zero), fusion of a
convolution or linear layer with the BatchNorm after it, get_total_norm/clip_grads_with_norm_, skip_init."""
import importlib

import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun.nn.utils import prune  # noqa: E402

W = np.array([[0.5, -1.0, 2.0, 0.1], [1.5, 0.3, -0.7, -2.5], [0.05, 0.9, -1.2, 0.4]], dtype=np.float32)


def _linear(t):
    layer = t.nn.Linear(4, 3)
    with t.no_grad():
        layer.weight.copy_(t.tensor(W))
        layer.bias.copy_(t.tensor([0.1, 0.2, 0.3]))
    return layer


def _np(t):
    return t.detach().numpy()


def _prune_of(t):
    return importlib.import_module(t.__name__ + ".nn.utils.prune")  # (PyTorch's needs the import)


@needs_torch
def test_l1_unstructured_twice_and_remove_match_pytorch():
    results = []
    for t in (torch, peer):
        layer = _linear(t)
        _prune_of(t).l1_unstructured(layer, "weight", amount=0.25)  # 3 of 12
        names = ([n for n, _ in layer.named_parameters()], [n for n, _ in layer.named_buffers()])
        first = _np(layer.weight_mask)
        _prune_of(t).l1_unstructured(layer, "weight", amount=2)  # 2 more, among the 9 kept
        second = _np(layer.weight_mask)
        out = _np(layer(t.ones(1, 4)))
        pruned = _prune_of(t).is_pruned(layer)
        _prune_of(t).remove(layer, "weight")
        after = ([n for n, _ in layer.named_parameters()], _np(layer.weight), _prune_of(t).is_pruned(layer))
        results.append((names, first, second, out, pruned, after))
    ours, theirs = results
    assert ours[0] == theirs[0] == (["bias", "weight_orig"], ["weight_mask"])
    assert np.array_equal(ours[1], theirs[1]) and np.array_equal(ours[2], theirs[2])  # (the masks)
    assert np.allclose(ours[3], theirs[3], atol=1e-6)
    assert ours[4] and theirs[4]
    assert ours[5][0] == theirs[5][0] == ["bias", "weight"] and np.allclose(ours[5][1], theirs[5][1])
    assert not ours[5][2] and not theirs[5][2]


@needs_torch
def test_ln_structured_and_global_unstructured_match_pytorch():
    results = []
    for t in (torch, peer):
        conv = t.nn.Conv2d(2, 4, 3)
        with t.no_grad():
            conv.weight.copy_(t.tensor(np.arange(72, dtype=np.float32).reshape(4, 2, 3, 3) % 7 - 3))
        _prune_of(t).ln_structured(conv, "weight", amount=0.5, n=2, dim=0)
        a, b = _linear(t), _linear(t)
        with t.no_grad():
            b.weight.mul_(0.5)
        _prune_of(t).global_unstructured([(a, "weight"), (b, "weight")],
                                             pruning_method=_prune_of(t).L1Unstructured, amount=6)
        results.append((_np(conv.weight_mask), _np(a.weight_mask), _np(b.weight_mask)))
    for x, y in zip(*results):
        assert np.array_equal(x, y)


def test_pruned_entries_stay_zero_through_training_and_errors():
    layer = nn.Linear(4, 3)
    prune.random_unstructured(layer, "weight", amount=0.5)
    assert int(layer.weight_mask.sum().item()) == 6
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(3):
        layer(torch.randn(2, 4)).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
    assert torch.equal(layer.weight == 0, layer.weight_mask == 0)
    assert "weight_orig" in layer.state_dict() and "weight_mask" in layer.state_dict()
    prune.custom_from_mask(layer, "bias", torch.tensor([1.0, 0.0, 1.0]))
    assert layer.bias[1].item() == 0.0
    with pytest.raises(ValueError, match="amount=1.5 should either be a float in the range"):
        prune.l1_unstructured(nn.Linear(2, 2), "weight", amount=1.5)
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(nn.Linear(2, 2), "weight")


@needs_torch
def test_conv_and_linear_fused_with_batch_norm_compute_the_same():
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)
    bn.train()
    bn(conv(torch.randn(4, 2, 5, 5)))  # (running statistics that are not the defaults)
    conv.eval()
    bn.eval()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    x = torch.randn(2, 2, 5, 5)
    assert torch.allclose(fused(x), bn(conv(x)), atol=1e-5)
    linear, bn1 = nn.Linear(4, 3).eval(), nn.BatchNorm1d(3)
    with torch.no_grad():
        bn1.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3]))
        bn1.running_var.copy_(torch.tensor([1.5, 0.5, 2.0]))
    bn1.eval()
    x = torch.randn(5, 4)
    assert torch.allclose(nn.utils.fuse_linear_bn_eval(linear, bn1)(x), bn1(linear(x)), atol=1e-5)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1))


def test_total_norm_clip_with_norm_and_skip_init():
    layer = nn.Linear(3, 2)
    layer(torch.ones(1, 3)).sum().backward()
    grads = [p.grad.clone() for p in layer.parameters()]
    total = nn.utils.get_total_norm([p.grad for p in layer.parameters()])
    expected = torch.cat([g.reshape(-1) for g in grads]).norm()
    assert torch.allclose(total, expected)
    nn.utils.clip_grads_with_norm_(layer.parameters(), 0.5, total)
    clipped = torch.cat([p.grad.reshape(-1) for p in layer.parameters()]).norm()
    assert abs(clipped.item() - 0.5) < 1e-4
    assert nn.utils.get_total_norm([torch.tensor([3.0, -4.0])], norm_type=float("inf")).item() == 4.0
    skipped = nn.utils.skip_init(nn.Linear, 5, 2)
    assert skipped.weight.shape == (2, 5) and skipped.weight.device.type == "cpu"
    assert nn.utils.stateless.functional_call(nn.Linear(2, 2), {"weight": torch.eye(2), "bias": torch.zeros(2)},
                                              (torch.ones(1, 2),)).tolist() == [[1.0, 1.0]]
