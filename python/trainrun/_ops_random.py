"""Random ops with PyTorch's signatures beyond the factories: bernoulli,
multinomial, normal, poisson-free. Draws come from trainrun's global
generator (trainrun.manual_seed), or from a trainrun.Generator's own stream
when one is given."""
import numpy as np

from trainrun import _C
from trainrun._op_table import op


def _uniform(shape, like, generator):
    if generator is not None:
        values = np.ascontiguousarray(generator._engine.random_sample(tuple(shape)))
        return _C.from_numpy(values).to(like.dtype if like.is_floating_point() else _C.dtype.float32).to(
            like.device)
    return _C.rand(list(shape), like.dtype if like.is_floating_point() else None, like.device)


@op(method=True)
def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """1 with probability input (or p) per element, else 0, in input's dtype."""
    u = _uniform(input.shape, input, generator)
    return (u < (input if p is None else p)).to(input.dtype)


@op(method=True)
def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """Indices drawn by the (unnormalized) weights of each row: with replacement by inverse CDF, without
    by the Gumbel-top-k trick (each row's num_samples largest log w - log(-log u))."""
    probs = input if input.ndim == 2 else input.unsqueeze(0)
    rows, n = probs.shape
    if not replacement and num_samples > n:
        raise ValueError(f"multinomial(): cannot draw {num_samples} samples without replacement from {n} "
                         "categories")
    weights = probs.detach().to(_C.dtype.float64)
    if bool((weights < 0).any()) or bool((weights.sum(dim=1) <= 0).any()):
        raise ValueError("multinomial(): weights must be non-negative with a positive sum in every row")
    if replacement:
        cdf = _C.cumsum(weights / weights.sum(dim=1, keepdim=True), 1, dtype=None)
        u = _uniform([rows, num_samples], weights, generator)
        out = _C.from_numpy(np.ascontiguousarray(np.stack([np.searchsorted(c, v, side="right") for c, v in
                                                           zip(cdf.cpu().numpy(), u.cpu().numpy())]))).to(
            _C.dtype.int64)
        out = _C.clamp(out, None, n - 1)
    else:
        u = _uniform([rows, n], weights, generator)
        keys = _C.log(weights) - _C.log(-_C.log(u))
        out = _C.topk(keys, num_samples, 1, True)[1]
    out = out.to(input.device)
    return out if input.ndim == 2 else out.squeeze(0)


@op()
def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, device=None, requires_grad=False):
    """normal(mean, std) with tensors (shapes broadcast), or normal(mean, std, size) with numbers."""
    if out is not None:
        raise NotImplementedError("normal(out=...) is not supported")
    if _C._is_cpp_tensor(mean) or _C._is_cpp_tensor(std):
        like = mean if _C._is_cpp_tensor(mean) else std
        shape = list(np.broadcast_shapes(tuple(getattr(mean, "shape", ())), tuple(getattr(std, "shape", ()))))
        z = _standard_normal(shape, like.dtype, like.device, generator)
        return z * std + mean
    if size is None:
        raise TypeError("normal(): with number mean and std, give size")
    shape = list(size) if isinstance(size, (tuple, list)) else [size]
    z = _standard_normal(shape, dtype or _C._ops.get_default_dtype(), device, generator)
    result = z * std + mean
    if requires_grad:
        result.requires_grad_(True)
    return result


def _standard_normal(shape, dtype, device, generator):
    if generator is not None:
        values = np.ascontiguousarray(generator._engine.standard_normal(tuple(shape)))
        t = _C.from_numpy(values).to(dtype)
        return t.to(device) if device is not None else t
    return _C.randn(shape, dtype, device)
