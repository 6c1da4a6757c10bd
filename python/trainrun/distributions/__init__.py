"""torch.distributions: the families training code uses most (policy heads, VAEs, noise, priors), with PyTorch's
shapes (batch_shape, event_shape), sampling (rsample: reparameterized, gradients flow to the parameters; the
gamma-based families sample only), log_prob, entropy, moments, and kl_divergence in closed form. Each family is
its own file."""
from trainrun.distributions.bernoulli import Bernoulli
from trainrun.distributions.beta import Beta
from trainrun.distributions.binomial import Binomial
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.dirichlet import Dirichlet
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.exponential import Exponential
from trainrun.distributions.gamma import Gamma
from trainrun.distributions.independent import Independent
from trainrun.distributions.kl import kl_divergence, register_kl
from trainrun.distributions.laplace import Laplace
from trainrun.distributions.log_normal import LogNormal
from trainrun.distributions.multivariate_normal import MultivariateNormal
from trainrun.distributions.normal import Normal
from trainrun.distributions.one_hot_categorical import OneHotCategorical
from trainrun.distributions.poisson import Poisson
from trainrun.distributions.transformed_distribution import TransformedDistribution
from trainrun.distributions.uniform import Uniform
from trainrun.distributions import transforms  # noqa: F401

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Dirichlet", "Distribution", "Exponential", "Gamma",
           "Independent", "Laplace", "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson",
           "TransformedDistribution", "Uniform", "kl_divergence", "register_kl"]
