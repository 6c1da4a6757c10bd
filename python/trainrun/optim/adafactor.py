"""Adafactor (Shazeer & Stern, 2018) with PyTorch 2.5's arguments and update rule: the second moment of a matrix
(or of the last two dims of a higher-rank parameter) is kept factored, as row and column means of the squared
gradient (row_var, col_var: O(n + m) memory instead of O(n m)); a vector keeps it whole (variance). The step
size is relative to the parameter's RMS (at least eps2) and decays as min(lr, 1/sqrt(step)); the update is
clipped to RMS d."""
from trainrun import _C
from trainrun.optim.optimizer import _PerParameterOptimizer


class Adafactor(_PerParameterOptimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = _C.zeros([], dtype=_C.dtype.float32)
            if grad.dim() > 1:
                shape = list(grad.shape)
                state["row_var"] = _C.zeros(shape[:-1] + [1], dtype=grad.dtype, device=grad.device)
                state["col_var"] = _C.zeros(shape[:-2] + [1, shape[-1]], dtype=grad.dtype, device=grad.device)
            else:
                state["variance"] = _C.zeros(list(grad.shape), dtype=grad.dtype, device=grad.device)
        eps1, eps2 = group["eps"]
        if eps1 is None:
            import trainrun
            eps1 = trainrun.finfo(p.dtype).eps
        lr = group["lr"]
        state["step"].add_(1)
        step = state["step"].item()
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = min(lr, 1 / step ** 0.5)
        alpha = max(eps2, p.norm(2).item() / p.numel() ** 0.5) * rho
        if group["weight_decay"] != 0:
            p.mul_(1 - lr * group["weight_decay"])
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(grad.square().mean(-1, keepdim=True), one_minus_beta2)
            col_var.lerp_(grad.square().mean(-2, keepdim=True), one_minus_beta2)
            estimate = (row_var @ col_var) / row_var.mean(-2, keepdim=True).clamp(min=eps1)
        else:
            state["variance"].lerp_(grad * grad, one_minus_beta2)
            estimate = state["variance"].clone()
        update = estimate.clamp(min=eps1 * eps1).rsqrt() * grad
        denom = max(1.0, update.norm(2).item() / (update.numel() ** 0.5 * group["d"]))
        p.add_(update, alpha=-alpha / denom)
