"""torch.distributions.HalfNormal(scale): |X| for X ~ Normal(0, scale)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all


class HalfNormal(Distribution):
    has_rsample = True
    arg_constraints = {"scale": "positive"}
    support = "nonnegative"

    def __init__(self, scale, validate_args=None):
        self.scale, = broadcast_all(scale)
        super().__init__(self.scale.shape, Size(), validate_args)
        self._check_parameter("scale", self.scale > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return trainrun.zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        return (trainrun.randn(tuple(shape), dtype=self.scale.dtype, device=self.scale.device) * self.scale).abs()

    def log_prob(self, value):
        self._check_sample(value)
        log_prob = -(value ** 2) / (2 * self.scale ** 2) - self.scale.log() - 0.5 * math.log(2 * math.pi) + \
            math.log(2)
        return trainrun.where(value >= 0, log_prob, trainrun.full_like(log_prob, -math.inf))

    def cdf(self, value):
        return trainrun.erf(value / (self.scale * math.sqrt(2)))

    def icdf(self, prob):
        return self.scale * math.sqrt(2) * trainrun.erfinv(prob)

    def entropy(self):
        return 0.5 * (math.pi * self.scale.pow(2) / 2).log() + 0.5
