"""torch.distributions.Uniform(low, high): draws in [low, high)."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all


class Uniform(Distribution):
    has_rsample = True
    arg_constraints = {"low": "dependent", "high": "dependent"}

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, Size(), validate_args)
        self._check_parameter("low", self.low < self.high, "LessThan(upper_bound=high)")

    def _support_ok(self, value):
        return (self.low <= value) & (value < self.high)

    @property
    def support(self):
        from trainrun.distributions import constraints
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * float("nan")

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = trainrun.rand(tuple(shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        self._check_sample(value)
        inside = ((self.low <= value) & (value < self.high)).to(self.low.dtype)
        return trainrun.log(inside) - trainrun.log(self.high - self.low)  # (-inf outside)

    def cdf(self, value):
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return trainrun.log(self.high - self.low)
