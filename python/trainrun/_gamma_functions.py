"""lgamma, digamma and polygamma (trigamma) as composites of core ops, computed in float64 and returned in the
input's dtype: each shifts its argument up with the recurrence and sums the asymptotic (Stirling) series
there (lgamma from 10, digamma and trigamma from 6), with the reflection formula for small or negative
arguments. Each is an autograd Function whose backward is the next one (lgamma' = digamma,
digamma' = trigamma), so gradients are the functions' own, not the approximations' derivatives."""
import math

import trainrun
from trainrun.autograd import Function

def _lgamma64(x):
    """log|Gamma(x)| for a float64 tensor: the argument shifted to >= 10 by the recurrence
    (lgamma(y) = lgamma(y + 1) - log y), then Stirling's series; reflection below 0.5."""
    reflect = x < 0.5
    y = trainrun.where(reflect, 1.0 - x, x)
    shift = trainrun.zeros_like(y)
    for _ in range(10):
        small = y < 10.0
        shift = shift + trainrun.where(small, trainrun.log(y), trainrun.zeros_like(y))
        y = trainrun.where(small, y + 1.0, y)
    inv = 1.0 / y
    inv2 = inv * inv
    series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 * (1.0 / 1680 - inv2 / 1188))))
    value = (y - 0.5) * trainrun.log(y) - y + 0.5 * math.log(2 * math.pi) + series - shift
    # reflection: log|Gamma(x)| = log(pi / |sin(pi x)|) - log|Gamma(1 - x)|
    reflected = math.log(math.pi) - trainrun.log(trainrun.sin(math.pi * x).abs()) - value
    return trainrun.where(reflect, reflected, value)


def _shifted(x, terms):
    """(x shifted up to >= 6, the recurrence's sum over the shift) for digamma (terms: 1/(x+k)) or trigamma
    (1/(x+k)^2)."""
    total = trainrun.zeros_like(x)
    for _ in range(6):
        small = x < 6.0
        total = total + trainrun.where(small, terms(x), trainrun.zeros_like(x))
        x = trainrun.where(small, x + 1.0, x)
    return x, total


def _digamma64(x):
    reflect = x < 0.0
    y = trainrun.where(reflect, 1.0 - x, x)
    y, correction = _shifted(y, lambda v: 1.0 / v)
    inv2 = 1.0 / (y * y)
    value = trainrun.log(y) - 0.5 / y - inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 *
                                                                                         (1.0 / 240 - inv2 / 132))))
    value = value - correction
    # reflection: digamma(x) = digamma(1 - x) - pi cot(pi x)
    reflected = value - math.pi / trainrun.tan(math.pi * x)
    value = trainrun.where(reflect, reflected, value)
    return trainrun.where((x <= 0) & (x == trainrun.floor(x)), trainrun.full_like(x, float("nan")), value)


def _trigamma64(x):
    reflect = x < 0.0
    y = trainrun.where(reflect, 1.0 - x, x)
    y, correction = _shifted(y, lambda v: 1.0 / (v * v))
    inv = 1.0 / y
    inv2 = inv * inv
    value = inv + inv2 / 2 + inv * inv2 * (1.0 / 6 - inv2 * (1.0 / 30 - inv2 * (1.0 / 42 - inv2 / 30)))
    value = value + correction
    # reflection: trigamma(1 - x) + trigamma(x) = pi^2 / sin^2(pi x)
    reflected = (math.pi / trainrun.sin(math.pi * x)) ** 2 - value
    return trainrun.where(reflect, reflected, value)


def _in_float64(fn, x):
    out_dtype = x.dtype if x.is_floating_point() else trainrun.get_default_dtype()
    return fn(x.detach().to(trainrun.float64)).to(out_dtype)


def _with_derivative(value, derivative):
    """An autograd Function computing value(x) in float64, whose backward is grad * derivative(x)."""
    class Special(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return _in_float64(value, x)

        @staticmethod
        def backward(ctx, grad):
            x, = ctx.saved_tensors
            return grad * derivative(x)
    return Special


_Lgamma = _with_derivative(_lgamma64, lambda x: digamma(x))
_Digamma = _with_derivative(_digamma64, lambda x: _in_float64(_trigamma64, x))


def lgamma(input):  # noqa: A002
    """log|Gamma(input)|."""
    return _Lgamma.apply(input)


def digamma(input):  # noqa: A002
    """d/dx lgamma(x) (NaN at 0 and the negative integers, as PyTorch's)."""
    return _Digamma.apply(input)


def polygamma(n, input):  # noqa: A002
    """The n-th derivative of digamma, for n = 0 (digamma) and 1 (trigamma)."""
    if n == 0:
        return digamma(input)
    if n == 1:
        return _in_float64(_trigamma64, input)
    raise NotImplementedError(f"polygamma: n = {n} is not supported (0 and 1 are)")


def mvlgamma(input, p):  # noqa: A002
    """The multivariate log-gamma of dimension p."""
    offsets = trainrun.arange(p, dtype=input.dtype, device=input.device) / -2.0
    return lgamma(input.unsqueeze(-1) + offsets).sum(dim=-1) + p * (p - 1) / 4.0 * math.log(math.pi)


def _install():
    namespace = vars(trainrun)
    for name, fn in (("lgamma", lgamma), ("digamma", digamma), ("polygamma", polygamma), ("mvlgamma", mvlgamma)):
        namespace.setdefault(name, fn)
    trainrun.Tensor.lgamma = lgamma
    trainrun.Tensor.digamma = digamma
    trainrun.Tensor.polygamma = lambda self, n: polygamma(n, self)
    trainrun.Tensor.mvlgamma = mvlgamma


_install()
