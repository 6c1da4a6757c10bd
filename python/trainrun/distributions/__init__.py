"""torch.distributions: the families training code uses most (policy heads, VAEs, noise), with PyTorch's shapes
(batch_shape, event_shape), sampling (rsample: reparameterized, gradients flow to the parameters), log_prob,
entropy, moments, and kl_divergence in closed form. Each family is its own file."""
from trainrun.distributions.bernoulli import Bernoulli
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.independent import Independent
from trainrun.distributions.kl import kl_divergence, register_kl
from trainrun.distributions.normal import Normal
from trainrun.distributions.uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "Normal", "Uniform", "kl_divergence",
           "register_kl"]
