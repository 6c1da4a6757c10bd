"""More of PyTorch's KL(p || q) registrations: the remaining same-family pairs (Binomial, Cauchy, Geometric,
Gumbel, HalfNormal, Laplace, OneHotCategorical, Pareto, the low-rank and full multivariate normals, transformed
distributions) and the cross-family ones with a closed form; where q gives zero density on part of p's
support the divergence is infinite (Normal || Exponential, say), as PyTorch registers it."""
import math

import trainrun
from trainrun.distributions.bernoulli import Bernoulli
from trainrun.distributions.beta import Beta
from trainrun.distributions.binomial import Binomial
from trainrun.distributions.cauchy import Cauchy
from trainrun.distributions.exponential import Exponential
from trainrun.distributions.gamma import Gamma
from trainrun.distributions.geometric import Geometric
from trainrun.distributions.gumbel import Gumbel
from trainrun.distributions.half_normal import HalfNormal
from trainrun.distributions.kl import _KL_REGISTRY, _kl_categorical_categorical, kl_divergence, register_kl
from trainrun.distributions.laplace import Laplace
from trainrun.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from trainrun.distributions.multivariate_normal import MultivariateNormal
from trainrun.distributions.normal import Normal
from trainrun.distributions.one_hot_categorical import OneHotCategorical
from trainrun.distributions.poisson import Poisson
from trainrun.distributions.transformed_distribution import TransformedDistribution
from trainrun.distributions.uniform import Uniform
from trainrun.distributions.utils import euler_constant as _EULER
from trainrun.distributions.weibull import Pareto


def _infinite_like(t):
    return trainrun.full_like(t, math.inf)


def _inf_where(result, mask):
    return result.masked_fill(mask, math.inf)


def _x_log_x(t):
    return t * t.log()


# ---- same family -------------------------------------------------------------------------------------------------
@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _inf_where(kl, p.total_count > q.total_count)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log() - (4 * p.scale * q.scale).log()


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - trainrun.log1p(-q.probs) / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ratio, q_loc, p_loc = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    return (-ratio.log() - q_loc + p_loc + ratio * _EULER + trainrun.exp(q_loc + (1 + ratio).lgamma() - p_loc)
            - (1 + _EULER))


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)  # (the two normals' KL, both centred at 0)
    return 0.5 * (var_ratio - 1 - var_ratio.log())


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio, distance = p.scale / q.scale, (p.loc - q.loc).abs()
    return -ratio.log() + distance / q.scale + ratio * trainrun.exp(-distance / p.scale) - 1


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * (p.scale / q.scale).log() - alpha_ratio.log() + alpha_ratio - 1
    return _inf_where(result, p.scale < q.scale)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError("KL between transformed distributions needs the same transforms and event shape")
    return kl_divergence(p.base_dist, q.base_dist)


def _gaussian_kl(p, q):
    """KL of two multivariate normals from their covariances: 0.5 (tr(Sq^-1 Sp) + d^T Sq^-1 d - k + log|Sq| -
    log|Sp|), through Sq's Cholesky factor."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")
    k = p.event_shape[0]
    lq = trainrun.linalg.cholesky(q.covariance_matrix)
    lp = trainrun.linalg.cholesky(p.covariance_matrix)
    between = trainrun.linalg.solve_triangular(lq, lp, upper=False)
    diff = trainrun.linalg.solve_triangular(lq, (q.loc - p.loc).unsqueeze(-1), upper=False).squeeze(-1)
    half_log_det = (lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - lp.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    return half_log_det + 0.5 * (between.pow(2).sum(dim=(-2, -1)) + diff.pow(2).sum(-1) - k)


register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)(_gaussian_kl)
register_kl(LowRankMultivariateNormal, MultivariateNormal)(_gaussian_kl)
register_kl(MultivariateNormal, LowRankMultivariateNormal)(_gaussian_kl)


# ---- infinite: q is zero on part of p's support --------------------------------------------------------------------
def _register_infinite(p_type, parameter, q_types):
    def infinite(p, q):
        return _infinite_like(getattr(p, parameter))
    for q_type in q_types:
        register_kl(p_type, q_type)(infinite)


_register_infinite(Beta, "concentration1", [Pareto])
_register_infinite(Exponential, "rate", [Beta, Pareto, Uniform])
_register_infinite(Gamma, "concentration", [Beta, Pareto, Uniform])
_register_infinite(Gumbel, "loc", [Beta, Exponential, Gamma, Pareto, Uniform])
_register_infinite(Laplace, "loc", [Beta, Exponential, Gamma, Pareto, Uniform])
_register_infinite(Normal, "loc", [Beta, Exponential, Gamma, Pareto, Uniform])
_register_infinite(Pareto, "scale", [Beta, Uniform])
_register_infinite(Poisson, "rate", [Bernoulli, Binomial])


# ---- cross family, closed forms ------------------------------------------------------------------------------------
@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


def _beta_mean(p):
    return p.concentration1 / (p.concentration1 + p.concentration0)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * _beta_mean(p)


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    total = p.concentration1 + p.concentration0
    return (-p.entropy() + q.concentration.lgamma() - q.concentration * q.rate.log()
            - (q.concentration - 1) * (p.concentration1.digamma() - total.digamma()) + q.rate * _beta_mean(p))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    mean, var = _beta_mean(p), q.scale.pow(2)
    second_moment = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1) + mean.pow(2)
    return (-p.entropy() + 0.5 * (var * 2 * math.pi).log()
            + (0.5 * second_moment - q.loc * mean + 0.5 * q.loc.pow(2)) / var)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    return _inf_where(-p.entropy() + (q.high - q.low).log(), (q.low > 0) | (q.high < 1))


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    return (-q.concentration * ratio.log() + ratio + q.concentration.lgamma() + q.concentration * _EULER
            - (1 + _EULER))


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    product, loc_ratio = p.rate * q.scale, q.loc / q.scale
    return (product.log() - 1 - loc_ratio + trainrun.exp(loc_ratio) * product / (product + 1)
            + product.reciprocal())


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var, rate2 = q.scale.pow(2), p.rate.pow(2)
    return (0.5 * (rate2 * var * 2 * math.pi).log() - 1
            + (rate2.reciprocal() - q.loc / p.rate + 0.5 * q.loc.pow(2)) / var)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    a, product, loc_ratio = p.concentration, p.rate * q.scale, q.loc / q.scale
    return ((a - 1) * a.digamma() - a.lgamma() - a + product.log() + a / product
            + trainrun.exp(loc_ratio) * (1 + product.reciprocal()).pow(-a) - loc_ratio)


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    a, var, rate2 = p.concentration, q.scale.pow(2), p.rate.pow(2)
    return (0.5 * (rate2 * var * 2 * math.pi).log() - a - a.lgamma() + (a - 1) * a.digamma()
            + (0.5 * (a.pow(2) + a) / rate2 - q.loc * a / p.rate + 0.5 * q.loc.pow(2)) / var)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    return (-(ratio / math.sqrt(2 * math.pi)).log() + (math.pi * ratio * 0.5).pow(2) / 3
            + ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5 - (_EULER + 1))


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var = q.scale.pow(2)
    ratio = p.scale.pow(2) / var
    return (-0.5 * (2 * ratio / math.pi).log() + ratio
            + (0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)) / var - 1)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_ratio, var_ratio, loc_ratio = p.loc / q.scale, (p.scale / q.scale).pow(2), q.loc / q.scale
    return (-0.5 * var_ratio.log() + mean_ratio - loc_ratio
            + trainrun.exp(-mean_ratio + 0.5 * var_ratio + loc_ratio) - 0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    diff = p.loc - q.loc
    standardized = diff / p.scale
    return (-(p.scale / q.scale).log()
            + (math.sqrt(2 / math.pi) * p.scale * trainrun.exp(-0.5 * standardized.pow(2))
               + diff * trainrun.erf(math.sqrt(0.5) * standardized)) / q.scale
            - 0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    product = p.scale * q.rate
    result = (p.alpha / product).log() - p.alpha.reciprocal() + p.alpha * product / (p.alpha - 1) - 1
    return _inf_where(result, p.alpha <= 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()
    result = (p.alpha.log() - common + q.concentration.lgamma() - q.concentration * q.rate.log()
              + (1 - q.concentration) * common + q.rate * p.alpha * p.scale / (p.alpha - 1) - 1)
    return _inf_where(result, p.alpha <= 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var2 = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    result = ((math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log() - p.alpha.reciprocal()
              + (p.alpha * common.pow(2) / (p.alpha - 2) + (p.alpha * common - q.loc).pow(2)) / var2 - 1)
    return _inf_where(result, p.alpha <= 2)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    result = ((q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
              + q.concentration1.lgamma() + q.concentration0.lgamma()
              - (q.concentration1 + q.concentration0).lgamma() - width.log()
              - (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width)
    return _inf_where(result, (p.high > 1) | (p.low < 0))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _inf_where(result, p.low < 0)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    result = (-width.log() + q.concentration.lgamma() - q.concentration * q.rate.log()
              + (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
              + q.rate * (p.high + p.low) / 2)
    return _inf_where(result, p.low < 0)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common = q.scale / (p.high - p.low)
    high, low = (p.high - q.loc) / q.scale, (p.low - q.loc) / q.scale
    return common.log() + 0.5 * (high + low) - common * (trainrun.exp(-high) - trainrun.exp(-low))


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    return ((math.sqrt(math.pi * 2) * q.scale / width).log()
            + 0.5 * (width.pow(2) / 12 + ((p.high + p.low - 2 * q.loc) / 2).pow(2)) / q.scale.pow(2))


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    result = ((_x_log_x(p.high) - _x_log_x(p.low) - width) / width * (q.alpha + 1)
              - (q.alpha * q.scale.pow(q.alpha) * width).log())
    return _inf_where(result, p.low < q.scale)


__all__ = ["_KL_REGISTRY"]
