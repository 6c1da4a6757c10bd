"""torch.distributions.kl_divergence(p, q) and register_kl: KL(p || q) in closed form for the pairs registered
(Normal, Categorical, Bernoulli, Uniform, and Independent over a registered pair)."""
import math

import trainrun
from trainrun.distributions.bernoulli import Bernoulli
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.independent import Independent, _sum_rightmost
from trainrun.distributions.normal import Normal
from trainrun.distributions.uniform import Uniform

_KL_REGISTRY = {}


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p || q) for p of type_p and q of type_q (subclasses match too; the most
    specific registered pair wins)."""
    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def _lookup(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None
    best = min(matches, key=lambda pq: (type_p.__mro__.index(pq[0]), type_q.__mro__.index(pq[1])))
    return _KL_REGISTRY[best]


def kl_divergence(p, q):
    fn = _lookup(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fn(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill((q.probs == 0).expand_as(t), float("inf"))
    t = t.masked_fill((p.probs == 0).expand_as(t), 0.0)
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    sp = trainrun.nn.functional.softplus
    t1 = p.probs * (sp(-q.logits) - sp(-p.logits))
    t1 = t1.masked_fill(q.probs == 0, float("inf")).masked_fill(p.probs == 0, 0.0)
    t2 = (1 - p.probs) * (sp(q.logits) - sp(p.logits))
    t2 = t2.masked_fill(q.probs == 1, float("inf")).masked_fill(p.probs == 1, 0.0)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return result.masked_fill((q.low > p.low) | (q.high < p.high), math.inf)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


# ---- the families of exponential.py, gamma.py, beta.py, dirichlet.py, poisson.py, multivariate_normal.py ----
from trainrun.distributions.beta import Beta  # noqa: E402
from trainrun.distributions.dirichlet import Dirichlet  # noqa: E402
from trainrun.distributions.exponential import Exponential  # noqa: E402
from trainrun.distributions.gamma import Gamma  # noqa: E402
from trainrun.distributions.multivariate_normal import MultivariateNormal  # noqa: E402
from trainrun.distributions.poisson import Poisson  # noqa: E402


@register_kl(Exponential, Exponential)
def _kl_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - trainrun.log(ratio)


@register_kl(Gamma, Gamma)
def _kl_gamma(p, q):
    ap, bp, aq, bq = p.concentration, p.rate, q.concentration, q.rate
    return ((ap - aq) * trainrun.digamma(ap) - trainrun.lgamma(ap) + trainrun.lgamma(aq) +
            aq * (trainrun.log(bp) - trainrun.log(bq)) + ap * (bq - bp) / bp)


@register_kl(Beta, Beta)
def _kl_beta(p, q):
    a1p, a0p, a1q, a0q = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    sum_p, sum_q = a1p + a0p, a1q + a0q
    lg, dg = trainrun.lgamma, trainrun.digamma
    return (lg(a1q) + lg(a0q) + lg(sum_p) - lg(a1p) - lg(a0p) - lg(sum_q) + (a1p - a1q) * dg(a1p) +
            (a0p - a0q) * dg(a0p) + (sum_q - sum_p) * dg(sum_p))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet(p, q):
    cp, cq = p.concentration, q.concentration
    sum_p, sum_q = cp.sum(dim=-1), cq.sum(dim=-1)
    t1 = trainrun.lgamma(sum_p) - trainrun.lgamma(sum_q)
    t2 = (trainrun.lgamma(cp) - trainrun.lgamma(cq)).sum(dim=-1)
    return t1 - t2 + ((cp - cq) * (trainrun.digamma(cp) - trainrun.digamma(sum_p).unsqueeze(-1))).sum(dim=-1)


@register_kl(Poisson, Poisson)
def _kl_poisson(p, q):
    return p.rate * (trainrun.log(p.rate) - trainrun.log(q.rate)) - (p.rate - q.rate)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariate_normal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    k = p.event_shape[0]
    between = trainrun.linalg.solve(q.scale_tril, p.scale_tril)  # Lq^-1 Lp
    diff = trainrun.linalg.solve(q.scale_tril, (q.loc - p.loc).unsqueeze(-1)).squeeze(-1)
    return (q._half_log_det() - p._half_log_det() +
            0.5 * (between.pow(2).sum(dim=(-2, -1)) + diff.pow(2).sum(dim=-1) - k))


from trainrun.distributions.exp_family import ExponentialFamily  # noqa: E402


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """Two members of one exponential family: the Bregman divergence of the log normalizer F,
    F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    p_params = [t.detach().requires_grad_() for t in p._natural_params]
    q_params = q._natural_params
    with trainrun.enable_grad():
        p_normalizer = p._log_normalizer(*p_params)
        grads = trainrun.autograd.grad(p_normalizer.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - p_normalizer
    for pp, qp, g in zip(p_params, q_params, grads):
        result = result - _sum_rightmost((qp - pp) * g, len(q.event_shape))
    return result
