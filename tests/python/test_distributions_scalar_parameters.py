"""Distributions with 0-dim (scalar) parameters, as `Normal(0.0, 1.0)` makes them: sample() and rsample() give a
0-dim draw and sample((3,)) a [3] one, for every family (the draws' shape () once reached randn(*()), which
takes no empty size; Poisson's 0-d draw was a plain int)."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402

D = torch.distributions
t = torch.tensor
FAMILIES = {
    "Normal": lambda: D.Normal(0.0, 1.0), "Cauchy": lambda: D.Cauchy(0.0, 1.0), "Laplace": lambda: D.Laplace(0.0, 1.0),
    "Gumbel": lambda: D.Gumbel(0.0, 1.0), "HalfNormal": lambda: D.HalfNormal(1.0),
    "LogNormal": lambda: D.LogNormal(0.0, 1.0), "Uniform": lambda: D.Uniform(0.0, 1.0),
    "Exponential": lambda: D.Exponential(t(1.0)), "Gamma": lambda: D.Gamma(t(2.0), t(1.0)),
    "Beta": lambda: D.Beta(t(2.0), t(3.0)), "StudentT": lambda: D.StudentT(t(3.0)), "Chi2": lambda: D.Chi2(t(3.0)),
    "Kumaraswamy": lambda: D.Kumaraswamy(t(2.0), t(3.0)), "ContinuousBernoulli": lambda: D.ContinuousBernoulli(t(0.3)),
    "Geometric": lambda: D.Geometric(t(0.3)), "Bernoulli": lambda: D.Bernoulli(t(0.3)), "Poisson": lambda: D.Poisson(t(2.0)),
    "RelaxedBernoulli": lambda: D.RelaxedBernoulli(t(0.5), t(0.3)),
    "FisherSnedecor": lambda: D.FisherSnedecor(t(4.0), t(6.0)), "VonMises": lambda: D.VonMises(t(0.3), t(2.0)),
    "Weibull": lambda: D.Weibull(t(1.0), t(2.0)), "Pareto": lambda: D.Pareto(t(1.0), t(3.0)),
    "HalfCauchy": lambda: D.HalfCauchy(t(1.0)), "Binomial": lambda: D.Binomial(5, t(0.3)),
    "NegativeBinomial": lambda: D.NegativeBinomial(5, t(0.3)), "InverseGamma": lambda: D.InverseGamma(t(3.0), t(2.0)),
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_scalar_parameters_sample_and_rsample(name):
    torch.manual_seed(0)
    dist = FAMILIES[name]()
    assert dist.batch_shape == () and dist.event_shape == ()
    for method in ("sample", "rsample") if dist.has_rsample else ("sample",):
        one, three = getattr(dist, method)(), getattr(dist, method)((3,))
        assert one.shape == () and three.shape == (3,), (method, one.shape, three.shape)
        assert bool(torch.isfinite(dist.log_prob(one))) or name in ("Pareto",)
