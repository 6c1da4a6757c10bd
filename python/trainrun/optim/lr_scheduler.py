"""trainrun.optim.lr_scheduler, as PyTorch's, over param_groups: LRScheduler,
the base a script subclasses (get_lr() from self.last_epoch and
self.base_lrs); StepLR, MultiStepLR, ExponentialLR, ConstantLR, LinearLR,
PolynomialLR, LambdaLR, CosineAnnealingLR and CosineAnnealingWarmRestarts in
closed form; MultiplicativeLR, CyclicLR, OneCycleLR, SequentialLR,
ChainedScheduler and ReduceLROnPlateau. Each has state_dict/load_state_dict.
(trainrun._C.optim keeps C++ schedulers for C++ programs; the C++ ones count
as LRSchedulers here.)"""
import abc
import bisect
import math

from trainrun import _C


def _deprecated_verbose(verbose):
    """PyTorch's verbose argument, deprecated since 2.2: anything but its default warns as PyTorch's does."""
    if verbose == "deprecated":
        return False
    import warnings
    warnings.warn("The verbose parameter is deprecated. Please use get_last_lr() to access the learning rate.",
                  UserWarning, stacklevel=3)
    return verbose


class LRScheduler(abc.ABC):
    """PyTorch's base class: the constructor records each group's 'initial_lr' (base_lrs) and takes the first
    step; step() advances last_epoch and sets each group's lr to get_lr()'s value. The C++ schedulers count as
    LRSchedulers too (isinstance)."""

    def __init__(self, optimizer, last_epoch=-1, verbose="deprecated"):
        self.optimizer = optimizer
        self.verbose = _deprecated_verbose(verbose)
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group in groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            missing = [i for i, g in enumerate(groups) if "initial_lr" not in g]
            if missing:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups{missing} when resuming an "
                               "optimizer")
        self.base_lrs = [group["initial_lr"] for group in groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self):
        raise NotImplementedError(f"{type(self).__name__} must define get_lr()")

    def get_last_lr(self):
        return list(self._last_lr)

    def step(self, epoch=None):
        self._step_count = getattr(self, "_step_count", 0) + 1
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        # PyTorch's step(epoch): straight to that epoch's closed form, where the scheduler has one.
        closed_form = epoch is not None and getattr(type(self), "lr_at", None) not in (None, _ClosedFormLR.lr_at)
        for group, lr in zip(self.optimizer.param_groups, self._closed_form() if closed_form else self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


LRScheduler.register(_C.optim.LRScheduler)  # (trainrun._C.optim's C++ schedulers, for C++ programs)
_LRScheduler = LRScheduler  # (PyTorch's older name)


class _ClosedFormLR(LRScheduler):
    """A scheduler whose lr is its group's base lr times a function of the epoch (lr_at, used by
    step(epoch)). A step changes the group's current lr by that function's ratio from the last epoch to this
    one (chained(lr, base_lr, epoch)), as PyTorch's chainable forms do: schedulers stepped together compose
    (ChainedScheduler), and a hand-set lr carries on."""

    def lr_at(self, base_lr, epoch):
        raise NotImplementedError

    def chained(self, lr, base_lr, epoch):
        return self.lr_at(base_lr, epoch)  # (a schedule that is not chainable: its closed form)

    def _closed_form(self):
        return [self.lr_at(base, self.last_epoch) for base in self.base_lrs]

    def get_lr(self):
        return [self.chained(g["lr"], base, self.last_epoch)
                for g, base in zip(self.optimizer.param_groups, self.base_lrs)]


class StepLR(_ClosedFormLR):
    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1, verbose="deprecated"):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        return base_lr * self.gamma ** (epoch // self.step_size)

    def chained(self, lr, base_lr, epoch):
        return lr * self.gamma if epoch > 0 and epoch % self.step_size == 0 else lr


class LinearLR(_ClosedFormLR):
    """Scales the lr linearly from start_factor to end_factor over total_iters steps (warm-up)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1,
                 verbose="deprecated"):
        if not 0 < start_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if not 0 <= end_factor <= 1:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        done = min(self.total_iters, epoch) / self.total_iters if self.total_iters else 1.0
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)

    def chained(self, lr, base_lr, epoch):
        if epoch == 0:
            return lr * self.start_factor
        if epoch > self.total_iters:
            return lr
        step = self.end_factor - self.start_factor
        return lr * (1.0 + step / (self.total_iters * self.start_factor + (epoch - 1) * step))


class CosineAnnealingLR(_ClosedFormLR):
    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1,  # noqa: N803  (PyTorch's names)
                 verbose="deprecated"):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2

    def chained(self, lr, base_lr, epoch):
        if epoch == 0:
            return lr
        if self._step_count == 1:  # resumed at last_epoch > 0: where the schedule is
            return self.lr_at(base_lr, epoch)
        if (epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return lr + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
        return ((1 + math.cos(math.pi * epoch / self.T_max)) / (1 + math.cos(math.pi * (epoch - 1) / self.T_max)) *
                (lr - self.eta_min) + self.eta_min)


class LambdaLR(_ClosedFormLR):
    """lr = base lr * lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1, verbose="deprecated"):
        groups = optimizer.param_groups
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * len(groups)
        if len(self.lr_lambdas) != len(groups):
            raise ValueError(f"Expected {len(groups)} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        """Without the functions (as PyTorch's: they may not pickle)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class SequentialLR(LRScheduler):
    """schedulers[i] drives the lr from milestones[i-1] on (restarting its count there), as PyTorch's."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1, verbose="deprecated"):
        schedulers = list(schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        for i, sch in enumerate(schedulers):
            if getattr(sch, "optimizer", optimizer) is not optimizer:
                raise ValueError(f"Sequential Schedulers expects all schedulers to belong to the same optimizer, "
                                 f"but got scheduler {type(sch).__name__} at index {i} to be different")
        self._schedulers, self._milestones = schedulers, list(milestones)
        self.verbose = _deprecated_verbose(verbose)
        self.optimizer, self.last_epoch = optimizer, last_epoch + 1
        for group in optimizer.param_groups:  # undo the schedulers' first steps: the first one starts afresh
            group["lr"] = group["initial_lr"]
        for sch in schedulers:
            sch.last_epoch -= 1
        schedulers[0].step()
        self._last_lr = schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        out["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return out

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        for s, sd in zip(self._schedulers, state_dict.pop("_schedulers")):
            s.load_state_dict(sd)
        self.__dict__.update(state_dict)


class ExponentialLR(_ClosedFormLR):
    def __init__(self, optimizer, gamma, last_epoch=-1, verbose="deprecated"):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        return base_lr * self.gamma ** epoch

    def chained(self, lr, base_lr, epoch):
        return lr * self.gamma if epoch > 0 else lr


class MultiStepLR(_ClosedFormLR):
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1, verbose="deprecated"):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        return base_lr * self.gamma ** sum(1 for m in self.milestones if m <= epoch)

    def chained(self, lr, base_lr, epoch):
        return lr * self.gamma ** self.milestones.count(epoch)


class ConstantLR(_ClosedFormLR):
    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1, verbose="deprecated"):
        if not 0 < factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in (0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        return base_lr * (self.factor if epoch < self.total_iters else 1.0)

    def chained(self, lr, base_lr, epoch):
        if epoch == 0:
            return lr * self.factor
        return lr / self.factor if epoch == self.total_iters else lr


class PolynomialLR(_ClosedFormLR):
    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1, verbose="deprecated"):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        return base_lr * (1.0 - min(epoch, self.total_iters) / self.total_iters) ** self.power

    def chained(self, lr, base_lr, epoch):
        if epoch == 0 or epoch > self.total_iters:
            return lr
        return lr * ((1.0 - epoch / self.total_iters) / (1.0 - (epoch - 1) / self.total_iters)) ** self.power


class CosineAnnealingWarmRestarts(_ClosedFormLR):
    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1,  # noqa: N803  (PyTorch's names)
                 verbose="deprecated"):
        if T_0 <= 0 or not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be positive and T_mult an int >= 1, got "
                             f"{T_0}, {T_mult}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, eta_min
        super().__init__(optimizer, last_epoch, verbose)

    def lr_at(self, base_lr, epoch):
        t, period = epoch, self.T_0
        if self.T_mult == 1:
            t = epoch % self.T_0
        else:
            while t >= period:
                t -= period
                period *= self.T_mult
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * t / period)) / 2


class OneCycleLR(_ClosedFormLR):
    """The 1cycle policy: warm up from max_lr/div_factor to max_lr over pct_start of the steps, then anneal
    to max_lr/(div_factor*final_div_factor); momentum (SGD's, or Adam's beta1) cycles the other way."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1, verbose="deprecated"):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        self.total_steps, self.anneal = total_steps, anneal_strategy
        self.initial = [m / div_factor for m in max_lrs]
        self.max_lrs, self.min_lrs = max_lrs, [i / final_div_factor for i in self.initial]
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self.phases = [(up, "initial", "max", "max_m", "base_m"), (2 * up, "max", "initial", "base_m", "max_m"),
                           (total_steps - 1, "initial", "min", "max_m", "max_m")]
        else:
            self.phases = [(up, "initial", "max", "max_m", "base_m"), (total_steps - 1, "max", "min", "base_m",
                                                                       "max_m")]
        self.cycle_momentum = cycle_momentum and ("momentum" in groups[0] or "betas" in groups[0])
        self.base_momentum, self.max_momentum = base_momentum, max_momentum
        for g, lr in zip(groups, self.initial):
            g["lr"] = lr
        if self.cycle_momentum:
            self._set_momentum(max_momentum)
        self.optimizer, self.base_lrs, self.last_epoch = optimizer, self.initial, last_epoch
        self.verbose = _deprecated_verbose(verbose)
        self._last_lr = list(self.initial)
        self.step()

    def _set_momentum(self, m):
        for g in self.optimizer.param_groups if hasattr(self, "optimizer") else []:
            if "betas" in g:
                g["betas"] = (m, g["betas"][1])
            else:
                g["momentum"] = m

    def _anneal(self, start, end, pct):
        if self.anneal == "linear":
            return (end - start) * pct + start
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {step} times, more than total_steps ({self.total_steps})")
        lrs, momentum = [], None
        for k in range(len(self.initial)):
            values = {"initial": self.initial[k], "max": self.max_lrs[k], "min": self.min_lrs[k],
                      "base_m": self.base_momentum, "max_m": self.max_momentum}
            start_step = 0.0
            for i, (end_step, lo, hi, m_lo, m_hi) in enumerate(self.phases):
                if step <= end_step or i == len(self.phases) - 1:
                    pct = (step - start_step) / (end_step - start_step) if end_step > start_step else 1.0
                    lrs.append(self._anneal(values[lo], values[hi], pct))
                    momentum = self._anneal(values[m_lo], values[m_hi], pct)
                    break
                start_step = end_step
        if self.cycle_momentum and momentum is not None:
            self._set_momentum(momentum)
        return lrs


class MultiplicativeLR(LRScheduler):
    """Each step multiplies every group's lr by lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1, verbose="deprecated"):
        groups = optimizer.param_groups
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * len(groups)
        if len(self.lr_lambdas) != len(groups):
            raise ValueError(f"MultiplicativeLR: expected {len(groups)} lr_lambdas, got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch > 0:
            return [g["lr"] * fn(self.last_epoch) for g, fn in zip(groups, self.lr_lambdas)]
        return [g["lr"] for g in groups]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class CyclicLR(LRScheduler):
    """Cycles each group's lr between base_lr and max_lr (triangular, triangular2, exp_range, or scale_fn),
    one batch per step; with cycle_momentum, momentum (or Adam's beta1) cycles the opposite way."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1, verbose="deprecated"):
        groups = optimizer.param_groups
        per_group = lambda v: list(v) if isinstance(v, (list, tuple)) else [v] * len(groups)  # noqa: E731
        base_lrs = per_group(base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, groups):
                group["initial_lr"] = lr
                group["lr"] = lr
        self.max_lrs = per_group(max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode must be triangular, triangular2 or exp_range, got {mode!r}")
        self.mode, self.gamma, self._scale_fn_custom = mode, gamma, scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else ("iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            first = groups[0]
            if "momentum" not in first and "betas" not in first:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self._beta = "betas" in first and "momentum" not in first
            self.base_momentums, self.max_momentums = per_group(base_momentum), per_group(max_momentum)
            if last_epoch == -1:
                for m, group in zip(self.max_momentums, groups):
                    self._set_momentum(group, m)
        super().__init__(optimizer, last_epoch, verbose)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, value):
        if self._beta:
            group["betas"] = (value, group["betas"][1])
        else:
            group["momentum"] = value

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        scale = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scaled = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * scale * scaled for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                self._set_momentum(group, high - (high - low) * scale * scaled)
        return lrs

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_scale_fn_custom")}


class ChainedScheduler:
    """Steps every scheduler of the list at each step() (their effects compose, as PyTorch's)."""

    def __init__(self, schedulers, optimizer=None):
        self._schedulers = list(schedulers)
        if not self._schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        self.optimizer = optimizer or self._schedulers[0].optimizer
        for s in self._schedulers:
            if s.optimizer is not self.optimizer:
                raise ValueError("ChainedScheduler expects all schedulers to belong to the same optimizer")
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)

    def state_dict(self):
        return {"_schedulers": [s.state_dict() for s in self._schedulers], "_last_lr": self._last_lr}

    def load_state_dict(self, state_dict):
        for s, sd in zip(self._schedulers, state_dict["_schedulers"]):
            s.load_state_dict(sd)
        self._last_lr = state_dict["_last_lr"]


LRScheduler.register(ChainedScheduler)


class ReduceLROnPlateau:
    """Multiplies the lr by factor when the metric given to step(metric) stops improving for patience
    epochs (PyTorch's rules for mode, threshold_mode, cooldown, min_lr and eps)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8, verbose="deprecated"):
        self.verbose = _deprecated_verbose(verbose)
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau: factor should be < 1.0")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: mode must be min/max and threshold_mode rel/abs, got {mode!r}, "
                             f"{threshold_mode!r}")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, threshold_mode, cooldown, eps
        groups = optimizer.param_groups
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * len(groups)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
        self._last_lr = [g["lr"] for g in groups]

    def _better(self, a, best):
        if self.mode == "min":
            return a < (best * (1 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (1 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics, epoch=None):
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(g["lr"] * self.factor, min_lr)
                if g["lr"] - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)
