"""torch.distributions.LogNormal(loc, scale): exp of a Normal(loc, scale) draw."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import LocScale


class LogNormal(LocScale):
    has_rsample = True
    support = "positive"

    def _support_ok(self, value):
        return value > 0

    @property
    def mean(self):
        return trainrun.exp(self.loc + self.scale.pow(2) / 2)

    @property
    def mode(self):
        return trainrun.exp(self.loc - self.scale.pow(2))

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return trainrun.expm1(s2) * trainrun.exp(2 * self.loc + s2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = trainrun.randn(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return trainrun.exp(self.loc + eps * self.scale)

    def cdf(self, value):
        self._check_sample(value)
        return 0.5 * (1 + trainrun.erf((trainrun.log(value) - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return trainrun.exp(self.loc + self.scale * trainrun.erfinv(2 * value - 1) * math.sqrt(2))

    def log_prob(self, value):
        self._check_sample(value)
        log_value = trainrun.log(value)
        return (-((log_value - self.loc) ** 2) / (2 * self.scale ** 2) - self.scale.log() -
                math.log(math.sqrt(2 * math.pi)) - log_value)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log() + self.loc
