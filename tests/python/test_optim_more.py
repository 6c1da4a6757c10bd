"""Adadelta, Rprop, ASGD and LBFGS (fixed step and strong-Wolfe line search) against PyTorch 1.13 on the same
problems (the iterates to 1e-4); step(closure) of the C++ optimizers returns the closure's loss; step hooks
(per optimizer and global, removable) run around every optimizer's step."""
import copy

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


class _MomentumSGD(torch.optim.Optimizer):
    """A user's optimizer, written as PyTorch's docs write one: state keyed by the parameter."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                state["buf"].mul_(group["momentum"]).add_(p.grad)
                p.add_(state["buf"], alpha=-group["lr"])


def test_a_python_optimizers_state_is_saved_and_restored():
    """self.state[p] written by a subclass's step is in state_dict() under p's index, and load_state_dict gives it
    back so training continues exactly; optimizer.state[p] reads it."""
    torch.manual_seed(0)
    model, x = nn.Linear(3, 2), torch.randn(4, 3)

    def train(opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()

    opt = _MomentumSGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 0.01}])
    train(opt, 2)
    saved = copy.deepcopy(opt.state_dict())  # (its tensors are the optimizer's own, as in PyTorch)
    assert sorted(saved["state"]) == [0, 1] and saved["param_groups"][1]["lr"] == 0.01
    assert torch.equal(opt.state[model.weight]["buf"], saved["state"][0]["buf"])
    weights = [p.detach().clone() for p in model.parameters()]
    train(opt, 1)
    expected = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(w)
    again = _MomentumSGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 0.5}])
    again.load_state_dict(saved)
    train(again, 1)
    assert all(torch.equal(p, e) for p, e in zip(model.parameters(), expected))


def test_optimizers_are_optimizers_and_print_their_groups():
    """The built-in (C++) optimizers are instances of torch.optim.Optimizer, as in PyTorch; print(optimizer)
    lists each group's options in PyTorch's format; Adam's step is a float32 tensor listed first."""
    model = nn.Linear(2, 2)
    for opt in (torch.optim.Adam(model.parameters()), torch.optim.SGD(model.parameters(), lr=0.1),
                torch.optim.AdamW(model.parameters()), torch.optim.RMSprop(model.parameters()),
                _MomentumSGD(model.parameters())):
        assert isinstance(opt, torch.optim.Optimizer), type(opt)
        text = repr(opt)
        assert text.startswith(type(opt).__name__ + " (\nParameter Group 0\n") and text.endswith("\n)"), text
        assert "    lr: " in text
    assert issubclass(torch.optim.AdamW, torch.optim.Optimizer) and not isinstance(model, torch.optim.Optimizer)
    sgd = torch.optim.SGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 1.0}], lr=0.1, momentum=0.9)
    assert "Parameter Group 1\n" in repr(sgd) and "    momentum: 0.9\n" in repr(sgd)
    adam = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    adam.step()
    state = adam.state_dict()["state"][0]
    assert list(state) == ["step", "exp_avg", "exp_avg_sq"]
    assert state["step"].dtype == torch.float32 and state["step"].item() == 1.0
    assert adam.state[model.weight]["step"].dtype == torch.float32
    adam.load_state_dict(adam.state_dict())
    adam.step()
    assert adam.state_dict()["state"][0]["step"].item() == 2.0


def test_a_python_optimizers_state_survives_copies():
    model = nn.Linear(2, 2)
    opt = torch.optim.RMSprop(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    clone = copy.deepcopy(opt)
    assert len(clone.state) == 2 and sorted(opt.state[model.weight]) == ["square_avg", "step"]
    assert model.bias in opt.state and opt.state.get(model.bias) is opt.state[model.bias]


def test_lr_schedulers_take_the_deprecated_verbose_argument():
    """verbose= (deprecated since PyTorch 2.2; older scripts pass it): accepted by every scheduler, with
    PyTorch's warning when given."""
    import warnings
    import trainrun
    opt = trainrun.optim.SGD([trainrun.nn.Parameter(trainrun.ones(1))], lr=0.1)
    lrs = trainrun.optim.lr_scheduler
    cases = [(lrs.StepLR, dict(step_size=1)), (lrs.LinearLR, {}), (lrs.CosineAnnealingLR, dict(T_max=3)),
             (lrs.LambdaLR, dict(lr_lambda=lambda e: 1)), (lrs.ExponentialLR, dict(gamma=0.9)),
             (lrs.MultiStepLR, dict(milestones=[1])), (lrs.ConstantLR, {}), (lrs.PolynomialLR, {}),
             (lrs.CosineAnnealingWarmRestarts, dict(T_0=2)), (lrs.OneCycleLR, dict(max_lr=1, total_steps=5)),
             (lrs.MultiplicativeLR, dict(lr_lambda=lambda e: 1)), (lrs.CyclicLR, dict(base_lr=0.01, max_lr=0.1)),
             (lrs.ReduceLROnPlateau, {})]
    for cls, kwargs in cases:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cls(opt, verbose=False, **kwargs)
        assert any("The verbose parameter is deprecated" in str(w.message) for w in caught), cls.__name__
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cls(opt, **kwargs)  # (the default warns nothing)


@pytest.mark.parametrize("name", ["Adam", "NAdam"])  # (a C++ optimizer and a Python one)
def test_optimizer_state_dict_hooks(name):
    import trainrun
    w = trainrun.nn.Parameter(trainrun.ones(2))
    opt = getattr(trainrun.optim, name)([w], lr=0.1)
    (w * 2).sum().backward()
    opt.step()
    calls = []
    opt.register_state_dict_pre_hook(lambda o: calls.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    handle = opt.register_state_dict_post_hook(lambda o, sd: calls.append("second post"), prepend=True)
    state = opt.state_dict()
    assert state["extra"] == 1 and calls == ["pre", "second post"]
    handle.remove()
    opt.register_load_state_dict_pre_hook(lambda o, sd: {k: v for k, v in sd.items() if k != "extra"})
    opt.register_load_state_dict_post_hook(lambda o: calls.append("loaded"))
    opt.load_state_dict(state)
    assert calls[-1] == "loaded" and opt.param_groups[0]["lr"] == 0.1
