"""Random ops with PyTorch's signatures beyond the factories: bernoulli, multinomial, normal. Draws come from
the default generator (trainrun.manual_seed) or the one given, made as PyTorch's CPU kernels make them, so
the same seed gives PyTorch's samples."""
import numpy as np

from trainrun import _C
from trainrun._op_table import op


def _cpp(generator, where):
    from trainrun._generator import _cpp_of
    return _cpp_of(generator, where)


@op(method=True)
def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """1 with probability input (or a number p) per element, else 0, in input's dtype."""
    return _C.empty(list(input.shape), dtype=input.dtype, device=input.device).bernoulli_(
        input if p is None else p, generator=generator)


@op(method=True)
def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """Indices drawn by the (unnormalized) weights of each row, as PyTorch's CPU kernel draws them: without
    replacement (or one sample) the num_samples largest w / q for q ~ Exp(1) (one draw per category); with
    replacement a binary search of the row's normalized cumulative weights for each uniform draw."""
    probs = input if input.ndim == 2 else input.unsqueeze(0)
    rows, n = probs.shape
    if not replacement and num_samples > n:
        raise RuntimeError(f"multinomial(): cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement ({num_samples} > {n})")
    weights = probs.detach()
    if bool((weights < 0).any()) or not bool(weights.isfinite().all()) or bool((weights.sum(dim=1) <= 0).any()):
        raise RuntimeError("multinomial(): invalid multinomial distribution (sum of probabilities <= 0, or a "
                           "negative or non-finite weight)")
    if not replacement or num_samples == 1:
        q = _C.empty(list(weights.shape), dtype=weights.dtype, device=weights.device).exponential_(
            1.0, generator=generator)
        keys = weights / q
        out = keys.argmax(dim=1, keepdim=True) if num_samples == 1 else _C.topk(keys, num_samples, 1, True)[1]
    else:
        cumulative = np.cumsum(weights.cpu().numpy().astype(np.float64), axis=1)
        cumulative = (cumulative / cumulative[:, -1:]).astype(weights.cpu().numpy().dtype)
        u = _C.empty([rows * num_samples], dtype=_C.dtype.float64).uniform_(0.0, 1.0, generator=generator)
        u = u.numpy().reshape(rows, num_samples)
        picks = np.stack([np.searchsorted(c, draws, side="left") for c, draws in zip(cumulative, u)])
        out = _C.from_numpy(np.minimum(picks, n - 1).astype(np.int64))
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
    result = _C._ops.normal_(_C.empty(shape, dtype or _C._ops.get_default_dtype(), device), float(mean), float(std),
                             _cpp(generator, "normal"))
    if requires_grad:
        result.requires_grad_(True)
    return result


def _standard_normal(shape, dtype, device, generator):
    t = _C.empty(shape, dtype, device)
    return _C._ops.normal_(t, 0.0, 1.0, _cpp(generator, "normal"))
