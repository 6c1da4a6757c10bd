"""RMSprop and Adagrad with PyTorch's arguments and update rules, written in
Python on trainrun.optim.Optimizer (their state: square_avg, momentum_buffer,
grad_avg; sum and step)."""
from trainrun import _C
from trainrun.optim.optimizer import _PerParameterOptimizer


class RMSprop(_PerParameterOptimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if lr < 0 or eps < 0 or momentum < 0 or weight_decay < 0 or alpha < 0:
            raise ValueError(f"RMSprop: lr, eps, momentum, weight_decay and alpha must be non-negative, got "
                             f"{lr}, {eps}, {momentum}, {weight_decay}, {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = _C.zeros([], dtype=_C.dtype.float32)
            state["square_avg"] = _C.zeros(list(p.shape), dtype=p.dtype, device=p.device)
            if group["momentum"] > 0:
                state["momentum_buffer"] = _C.zeros(list(p.shape), dtype=p.dtype, device=p.device)
            if group["centered"]:
                state["grad_avg"] = _C.zeros(list(p.shape), dtype=p.dtype, device=p.device)
        state["step"].add_(1)
        if group["weight_decay"]:
            grad = grad + p * group["weight_decay"]
        alpha = group["alpha"]
        square_avg = state["square_avg"]
        square_avg.copy_(square_avg * alpha + grad * grad * (1 - alpha))
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.copy_(grad_avg * alpha + grad * (1 - alpha))
            avg = _C.sqrt(square_avg - grad_avg * grad_avg) + group["eps"]
        else:
            avg = _C.sqrt(square_avg) + group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.copy_(buf * group["momentum"] + grad / avg)
            p.copy_(p - buf * group["lr"])
        else:
            p.copy_(p - grad / avg * group["lr"])


class Adagrad(_PerParameterOptimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if lr < 0 or lr_decay < 0 or weight_decay < 0 or initial_accumulator_value < 0 or eps < 0:
            raise ValueError("Adagrad: lr, lr_decay, weight_decay, initial_accumulator_value and eps must be "
                             "non-negative")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
                                      initial_accumulator_value=initial_accumulator_value, maximize=maximize))
        for group in self.param_groups:  # PyTorch makes the state at construction
            for p in group["params"]:
                state = self._state_of(p)
                state["step"] = _C.zeros([], dtype=_C.dtype.float32)
                state["sum"] = _C.full(list(p.shape), float(group["initial_accumulator_value"]), dtype=p.dtype,
                                       device=p.device)

    def _update(self, p, grad, state, group):
        state["step"].add_(1)
        step = state["step"].item()
        if group["weight_decay"]:
            grad = grad + p * group["weight_decay"]
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].copy_(state["sum"] + grad * grad)
        p.copy_(p - grad / (_C.sqrt(state["sum"]) + group["eps"]) * clr)
