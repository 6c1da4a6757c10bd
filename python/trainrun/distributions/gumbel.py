"""torch.distributions.Gumbel(loc, scale): the maximum-value distribution (Gumbel-max sampling's noise)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import LocScale

_EULER_GAMMA = 0.57721566490153286060


class Gumbel(LocScale):
    has_rsample = True
    support = "real"

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        finfo = trainrun.finfo(self.loc.dtype)
        u = trainrun.rand(tuple(shape), dtype=self.loc.dtype, device=self.loc.device).clamp(min=finfo.tiny,
                                                                                      max=1 - finfo.eps)
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        self._check_sample(value)
        z = (value - self.loc) / self.scale
        return -(z + (-z).exp()) - self.scale.log()

    def cdf(self, value):
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)
