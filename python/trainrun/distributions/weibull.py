"""torch.distributions.Weibull(scale, concentration) and Pareto(scale, alpha)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all

_EULER_GAMMA = 0.57721566490153286060


def _standard_exponential(shape, like):
    return trainrun.empty(list(shape), dtype=like.dtype, device=like.device).exponential_()


class Weibull(Distribution):
    has_rsample = True
    arg_constraints = {"scale": "positive", "concentration": "positive"}
    support = "positive"

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        super().__init__(self.scale.shape, Size(), validate_args)
        self._check_parameter("scale", self.scale > 0, "GreaterThan(lower_bound=0.0)")
        self._check_parameter("concentration", self.concentration > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self):
        return self.scale * trainrun.lgamma(1 + self.concentration.reciprocal()).exp()

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()  # (NaN for k < 1, as PyTorch's)

    @property
    def variance(self):
        k = self.concentration
        return self.scale.pow(2) * (trainrun.lgamma(1 + 2 / k).exp() - trainrun.lgamma(1 + 1 / k).exp().pow(2))

    def rsample(self, sample_shape=Size()):
        draws = _standard_exponential(self._extended_shape(sample_shape), self.scale)
        return self.scale * draws.pow(self.concentration.reciprocal())

    def log_prob(self, value):
        self._check_sample(value)
        k, lam = self.concentration, self.scale
        z = value / lam
        return (k / lam).log() + (k - 1) * z.log() - z.pow(k)

    def cdf(self, value):
        return 1 - (-(value / self.scale).pow(self.concentration)).exp()

    def icdf(self, value):
        return self.scale * (-(-value).log1p()).pow(self.concentration.reciprocal())

    def entropy(self):
        k = self.concentration
        return _EULER_GAMMA * (1 - k.reciprocal()) + (self.scale / k).log() + 1


class Pareto(Distribution):
    has_rsample = True
    arg_constraints = {"alpha": "positive", "scale": "positive"}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(self.scale.shape, Size(), validate_args)
        self._check_parameter("scale", self.scale > 0, "GreaterThan(lower_bound=0.0)")
        self._check_parameter("alpha", self.alpha > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def support(self):
        from trainrun.distributions import constraints
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return trainrun.where(self.alpha > 1, a * self.scale / (a - 1).clamp(min=1e-30),
                              trainrun.full_like(self.alpha, math.inf))

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        finite = self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2).clamp(min=1e-30))
        return trainrun.where(self.alpha > 2, finite, trainrun.full_like(self.alpha, math.inf))

    def rsample(self, sample_shape=Size()):
        draws = _standard_exponential(self._extended_shape(sample_shape), self.scale)
        return self.scale * (draws / self.alpha).exp()

    def log_prob(self, value):
        self._check_sample(value)
        return self.alpha.log() + self.alpha * self.scale.log() - (self.alpha + 1) * value.log()

    def cdf(self, value):
        return 1 - (self.scale / value).pow(self.alpha)

    def icdf(self, value):
        return self.scale / (1 - value).pow(self.alpha.reciprocal())

    def entropy(self):
        return (self.scale / self.alpha).log() + self.alpha.reciprocal() + 1
