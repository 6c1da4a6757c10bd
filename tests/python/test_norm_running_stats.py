"""Running statistics of the normalization layers as PyTorch keeps them, against PyTorch 1.13: BatchNorm with
momentum=None is the cumulative average of the training batches (each weighed by 1 / num_batches_tracked),
with an exponential momentum the usual update, and an instance norm that tracks running statistics never
counts batches (num_batches_tracked stays 0, as PyTorch's) while its running mean and variance move."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402


def _batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((4, 3, 2, 2)) * (i + 1) + i).astype(np.float32) for i in range(4)]


def _run(torch, make, batches):
    layer = make(torch)
    for x in batches:
        layer(torch.from_numpy(x))
    layer.eval()
    out = layer(torch.from_numpy(batches[0]))
    state = {k: v.detach().numpy().copy() for k, v in layer.state_dict().items()}
    return state, out.detach().numpy()


@needs_torch
@pytest.mark.parametrize("make", [
    lambda t: t.nn.BatchNorm2d(3, momentum=None),
    lambda t: t.nn.BatchNorm2d(3, momentum=0.3),
    lambda t: t.nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.2),
], ids=["batchnorm cumulative", "batchnorm momentum 0.3", "instancenorm tracked"])
def test_running_statistics_equal_pytorch(make):
    batches = _batches()
    ours, ours_out = _run(trainrun, make, batches)
    theirs, theirs_out = _run(peer, make, batches)
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert np.allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-5), (key, ours[key], theirs[key])
    assert np.allclose(ours_out, theirs_out, atol=1e-4)


def test_cumulative_average_is_the_mean_of_the_batch_means():
    layer = trainrun.nn.BatchNorm1d(2, momentum=None)
    assert layer.momentum is None and "momentum=None" in repr(layer)
    means = []
    for i in range(5):
        x = trainrun.randn(16, 2) + i
        means.append(x.mean(0))
        layer(x)
    assert layer.num_batches_tracked.item() == 5
    assert trainrun.allclose(layer.running_mean, trainrun.stack(means).mean(0), atol=1e-6)
    layer.reset_running_stats()
    assert layer.num_batches_tracked.item() == 0 and layer.running_mean.abs().sum().item() == 0


def test_instance_norm_with_momentum_none_keeps_its_running_statistics():
    layer = trainrun.nn.InstanceNorm1d(3, track_running_stats=True, momentum=None)  # (1.13 raises; 2.x: factor 0)
    layer(trainrun.randn(2, 3, 5) + 4)
    assert layer.num_batches_tracked.item() == 0
    assert layer.running_mean.abs().sum().item() == 0 and trainrun.equal(layer.running_var, trainrun.ones(3))


@needs_torch
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_functional_batch_norm_values_gradients_and_statistics_match_pytorch(training, affine):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 3, 5, 5)) * 3 + 1).astype(np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    weighting = np.arange(x.size, dtype=np.float32).reshape(x.shape) / x.size
    results = []
    for torch in (trainrun, peer):
        xx = torch.tensor(x, requires_grad=True)
        ww, bb = (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) if affine else (None, None)
        running_mean, running_var = torch.zeros(3), torch.ones(3)
        y = torch.nn.functional.batch_norm(xx, running_mean, running_var, ww, bb, training=training, momentum=0.2)
        (y * torch.tensor(weighting)).sum().backward()
        results.append([y.detach().numpy(), xx.grad.numpy(), running_mean.numpy(), running_var.numpy()]
                       + ([ww.grad.numpy(), bb.grad.numpy()] if affine else []))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
