"""Adamax, NAdam and RAdam: the same trajectories as PyTorch's for the same
gradients (NAdam against its PyTorch 2.x formula: 1.13 multiplies mu into
the next step's product twice)."""
import math

import numpy as np
import pytest

from built_tree import needs_torch, torch  # trainrun from the source tree; skips when not built

import trainrun  # noqa: E402


def trajectory(lib, name, steps=8, **options):
    w = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    optimizer = getattr(lib.optim, name)([w], **options)
    for i in range(steps):
        optimizer.zero_grad()
        ((w - 0.5 * i) ** 2).sum().backward()
        optimizer.step()
    return np.array(w.tolist())


@needs_torch
@pytest.mark.parametrize("name,options", [("Adamax", {"lr": 0.1, "weight_decay": 0.01}), ("RAdam", {"lr": 0.1}),
                                          ("RAdam", {"lr": 0.1, "betas": (0.9, 0.9), "weight_decay": 0.1})])
def test_matches_pytorch(name, options):
    np.testing.assert_allclose(trajectory(trainrun, name, **options), trajectory(torch, name, **options),
                               rtol=1e-6, atol=1e-6)


def test_nadam_follows_its_formula():
    lr, beta1, beta2, eps, decay = 0.05, 0.9, 0.999, 1e-8, 4e-3
    w, m, v, mu_product = np.array([1.0, -2.0, 3.0]), np.zeros(3), np.zeros(3), 1.0
    for i in range(8):
        step = i + 1
        g = 2 * (w - 0.5 * i)
        mu = beta1 * (1 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((step + 1) * decay))
        mu_product *= mu
        m, v = beta1 * m + (1 - beta1) * g, beta2 * v + (1 - beta2) * g * g
        denom = np.sqrt(v / (1 - beta2 ** step)) + eps
        w = w - lr * (1 - mu) / (1 - mu_product) * g / denom - lr * mu_next / (1 - mu_product * mu_next) * m / denom
    np.testing.assert_allclose(trajectory(trainrun, "NAdam", lr=lr), w, rtol=1e-5)
    assert math.isfinite(w.sum())


def test_state_dict_round_trip_and_refusals():
    w = trainrun.nn.Parameter(trainrun.ones(2))
    optimizer = trainrun.optim.RAdam([w], lr=0.1)
    (w * 2).sum().backward()
    optimizer.step()
    again = trainrun.optim.RAdam([w], lr=0.5)
    again.load_state_dict(optimizer.state_dict())
    assert again.param_groups[0]["lr"] == 0.1 and again.state_dict()["state"][0]["step"].item() == 1
    with pytest.raises(ValueError, match="Adamax: invalid arguments"):
        trainrun.optim.Adamax([w], lr=-1)
    with pytest.raises(ValueError, match="Invalid momentum_decay value"):
        trainrun.optim.NAdam([w], momentum_decay=-1)


@pytest.mark.parametrize("name", ["NAdam", "RAdam"])
def test_decoupled_weight_decay_shrinks_the_weight_as_adamw(name):
    """decoupled_weight_decay=True (NAdamW, RAdamW, PyTorch 2.x): each step first multiplies the weight by
    1 - lr * weight_decay and then takes the undecayed update."""
    lr, wd = 0.05, 0.1
    decoupled = trajectory(trainrun, name, steps=1, lr=lr, weight_decay=wd, decoupled_weight_decay=True)
    plain = trajectory(trainrun, name, steps=1, lr=lr)
    start = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(decoupled, plain - lr * wd * start, rtol=1e-6, atol=1e-7)
    # (not L2 decay through the gradient: after a few steps, with momentum, the two part)
    assert not np.allclose(trajectory(trainrun, name, steps=4, lr=lr, weight_decay=wd, decoupled_weight_decay=True),
                           trajectory(trainrun, name, steps=4, lr=lr, weight_decay=wd))


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax"])
def test_maximize_ascends(name):
    """maximize=True climbs the objective: the step is the one minimizing its negation takes."""
    w = trainrun.tensor([1.0, -2.0], requires_grad=True)
    v = trainrun.tensor([1.0, -2.0], requires_grad=True)
    up = getattr(trainrun.optim, name)([w], lr=0.1, maximize=True)
    down = getattr(trainrun.optim, name)([v], lr=0.1)
    for _ in range(3):
        for opt, value in ((up, -((w - 0.5) ** 2).sum()), (down, ((v - 0.5) ** 2).sum())):
            opt.zero_grad()
            value.backward()
            opt.step()
    np.testing.assert_allclose(np.array(w.tolist()), np.array(v.tolist()), rtol=1e-6)
    assert getattr(trainrun.optim, name)([w], capturable=False).defaults["lr"] > 0  # (PyTorch's flag, accepted)
