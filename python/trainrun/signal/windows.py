"""Window functions, as torch.signal.windows (SciPy's definitions): hann, hamming, blackman, bartlett, cosine,
exponential, gaussian, kaiser, nuttall, general_cosine, general_hamming.

Unlike torch.hann_window (periodic by default), these are symmetric by default: sym=False gives the periodic
window (the first M points of the symmetric window of M + 1). Each is computed in the requested dtype from a
linspace, as PyTorch's, so float32 results match PyTorch's to the last bits."""
import math

import trainrun

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout):
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not trainrun.strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (trainrun.float32, trainrun.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")


def _prepare(name, M, dtype, layout):
    dtype = trainrun.get_default_dtype() if dtype is None else dtype
    _checks(name, M, dtype, layout)
    return dtype


def _finish(window, requires_grad):
    return window.requires_grad_(True) if requires_grad else window


def _linspace(start, step, M, dtype, device):
    """start, start + step, ..., start + (M - 1) * step."""
    return trainrun.linspace(start, start + (M - 1) * step, M, dtype=dtype, device=device)


def _span(M, sym):
    """The denominator of the sample positions: M - 1 for a symmetric window, M for a periodic one."""
    return M if not sym else M - 1


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=trainrun.strided, device=None,
                requires_grad=False):
    dtype = _prepare("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _finish(trainrun.empty(0, dtype=dtype, device=device), requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _linspace(-center / tau, 1 / tau, M, dtype, device)
    return _finish(trainrun.exp(-trainrun.abs(k)), requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    dtype = _prepare("cosine", M, dtype, layout)
    if M == 0:
        return _finish(trainrun.empty(0, dtype=dtype, device=device), requires_grad)
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    return _finish(trainrun.sin(_linspace(0.5 * constant, constant, M, dtype, device)), requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    dtype = _prepare("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _finish(trainrun.empty(0, dtype=dtype, device=device), requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _linspace(start * constant, constant, M, dtype, device)
    return _finish(trainrun.exp(-k ** 2), requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    dtype = _prepare("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _finish(trainrun.ones(M, dtype=dtype, device=device), requires_grad)
    beta_t = trainrun.tensor(beta, dtype=dtype, device=device)
    constant = 2.0 * beta / _span(M, sym)
    end = min(beta, -beta + (M - 1) * constant)  # (the last position never passes beta: no NaN from the sqrt)
    k = trainrun.linspace(-beta, end, M, dtype=dtype, device=device)
    return _finish(trainrun.i0(trainrun.sqrt(beta_t * beta_t - k * k)) / trainrun.i0(beta_t), requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    """sum_i (-1)^i a_i cos(2 pi i n / (M - 1))."""
    dtype = _prepare("general_cosine", M, dtype, layout)
    if M <= 1:
        return _finish(trainrun.ones(M, dtype=dtype, device=device), requires_grad)
    if not isinstance(a, (list, tuple)) and not hasattr(a, "__iter__"):
        raise TypeError("Coefficients must be a list/tuple")
    a = list(a)
    if not a:
        raise ValueError("Coefficients cannot be empty")
    k = _linspace(0.0, 2 * math.pi / _span(M, sym), M, dtype, device)
    coefficients = trainrun.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype, device=device)
    i = trainrun.arange(len(a), dtype=dtype, device=device)
    return _finish((coefficients.unsqueeze(-1) * trainrun.cos(i.unsqueeze(-1) * k)).sum(0), requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=trainrun.strided, device=None,
                    requires_grad=False):
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=trainrun.strided, device=None, requires_grad=False):
    dtype = _prepare("bartlett", M, dtype, layout)
    if M <= 1:
        return _finish(trainrun.ones(M, dtype=dtype, device=device), requires_grad)
    k = _linspace(-1.0, 2 / _span(M, sym), M, dtype, device)
    return _finish(1 - trainrun.abs(k), requires_grad)
