"""torch.special: the special functions under their scipy-style names, over trainrun's ops (gammaln,
digamma/psi, polygamma, multigammaln, erf/erfc, expit/logit, ndtr/log_ndtr, xlogy/xlog1py, entr, sinc,
logsumexp, softmax/log_softmax, exp2/expm1/log1p, round)."""
import math

import trainrun
from trainrun import _gamma_functions


def gammaln(input):  # noqa: A002
    return _gamma_functions.lgamma(input)


digamma = psi = _gamma_functions.digamma
polygamma = _gamma_functions.polygamma
multigammaln = _gamma_functions.mvlgamma


def erf(input):  # noqa: A002
    return trainrun.erf(input)


def erfc(input):  # noqa: A002
    return 1.0 - trainrun.erf(input)


def expit(input):  # noqa: A002
    return trainrun.sigmoid(input)


def logit(input, eps=None):  # noqa: A002
    return trainrun.logit(input, eps)


def ndtr(input):  # noqa: A002
    """The standard normal CDF."""
    return 0.5 * (1.0 + trainrun.erf(input / math.sqrt(2.0)))


def log_ndtr(input):  # noqa: A002
    """log of the standard normal CDF; for x < -5 by the asymptotic form (no log of an underflowed 0)."""
    direct = trainrun.log(ndtr(input.clamp(min=-5.0)))
    x = input.clamp(max=-5.0)
    asymptotic = -0.5 * x * x - trainrun.log(-x) - 0.5 * math.log(2 * math.pi) + trainrun.log1p(
        -1.0 / (x * x) + 3.0 / (x * x * x * x))
    return trainrun.where(input < -5.0, asymptotic, direct)


def xlogy(input, other):  # noqa: A002
    return trainrun.xlogy(input, other)


def xlog1py(input, other):  # noqa: A002
    """input * log1p(other), 0 where input is 0."""
    return trainrun.where(input == 0, trainrun.zeros_like(input * other), input * trainrun.log1p(other))


def entr(input):  # noqa: A002
    """-x log x (0 at 0, -inf below 0)."""
    value = 0.0 - trainrun.xlogy(input, input)  # (+0 at 0, as PyTorch prints it)
    return trainrun.where(input < 0, trainrun.full_like(value, float("-inf")), value)


def sinc(input):  # noqa: A002
    return trainrun.sinc(input)


def logsumexp(input, dim, keepdim=False):  # noqa: A002
    return trainrun.logsumexp(input, dim, keepdim)


def softmax(input, dim, dtype=None):  # noqa: A002
    return trainrun.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):  # noqa: A002
    return trainrun.log_softmax(input, dim, dtype=dtype)


def exp2(input):  # noqa: A002
    return trainrun.pow(2.0, input)


def expm1(input):  # noqa: A002
    return trainrun.expm1(input)


def log1p(input):  # noqa: A002
    return trainrun.log1p(input)


def round(input, *, decimals=0):  # noqa: A001,A002
    return trainrun.round(input, decimals=decimals)


from trainrun.special._bessel_and_error import erfcx, erfinv, i0, i0e, i1, i1e, ndtri  # noqa: E402,F401
from trainrun.special._incomplete_gamma import gammainc, gammaincc  # noqa: E402,F401
from trainrun.special._polynomials import (chebyshev_polynomial_t, chebyshev_polynomial_u,  # noqa: E402,F401
                                           chebyshev_polynomial_v, chebyshev_polynomial_w, hermite_polynomial_h,
                                           hermite_polynomial_he, laguerre_polynomial_l, legendre_polynomial_p,
                                           shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u,
                                           shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w)
from trainrun.special._zeta import spherical_bessel_j0, zeta  # noqa: E402,F401
modified_bessel_i0, modified_bessel_i1 = i0, i1  # noqa: E305  (PyTorch's other names for the same functions)
