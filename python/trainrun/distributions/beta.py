"""torch.distributions.Beta(concentration1, concentration0): X / (X + Y) of two standard gamma draws."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.distributions.exp_family import ExponentialFamily
from trainrun.distributions.gamma import standard_gamma, standard_gamma_rsample


def _log_beta(a, b):
    return trainrun.lgamma(a) + trainrun.lgamma(b) - trainrun.lgamma(a + b)


class Beta(ExponentialFamily):
    # The exponential-family form (exp_family.py): natural parameters and log normalizer (its entropy is its own).
    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return trainrun.lgamma(x) + trainrun.lgamma(y) - trainrun.lgamma(x + y)


    arg_constraints = {"concentration1": "positive", "concentration0": "positive"}
    support = "unit_interval"

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, Size(), validate_args)
        self._check_parameter("concentration1", self.concentration1 > 0, "GreaterThan(lower_bound=0.0)")
        self._check_parameter("concentration0", self.concentration0 > 0, "GreaterThan(lower_bound=0.0)")

    def _support_ok(self, value):
        return (value >= 0) & (value <= 1)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return (self.concentration1 - 1) / (self.concentration1 + self.concentration0 - 2)

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        x, y = standard_gamma(self.concentration1, shape), standard_gamma(self.concentration0, shape)
        return x / (x + y)

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        """x / (x + y) of gamma draws, differentiable in both concentrations (implicit gradients)."""
        shape = self._extended_shape(sample_shape)
        x, y = standard_gamma_rsample(self.concentration1, shape), standard_gamma_rsample(self.concentration0, shape)
        return x / (x + y)

    def log_prob(self, value):
        self._check_sample(value)
        a, b = self.concentration1, self.concentration0
        return trainrun.xlogy(a - 1, value) + trainrun.special.xlog1py(b - 1, -value) - _log_beta(a, b)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        return (_log_beta(a, b) - (a - 1) * trainrun.digamma(a) - (b - 1) * trainrun.digamma(b) +
                (total - 2) * trainrun.digamma(total))
