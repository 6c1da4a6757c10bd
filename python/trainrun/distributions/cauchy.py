"""torch.distributions.Cauchy(loc, scale) and HalfCauchy(scale)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, LocScale, broadcast_all


class Cauchy(LocScale):
    has_rsample = True
    support = "real"

    @property
    def mean(self):
        return trainrun.full_like(self.loc, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return trainrun.full_like(self.loc, math.inf)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = trainrun.rand(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * trainrun.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        self._check_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        return trainrun.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return trainrun.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class HalfCauchy(Distribution):
    has_rsample = True
    arg_constraints = {"scale": "positive"}
    support = "nonnegative"

    def __init__(self, scale, validate_args=None):
        self.scale, = broadcast_all(scale)
        self._base = Cauchy(trainrun.zeros_like(self.scale), self.scale, validate_args=False)
        super().__init__(self.scale.shape, Size(), validate_args)
        self._check_parameter("scale", self.scale > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self):
        return trainrun.full_like(self.scale, math.inf)

    @property
    def mode(self):
        return trainrun.zeros_like(self.scale)

    @property
    def variance(self):
        return trainrun.full_like(self.scale, math.inf)

    def rsample(self, sample_shape=Size()):
        return self._base.rsample(sample_shape).abs()

    def log_prob(self, value):
        self._check_sample(value)
        log_prob = self._base.log_prob(value) + math.log(2)
        return trainrun.where(value >= 0, log_prob, trainrun.full_like(log_prob, -math.inf))

    def cdf(self, value):
        return 2 * self._base.cdf(value) - 1

    def icdf(self, prob):
        return self._base.icdf((prob + 1) / 2)

    def entropy(self):
        return self._base.entropy() - math.log(2)
