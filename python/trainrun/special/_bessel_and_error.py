"""torch.special's modified Bessel functions of order 0 and 1 (i0, i0e, i1, i1e) and erfinv, ndtri, erfcx, built
from tensor ops (so differentiable). The Bessel functions sum their power series in float64 up to |x| = 30 and
use the large-argument expansion beyond; erfcx = exp(x^2) erfc(x) directly below x = 2 and by erfc's continued
fraction above, where 1 - erf(x) would lose its digits."""
import math

import trainrun

_SERIES_LIMIT, _SERIES_TERMS, _ASYMPTOTIC_TERMS, _FRACTION_DEPTH = 30.0, 80, 12, 120


def _series(x, order):
    """sum_k (x/2)^(2k+order) / (k! (k+order)!), with terms built by their ratio."""
    quarter = x * x / 4
    term = (x / 2) ** order / math.factorial(order)
    total = term
    for k in range(1, _SERIES_TERMS):
        term = term * quarter / (k * (k + order))
        total = total + term
    return total


def _scaled_asymptotic(ax, order):
    """exp(-x) I_order(x) for large x > 0: (2 pi x)^-1/2 sum_k (-1)^k prod_j (4 order^2 - (2j-1)^2) / (k! (8x)^k)."""
    mu = 4.0 * order * order
    term = trainrun.ones_like(ax)
    total = term
    for k in range(1, _ASYMPTOTIC_TERMS):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * ax)
        total = total + term
    return total / (2 * math.pi * ax).sqrt()


def _bessel(input, order, scaled):  # noqa: A002
    x = input.to(trainrun.float64) if input.dtype != trainrun.float64 else input
    ax = x.abs()
    small = ax <= _SERIES_LIMIT
    near = x.clamp(-_SERIES_LIMIT, _SERIES_LIMIT)
    series = _series(near, order)
    if scaled:
        series = series * (-near.abs()).exp()
    far = ax.clamp(min=_SERIES_LIMIT)
    asymptotic = _scaled_asymptotic(far, order)
    if not scaled:
        asymptotic = asymptotic * far.exp()
    if order == 1:
        asymptotic = asymptotic * x.sign()
    out = trainrun.where(small, series, asymptotic)
    return out.to(input.dtype) if input.is_floating_point() else out.to(trainrun.get_default_dtype())


def i0(input, *, out=None):  # noqa: A002
    return _bessel(input, 0, False)


def i0e(input, *, out=None):  # noqa: A002
    return _bessel(input, 0, True)


def i1(input, *, out=None):  # noqa: A002
    return _bessel(input, 1, False)


def i1e(input, *, out=None):  # noqa: A002
    return _bessel(input, 1, True)


def erfinv(input, *, out=None):  # noqa: A002
    return trainrun.erfinv(input)


def ndtri(input, *, out=None):  # noqa: A002
    """The inverse of the standard normal CDF."""
    return math.sqrt(2.0) * trainrun.erfinv(2 * input - 1)


def erfcx(input, *, out=None):  # noqa: A002
    """The scaled complementary error function exp(x^2) erfc(x)."""
    x = input.to(trainrun.float64)
    near = x.clamp(max=2.0)
    direct = (near * near).exp() * (1 - trainrun.erf(near))  # (1 - erf keeps its precision below x = 2)
    far = x.clamp(min=2.0)
    # Above, erfc's continued fraction: sqrt(pi) erfcx(x) = 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))).
    tail = trainrun.zeros_like(far)
    for k in range(_FRACTION_DEPTH, 0, -1):
        tail = (k / 2.0) / (far + tail)
    fraction = 1.0 / ((far + tail) * math.sqrt(math.pi))
    return trainrun.where(x < 2.0, direct, fraction).to(input.dtype)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """torch.kaiser_window: I0(beta sqrt(1 - ((n - N/2) / (N/2))^2)) / I0(beta), N = window_length (- 1 unless
    periodic... as PyTorch: a periodic window is the symmetric one of length + 1 without its last point)."""
    dtype = dtype if dtype is not None else trainrun.get_default_dtype()
    if window_length == 0:
        return trainrun.empty(0, dtype=dtype)
    if window_length == 1:
        return trainrun.ones(1, dtype=dtype)
    n = window_length + 1 if periodic else window_length
    k = trainrun.arange(n, dtype=trainrun.float64)
    alpha = (n - 1) / 2.0
    ratio = ((k - alpha) / alpha).clamp(-1.0, 1.0)
    window = i0(beta * (1 - ratio * ratio).clamp(min=0.0).sqrt()) / i0(trainrun.tensor(float(beta),
                                                                                       dtype=trainrun.float64))
    window = window[:window_length].to(dtype)
    return window.requires_grad_(True) if requires_grad else window
