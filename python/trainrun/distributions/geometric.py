"""torch.distributions.Geometric(probs=None, logits=None): the number of failures before the first success."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions._probs_or_logits import probs_and_logits
from trainrun.distributions.distribution import Distribution
from trainrun.nn import functional as F


class Geometric(Distribution):
    arg_constraints = {"probs": "unit_interval", "logits": "real"}
    support = "nonnegative_integer"

    def __init__(self, probs=None, logits=None, validate_args=None):
        self.probs, self.logits = probs_and_logits(probs, logits)
        super().__init__(self.probs.shape, Size(), validate_args)
        if probs is not None:
            self._check_parameter("probs", (self.probs > 0) & (self.probs <= 1), "Interval(lower_bound=0.0, "
                                  "upper_bound=1.0)")

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return trainrun.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with trainrun.no_grad():
            tiny = trainrun.finfo(self.probs.dtype).tiny
            u = trainrun.rand(tuple(shape), dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs.expand(shape)).log1p()).floor()

    def log_prob(self, value):
        self._check_sample(value)
        value, probs = trainrun.broadcast_tensors(value.to(self.probs.dtype), self.probs)
        failures = trainrun.where((probs == 1) & (value == 0), trainrun.zeros_like(value), value * (-probs).log1p())
        return failures + probs.log()

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
