"""trainrun.nn.utils: gradient clipping and parameter/vector conversion, as torch.nn.utils."""
import math

import trainrun


def _grads(parameters):
    if isinstance(parameters, trainrun.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients so that their joint norm is at most max_norm;
    returns that norm (before clipping) as a tensor."""
    if max_norm < 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be non-negative, got {max_norm}")
    grads = _grads(parameters)
    if not grads:
        return trainrun.tensor(0.0)
    with trainrun.no_grad():
        norms = trainrun.stack([g.detach().to(trainrun.float64).norm(float(norm_type)).reshape(1) for g in grads], 0)
        total = norms.amax() if math.isinf(norm_type) else norms.norm(float(norm_type))
        total_value = total.item()
        if error_if_nonfinite and not math.isfinite(total_value):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} is {total_value}")
        coef = max_norm / (total_value + 1e-6)
        if coef < 1:
            for g in grads:
                g.mul_(coef)
    return total.to(grads[0].dtype)


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element to [-clip_value, clip_value]."""
    with trainrun.no_grad():
        for g in _grads(parameters):
            g.copy_(g.clamp(-clip_value, clip_value))


def parameters_to_vector(parameters):
    return trainrun.cat([p.reshape(-1) for p in parameters], 0)


def vector_to_parameters(vec, parameters):
    offset = 0
    with trainrun.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].view(*p.shape))
            offset += n
