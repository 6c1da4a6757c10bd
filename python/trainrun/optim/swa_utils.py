"""trainrun.optim.swa_utils, as PyTorch's: AveragedModel (stochastic weight averaging, or an exponential moving
average with get_ema_multi_avg_fn), SWALR (anneals each group's lr to its swa_lr), and update_bn (the
BatchNorm running statistics recomputed for the averaged weights over a loader)."""
import copy
import itertools
import math

import trainrun
from trainrun.nn import Module
from trainrun.optim.lr_scheduler import LRScheduler


def get_ema_multi_avg_fn(decay=0.999):
    def ema_update(ema_param_list, current_param_list, _num_averaged):
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        n = float(num_averaged)
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    return lambda ema_param, current_param, num_averaged: decay * ema_param + (1 - decay) * current_param


def get_swa_avg_fn():
    return lambda averaged_param, current_param, num_averaged: \
        averaged_param + (current_param - averaged_param) / (float(num_averaged) + 1)


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with use_buffers) are the running average of the
    model's at each update_parameters(model) call: equal weights by default, or avg_fn/multi_avg_fn's rule."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", trainrun.tensor(0, dtype=trainrun.long, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        tensors = [p for _, p in model._named_local_parameters()]
        return tensors + [b for _, b in model.named_buffers()] if self.use_buffers else tensors

    def update_parameters(self, model):
        averaged = self._tensors(self.module)
        current = [t.detach().to(a.device) for a, t in zip(averaged, self._tensors(model))]
        if len(averaged) != len(current):
            raise ValueError(f"AveragedModel.update_parameters: the model has {len(current)} tensors to average, "
                             f"the averaged copy {len(averaged)}")
        n = int(self.n_averaged)
        with trainrun.no_grad():
            targets = [a.detach() for a in averaged]
            if n == 0:
                for a, c in zip(targets, current):
                    a.copy_(c)
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn(targets, current, self.n_averaged.to(targets[0].device))
            else:
                average = self.avg_fn or get_swa_avg_fn()
                for a, c in zip(targets, current):
                    if a.is_floating_point():
                        a.copy_(average(a, c, self.n_averaged.to(a.device)))
                    else:
                        a.copy_(c)  # (an integer buffer: num_batches_tracked)
            if not self.use_buffers:  # the buffers follow the model (PyTorch's rule)
                for (_, mine), (_, theirs) in zip(self.module.named_buffers(), model.named_buffers()):
                    mine.detach().copy_(theirs.detach().to(mine.device))
        self.n_averaged += 1


class SWALR(LRScheduler):
    """Anneals each group's lr from its value to swa_lr over anneal_epochs steps ('cos' or 'linear'), then
    holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: swa_lr has "
                             f"{len(swa_lrs)}, optimizer.param_groups has {len(groups)}")
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_func = (lambda t: (1 - math.cos(math.pi * t)) / 2) if anneal_strategy == "cos" else (lambda t: t)
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}


def _is_batch_norm(module):
    return type(module).__name__ in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm") and \
        "running_mean" in dict(module.named_buffers(recurse=False))


def update_bn(loader, model, device=None):
    """Recomputes every BatchNorm's running mean and variance as the plain average over the loader's batches
    (PyTorch does it with momentum=None): one pass in training mode; each batch's statistics are read from
    the layer's input."""
    norms = [m for m in model.modules() if _is_batch_norm(m)]
    if not norms:
        return
    sums = {id(m): [None, None, 0] for m in norms}

    def record(module, args):
        x = args[0].detach()
        dims = [0] + list(range(2, x.ndim))
        count = x.numel() // x.shape[1]
        mean = x.mean(dim=dims)
        var = ((x - mean.reshape([1, -1] + [1] * (x.ndim - 2))) ** 2).sum(dim=dims) / max(count - 1, 1)
        entry = sums[id(module)]
        entry[0] = mean if entry[0] is None else entry[0] + mean
        entry[1] = var if entry[1] is None else entry[1] + var
        entry[2] += 1

    handles = [m.register_forward_pre_hook(record) for m in norms]
    was_training = model.training
    model.train()
    try:
        with trainrun.no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = batch.to(device)
                model(batch)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    with trainrun.no_grad():
        for m in norms:
            mean, var, batches = sums[id(m)]
            if batches:
                m.running_mean.copy_(mean / batches)
                m.running_var.copy_(var / batches)


__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]
