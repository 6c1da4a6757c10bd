"""torch.distributions.Kumaraswamy(concentration1, concentration0): on [0, 1], density a b x^(a-1) (1 - x^a)^(b-1)
(a Beta-like family whose CDF has a closed form, so draws are reparameterized: (1 - (1 - u)^(1/b))^(1/a))."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.distributions.utils import euler_constant


def _moments(a, b, n):
    """E[X^n] = b B(1 + n/a, b)."""
    arg = 1 + n / a
    return b * trainrun.exp(trainrun.lgamma(arg) + trainrun.lgamma(b) - trainrun.lgamma(arg + b))


class Kumaraswamy(Distribution):
    arg_constraints = {"concentration1": "positive", "concentration0": "positive"}
    support = "unit_interval"
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, Size(), validate_args)
        self._check_parameter("concentration1", self.concentration1 > 0, "GreaterThan(lower_bound=0.0)")
        self._check_parameter("concentration0", self.concentration0 > 0, "GreaterThan(lower_bound=0.0)")

    def _support_ok(self, value):
        return (value >= 0) & (value <= 1)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return log_mode.exp().masked_fill((b < 1) | (a < 1), float("nan"))

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        finfo = trainrun.finfo(self.concentration1.dtype)
        u = trainrun.rand(tuple(shape), dtype=self.concentration1.dtype).clamp(min=finfo.tiny, max=1 - finfo.eps)
        return (1 - u.pow(self.concentration0.reciprocal())).pow(self.concentration1.reciprocal())

    def cdf(self, value):
        self._check_sample(value)
        return 1 - (1 - value.pow(self.concentration1)).pow(self.concentration0)

    def icdf(self, value):
        return (1 - (1 - value).pow(self.concentration0.reciprocal())).pow(self.concentration1.reciprocal())

    def log_prob(self, value):
        self._check_sample(value)
        a, b = self.concentration1, self.concentration0
        return a.log() + b.log() + (a - 1) * value.log() + (b - 1) * trainrun.log1p(-value.pow(a))

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        harmonic = trainrun.digamma(b + 1) + euler_constant
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic - a.log() - b.log()
