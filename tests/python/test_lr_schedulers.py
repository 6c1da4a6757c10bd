"""LR schedulers against PyTorch 1.13 step by step: each one alone, a scheduler a script writes by subclassing
LRScheduler, SequentialLR over any schedulers, ChainedScheduler (effects compose), MultiplicativeLR, CyclicLR
with momentum, and state_dict/load_state_dict resuming where a run stopped."""
import numpy as np
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as tr  # noqa: E402

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no peer to compare with")


def _warmup_class(lib):
    base = getattr(lib.optim.lr_scheduler, "LRScheduler", None) or lib.optim.lr_scheduler._LRScheduler

    class Warmup(base):
        def __init__(self, optimizer, steps, last_epoch=-1):
            self.steps = steps
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [b * min(1.0, (self.last_epoch + 1) / self.steps) for b in self.base_lrs]
    return Warmup


CASES = {
    "step": lambda lib, o: lib.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "multistep": lambda lib, o: lib.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.5),
    "exponential": lambda lib, o: lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
    "constant": lambda lib, o: lib.optim.lr_scheduler.ConstantLR(o, factor=0.25, total_iters=3),
    "linear": lambda lib, o: lib.optim.lr_scheduler.LinearLR(o, start_factor=0.1, end_factor=0.8, total_iters=4),
    "polynomial": lambda lib, o: lib.optim.lr_scheduler.PolynomialLR(o, total_iters=6, power=2.0),
    "cosine": lambda lib, o: lib.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0.01),
    "lambda": lambda lib, o: lib.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 / (e + 1)),
    "multiplicative": lambda lib, o: lib.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.9),
    "warm restarts": lambda lib, o: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                                         eta_min=0.001),
    "cyclic": lambda lib, o: lib.optim.lr_scheduler.CyclicLR(o, base_lr=0.01, max_lr=0.2, step_size_up=3,
                                                              mode="triangular2"),
    "onecycle": lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(o, max_lr=0.5, total_steps=12),
    "sequential": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
        o, [lib.optim.lr_scheduler.LinearLR(o, start_factor=0.2, total_iters=3),
            lib.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5)], milestones=[3]),
    "sequential of a script's own": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
        o, [_warmup_class(lib)(o, 3), lib.optim.lr_scheduler.ExponentialLR(o, 0.8)], milestones=[3]),
    "chained": lambda lib, o: lib.optim.lr_scheduler.ChainedScheduler(
        [lib.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2),
         lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)]),
}


def _run(lib, make, steps=12):
    w = lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
    sched = make(lib, opt)
    lrs, momenta = [], []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        momenta.append(opt.param_groups[0]["momentum"])
        opt.step()
        sched.step()
    return lrs, momenta, sched


@pytest.mark.parametrize("name", list(CASES))
def test_scheduler_follows_pytorch(name):
    ours, ours_m, sched = _run(tr, CASES[name])
    theirs, theirs_m, _ = _run(torch, CASES[name])
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, err_msg=name)
    np.testing.assert_allclose(ours_m, theirs_m, rtol=1e-9, err_msg=name)
    assert isinstance(sched, tr.optim.lr_scheduler.LRScheduler)
    assert sched.get_last_lr()[0] == pytest.approx(sched.optimizer.param_groups[0]["lr"])


def test_a_script_s_own_scheduler_follows_pytorch():
    ours, _, _ = _run(tr, lambda lib, o: _warmup_class(lib)(o, 4))
    theirs, _, _ = _run(torch, lambda lib, o: _warmup_class(lib)(o, 4))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("name", ["step", "cosine", "linear", "sequential", "cyclic", "onecycle", "chained"])
def test_state_dict_resumes_where_the_run_stopped(name):
    whole, _, _ = _run(tr, CASES[name], steps=10)
    first, _, sched = _run(tr, CASES[name], steps=4)
    state = sched.state_dict()
    lr_then = sched.optimizer.param_groups[0]["lr"]
    w = tr.nn.Parameter(tr.ones(2))
    opt = tr.optim.SGD([w], lr=0.1, momentum=0.9)
    resumed = CASES[name](tr, opt)
    resumed.load_state_dict(state)
    opt.param_groups[0]["lr"] = lr_then  # (the optimizer's own state_dict carries it in a real resume)
    rest = []
    for _ in range(6):
        rest.append(opt.param_groups[0]["lr"])
        opt.step()
        resumed.step()
    np.testing.assert_allclose(first + rest, whole, rtol=1e-9)


def test_scheduler_errors_name_the_problem():
    opt = tr.optim.SGD([tr.nn.Parameter(tr.ones(1))], lr=0.1)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        tr.optim.lr_scheduler.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="number of milestone points"):
        tr.optim.lr_scheduler.SequentialLR(opt, [tr.optim.lr_scheduler.StepLR(opt, 2)], milestones=[1])
    with pytest.raises(ValueError, match="momentum or beta1"):
        tr.optim.lr_scheduler.CyclicLR(tr.optim.Adagrad([tr.nn.Parameter(tr.ones(1))]), 0.01, 0.1)
    with pytest.raises(KeyError, match="initial_lr"):
        tr.optim.lr_scheduler.StepLR(tr.optim.SGD([tr.nn.Parameter(tr.ones(1))], lr=0.1), 2, last_epoch=3)
