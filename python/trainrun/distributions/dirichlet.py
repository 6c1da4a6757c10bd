"""torch.distributions.Dirichlet(concentration): standard gamma draws normalized over the last dim (the
event)."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.exp_family import ExponentialFamily
from trainrun.distributions.gamma import standard_gamma, standard_gamma_rsample


class Dirichlet(ExponentialFamily):
    # The exponential-family form (exp_family.py): natural parameters and log normalizer (its entropy is its own).
    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return trainrun.lgamma(x).sum(-1) - trainrun.lgamma(x.sum(-1))


    arg_constraints = {"concentration": "independent(positive, 1)"}
    support = "simplex"

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args)
        self._check_parameter("concentration", concentration > 0, "IndependentConstraint(GreaterThan("
                                                                  "lower_bound=0.0), 1)")

    def _support_ok(self, value):
        ok = (value >= 0).all(dim=-1) & ((value.sum(dim=-1) - 1).abs() < 1e-6 * value.shape[-1] + 1e-6)
        return ok

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(dim=-1, keepdim=True)

    @property
    def mode(self):
        shifted = (self.concentration - 1).clamp(min=0)
        return shifted / shifted.sum(dim=-1, keepdim=True)

    @property
    def variance(self):
        total = self.concentration.sum(dim=-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=Size()):
        draws = standard_gamma(self.concentration, self._extended_shape(sample_shape))
        return draws / draws.sum(dim=-1, keepdim=True)

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        """Normalized gamma draws, differentiable in the concentration (each gamma's implicit gradient)."""
        draws = standard_gamma_rsample(self.concentration, self._extended_shape(sample_shape))
        return draws / draws.sum(dim=-1, keepdim=True)

    def log_prob(self, value):
        self._check_sample(value)
        c = self.concentration
        return (trainrun.xlogy(c - 1, value).sum(dim=-1) + trainrun.lgamma(c.sum(dim=-1)) -
                trainrun.lgamma(c).sum(dim=-1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(dim=-1)
        return (trainrun.lgamma(c).sum(dim=-1) - trainrun.lgamma(total) + (total - k) * trainrun.digamma(total) -
                ((c - 1) * trainrun.digamma(c)).sum(dim=-1))
