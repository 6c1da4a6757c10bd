"""trainrun.optim.lr_scheduler, as PyTorch's: StepLR, CosineAnnealingLR,
LinearLR (warm-up), LambdaLR and SequentialLR in C++; ExponentialLR,
MultiStepLR, ConstantLR, PolynomialLR, CosineAnnealingWarmRestarts,
OneCycleLR and ReduceLROnPlateau here, in closed form over param_groups."""
import math

from trainrun import _C

LRScheduler = _C.optim.LRScheduler
StepLR, CosineAnnealingLR, LinearLR = _C.optim.StepLR, _C.optim.CosineAnnealingLR, _C.optim.LinearLR
LambdaLR, SequentialLR = _C.optim.LambdaLR, _C.optim.SequentialLR


class _ClosedFormLR:
    """A scheduler written in Python: lr of each group = its base lr times factor(epoch), set through
    param_groups (so it works on any optimizer). Constructing it applies epoch 0, as PyTorch's do."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr = list(self.base_lrs)
        self.step()

    def lr_at(self, base_lr, epoch):
        raise NotImplementedError

    def get_last_lr(self):
        return list(self._last_lr)

    def get_lr(self):
        return [self.lr_at(base, self.last_epoch) for base in self.base_lrs]

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = lrs

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class ExponentialLR(_ClosedFormLR):
    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return base_lr * self.gamma ** epoch


class MultiStepLR(_ClosedFormLR):
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return base_lr * self.gamma ** sum(1 for m in self.milestones if m <= epoch)


class ConstantLR(_ClosedFormLR):
    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 < factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in (0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return base_lr * (self.factor if epoch < self.total_iters else 1.0)


class PolynomialLR(_ClosedFormLR):
    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return base_lr * (1.0 - min(epoch, self.total_iters) / self.total_iters) ** self.power


class CosineAnnealingWarmRestarts(_ClosedFormLR):
    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):  # noqa: N803  (PyTorch's names)
        if T_0 <= 0 or not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be positive and T_mult an int >= 1, got "
                             f"{T_0}, {T_mult}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, eta_min
        super().__init__(optimizer, last_epoch)

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
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
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


class ReduceLROnPlateau:
    """Multiplies the lr by factor when the metric given to step(metric) stops improving for patience
    epochs (PyTorch's rules for mode, threshold_mode, cooldown, min_lr and eps)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
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
