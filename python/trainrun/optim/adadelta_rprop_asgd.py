"""Adadelta, Rprop and ASGD with PyTorch's arguments, update rules and state names (square_avg/acc_delta;
prev/step_size; eta/mu/ax), written in Python on trainrun.optim.Optimizer."""
from trainrun import _C
from trainrun.optim.optimizer import _PerParameterOptimizer


def _zeros_like(p):
    return _C.zeros(list(p.shape), dtype=p.dtype, device=p.device)


class Adadelta(_PerParameterOptimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if lr < 0 or not 0.0 <= rho <= 1.0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"Adadelta: invalid lr {lr}, rho {rho}, eps {eps} or weight_decay {weight_decay}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = _C.zeros([], dtype=_C.dtype.float32)
            state["square_avg"], state["acc_delta"] = _zeros_like(p), _zeros_like(p)
        state["step"].add_(1)
        if group["weight_decay"]:
            grad = grad + p * group["weight_decay"]
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.copy_(square_avg * rho + grad * grad * (1 - rho))
        delta = _C.sqrt(acc_delta + eps) / _C.sqrt(square_avg + eps) * grad
        acc_delta.copy_(acc_delta * rho + delta * delta * (1 - rho))
        p.copy_(p - delta * group["lr"])


class Rprop(_PerParameterOptimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if lr < 0 or not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Rprop: invalid lr {lr} or etas {etas}")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = _C.zeros([], dtype=_C.dtype.float32)
            state["prev"] = _zeros_like(p)
            state["step_size"] = _C.full(list(p.shape), float(group["lr"]), dtype=p.dtype, device=p.device)
        state["step"].add_(1)
        eta_minus, eta_plus = group["etas"]
        low, high = group["step_sizes"]
        sign = (grad * state["prev"]).sign()
        factor = (sign > 0).to(p.dtype) * (eta_plus - 1) + (sign < 0).to(p.dtype) * (eta_minus - 1) + 1
        step_size = (state["step_size"] * factor).clamp(min=low, max=high)
        state["step_size"].copy_(step_size)
        grad = grad * (sign >= 0).to(grad.dtype)  # after a sign change, no step this time
        p.copy_(p - grad.sign() * step_size)
        state["prev"].copy_(grad)


class ASGD(_PerParameterOptimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        if lr < 0 or weight_decay < 0:
            raise ValueError(f"ASGD: invalid lr {lr} or weight_decay {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = _C.zeros([], dtype=_C.dtype.float32)
            state["eta"] = _C.full([], float(group["lr"]), dtype=_C.dtype.float32)
            state["mu"] = _C.ones([], dtype=_C.dtype.float32)
            state["ax"] = _zeros_like(p)
        state["step"].add_(1)
        step = state["step"].item()
        if group["weight_decay"]:
            grad = grad + p * group["weight_decay"]
        eta = state["eta"].item()
        p.copy_(p * (1 - group["lambd"] * eta) - grad * eta)
        mu = state["mu"].item()
        if mu != 1:
            state["ax"].copy_(state["ax"] + (p - state["ax"]) * mu)
        else:
            state["ax"].copy_(p)
        state["eta"].fill_(group["lr"] / ((1 + group["lambd"] * group["lr"] * step) ** group["alpha"]))
        state["mu"].fill_(1 / max(1, step - group["t0"]))
