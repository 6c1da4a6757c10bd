"""torch.special.gammainc / gammaincc: the regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P,
in float64 from tensor ops: the power series of P where x < a + 1 and the continued fraction of Q (modified
Lentz) elsewhere (Numerical Recipes' split), each run a fixed number of steps that converges to float64 in its
region, then selected per element."""
import trainrun

_SERIES_TERMS, _FRACTION_STEPS, _TINY = 400, 300, 1e-300


def _parts(a, x):
    a, x = trainrun.broadcast_tensors(a.to(trainrun.float64), x.to(trainrun.float64))
    series_region = x < a + 1
    xs = trainrun.where(series_region, x, trainrun.zeros_like(x))  # (each branch sees only its own region's x)
    xf = trainrun.where(series_region, a + 1, x)
    # P by its series: e^-x x^a / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))
    term = trainrun.ones_like(a)
    total = trainrun.ones_like(a)
    for n in range(1, _SERIES_TERMS):
        term = term * xs / (a + n)
        total = total + term
    log_front = a * trainrun.log(xs.clamp(min=_TINY)) - xs - trainrun.lgamma(a + 1)
    lower = trainrun.where(xs > 0, (log_front.exp() * total), trainrun.zeros_like(xs))
    # Q by its continued fraction (modified Lentz)
    b = xf + 1 - a
    c = trainrun.full_like(b, 1 / _TINY)
    d = 1 / b
    h = d
    for i in range(1, _FRACTION_STEPS):
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = trainrun.where(d.abs() < _TINY, trainrun.full_like(d, _TINY), d)
        c = b + an / c
        c = trainrun.where(c.abs() < _TINY, trainrun.full_like(c, _TINY), c)
        d = 1 / d
        h = h * d * c
    upper = (a * trainrun.log(xf) - xf - trainrun.lgamma(a)).exp() * h
    return series_region, lower, upper


def gammainc(input, other, *, out=None):  # noqa: A002
    """P(a, x), the regularized lower incomplete gamma function (input a > 0, other x >= 0)."""
    series_region, lower, upper = _parts(input, other)
    result = trainrun.where(series_region, lower, 1 - upper)
    return result.to(trainrun.promote_types(input.dtype, other.dtype)) if input.is_floating_point() else result


def gammaincc(input, other, *, out=None):  # noqa: A002
    """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function."""
    series_region, lower, upper = _parts(input, other)
    result = trainrun.where(series_region, 1 - lower, upper)
    return result.to(trainrun.promote_types(input.dtype, other.dtype)) if input.is_floating_point() else result
