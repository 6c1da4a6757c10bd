"""Adamax, NAdam and RAdam with PyTorch's arguments, defaults and update
rules, written in Python on trainrun.optim.Optimizer (state: step, exp_avg,
exp_inf or exp_avg_sq, and NAdam's mu_product). NAdam and RAdam take
decoupled_weight_decay (AdamW's decay: NAdamW, RAdamW) and maximize."""
import math

from trainrun import _C
from trainrun.optim.optimizer import _PerParameterOptimizer


def _check(name, lr, eps, betas, weight_decay):
    if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
        raise ValueError(f"{name}: invalid arguments lr={lr}, eps={eps}, betas={betas}, "
                         f"weight_decay={weight_decay} (lr, eps, weight_decay >= 0; betas in [0, 1))")


def _zeros_like(p):
    return _C.zeros(list(p.shape), dtype=p.dtype, device=p.device)


def _begin_step(p, grad, state, group, *buffers):
    """The start every update shares: state made on the first step (the float32 step count and zeroed buffers
    named `buffers`), the step counted, and L2 weight decay folded into the gradient. Returns (step, grad)."""
    if not state:
        state["step"] = _C.zeros([], dtype=_C.dtype.float32)
        for name in buffers:
            state[name] = _zeros_like(p)
    state["step"].add_(1)
    if group["weight_decay"]:
        if group.get("decoupled_weight_decay", False):  # AdamW's way: the weight shrinks, the gradient is kept
            p.mul_(1 - group["lr"] * group["weight_decay"])
        else:
            grad = grad + p * group["weight_decay"]
    return state["step"].item(), grad


class Adamax(_PerParameterOptimizer):
    """Adam with the infinity norm: exp_inf = max(beta2 * exp_inf, |grad| + eps)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check("Adamax", lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        step, grad = _begin_step(p, grad, state, group, "exp_avg", "exp_inf")
        beta1, beta2 = group["betas"]
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.copy_(exp_avg * beta1 + grad * (1 - beta1))
        exp_inf.copy_(_C.maximum(exp_inf * beta2, grad.abs() + group["eps"]))
        p.copy_(p - exp_avg / exp_inf * (group["lr"] / (1 - beta1 ** step)))


class NAdam(_PerParameterOptimizer):
    """Adam with Nesterov momentum and PyTorch's momentum-decay schedule. The product for the next step is
    mu_product * mu_next, as PyTorch 2.x has it (1.13 multiplied in mu twice)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check("NAdam", lr, eps, betas, weight_decay)
        if momentum_decay < 0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        step, grad = _begin_step(p, grad, state, group, "exp_avg", "exp_avg_sq")
        if "mu_product" not in state:
            state["mu_product"] = _C.ones([], dtype=_C.dtype.float32)
        beta1, beta2 = group["betas"]
        lr, decay = group["lr"], group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        state["mu_product"].mul_(mu)
        mu_product = state["mu_product"].item()
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(exp_avg * beta1 + grad * (1 - beta1))
        exp_avg_sq.copy_(exp_avg_sq * beta2 + grad * grad * (1 - beta2))
        denom = _C.sqrt(exp_avg_sq / (1 - beta2 ** step)) + group["eps"]
        p.copy_(p - grad / denom * (lr * (1.0 - mu) / (1.0 - mu_product))
                - exp_avg / denom * (lr * mu_next / (1.0 - mu_product * mu_next)))


class RAdam(_PerParameterOptimizer):
    """Adam whose adaptive step is switched on (and rectified) once the variance estimate is reliable."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check("RAdam", lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

    def _update(self, p, grad, state, group):
        step, grad = _begin_step(p, grad, state, group, "exp_avg", "exp_avg_sq")
        beta1, beta2 = group["betas"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(exp_avg * beta1 + grad * (1 - beta1))
        exp_avg_sq.copy_(exp_avg_sq * beta2 + grad * grad * (1 - beta2))
        bias_correction2 = 1 - beta2 ** step
        corrected = exp_avg / (1 - beta1 ** step)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive = math.sqrt(bias_correction2) / (_C.sqrt(exp_avg_sq) + group["eps"])
            p.copy_(p - corrected * adaptive * (group["lr"] * rect))
        else:
            p.copy_(p - corrected * group["lr"])
