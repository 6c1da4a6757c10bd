"""Adadelta, Rprop, ASGD and LBFGS (fixed step and strong-Wolfe line search) against PyTorch 1.13 on the same
problems (the iterates to 1e-4); step(closure) of the C++ optimizers returns the closure's loss; step hooks
(per optimizer and global, removable) run around every optimizer's step."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402

RUNS = [("LBFGS", False, 2, dict(lr=1, max_iter=20)), ("LBFGS", False, 2, dict(lr=0.5, max_iter=5, history_size=2)),
        ("LBFGS", True, 3, dict(lr=1, max_iter=20, line_search_fn="strong_wolfe", history_size=5)),
        ("LBFGS", False, 2, dict(lr=1, max_iter=10, line_search_fn="strong_wolfe")),
        ("Adadelta", False, 30, dict(lr=1.0)), ("Adadelta", False, 30, dict(lr=0.5, rho=0.8, weight_decay=0.01)),
        ("Rprop", False, 30, dict(lr=0.01)),
        ("Rprop", True, 30, dict(lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-4, 1))),
        ("ASGD", False, 30, dict(lr=0.05, t0=5)),
        ("ASGD", False, 30, dict(lr=0.05, t0=5, weight_decay=0.1, lambd=0.01))]


def _run(t, name, rosenbrock, steps, options):
    a = t.tensor([[3.0, 0.5, 0.1], [0.5, 2.0, 0.3], [0.1, 0.3, 1.0]])
    b = t.tensor([1.0, -2.0, 0.5])
    w = t.nn.Parameter(t.tensor([-1.2, 1.0, 0.5]))
    optimizer = getattr(t.optim, name)([w], **options)

    def closure():
        optimizer.zero_grad()
        if rosenbrock:
            loss = 100 * (w[1] - w[0] ** 2) ** 2 + (1 - w[0]) ** 2 + (w[2] - 0.3) ** 2
        else:
            loss = 0.5 * w @ (a @ w) - b @ w + 0.1 * (w ** 4).sum()
        loss.backward()
        return loss
    for _ in range(steps):
        optimizer.step(closure)
    return np.array(w.detach().tolist())


@needs_torch
@pytest.mark.parametrize("name, rosenbrock, steps, options", RUNS)
def test_optimizers_follow_pytorchs_iterates(name, rosenbrock, steps, options):
    ours, theirs = _run(torch, name, rosenbrock, steps, options), _run(peer, name, rosenbrock, steps, options)
    assert np.allclose(ours, theirs, atol=1e-4), (ours, theirs)


def test_lbfgs_converges_and_refuses_groups():
    assert np.allclose(_run(torch, "LBFGS", True, 5, dict(line_search_fn="strong_wolfe")), [1.0, 1.0, 0.3],
                       atol=1e-3)
    with pytest.raises(ValueError, match="per-parameter options"):
        torch.optim.LBFGS([{"params": [nn.Parameter(torch.ones(1))]}, {"params": [nn.Parameter(torch.ones(1))]}])
    with pytest.raises(TypeError):  # (closure is a required argument, as PyTorch's)
        torch.optim.LBFGS([nn.Parameter(torch.ones(1))]).step()


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "LBFGS"])
def test_step_closures_and_hooks(name):
    model = nn.Linear(2, 1)
    optimizer = getattr(torch.optim, name)(model.parameters(), lr=0.1)
    calls = []
    pre = optimizer.register_step_pre_hook(lambda opt, args, kwargs: calls.append("pre"))
    post = optimizer.register_step_post_hook(lambda opt, args, kwargs: calls.append("post"))
    every = torch.optim.optimizer.register_optimizer_step_pre_hook(lambda opt, args, kwargs: calls.append("global"))

    def closure():
        optimizer.zero_grad()
        loss = model(torch.ones(1, 2)).sum()
        loss.backward()
        return loss
    before = model.weight.detach().clone()
    loss = optimizer.step(closure)
    assert loss is not None and not torch.equal(before, model.weight)
    assert calls == ["global", "pre", "post"]
    for handle in (pre, post, every):
        handle.remove()
    optimizer.step(closure)
    assert calls == ["global", "pre", "post"]
