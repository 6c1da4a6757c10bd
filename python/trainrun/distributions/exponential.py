"""torch.distributions.Exponential(rate)."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.distributions.exp_family import ExponentialFamily


class Exponential(ExponentialFamily):
    # The exponential-family form (exp_family.py): natural parameters, log normalizer, E[k(x)].
    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -trainrun.log(-x)

    _mean_carrier_measure = 0

    has_rsample = True
    arg_constraints = {"rate": "positive"}
    support = "nonnegative"

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(rate)
        super().__init__(self.rate.shape, Size(), validate_args)
        self._check_parameter("rate", self.rate > 0, "GreaterThan(lower_bound=0.0)")

    def _support_ok(self, value):
        return value >= 0

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return trainrun.zeros_like(self.rate)

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        draws = trainrun.empty(list(shape), dtype=self.rate.dtype, device=self.rate.device).exponential_()
        return draws / self.rate

    def log_prob(self, value):
        self._check_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        return 1 - trainrun.exp(-self.rate * value)

    def icdf(self, value):
        return -trainrun.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()
