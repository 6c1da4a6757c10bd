"""torch.distributions.Laplace(loc, scale)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import LocScale


class Laplace(LocScale):
    has_rsample = True
    support = "real"

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        tiny = trainrun.finfo(self.loc.dtype).eps
        u = trainrun.rand(tuple(shape), dtype=self.loc.dtype, device=self.loc.device) * (2 - 2 * tiny) - (1 - tiny)
        return self.loc - self.scale * u.sign() * trainrun.log1p(-u.abs())

    def log_prob(self, value):
        self._check_sample(value)
        return -trainrun.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        return 0.5 - 0.5 * (value - self.loc).sign() * trainrun.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * trainrun.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + trainrun.log(2 * self.scale)
