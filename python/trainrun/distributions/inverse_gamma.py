"""torch.distributions.InverseGamma(concentration, rate): 1 / X for X ~ Gamma(concentration, rate)."""
import math

import trainrun
from trainrun.distributions.gamma import Gamma
from trainrun.distributions.transformed_distribution import TransformedDistribution
from trainrun.distributions.transforms import PowerTransform


class InverseGamma(TransformedDistribution):
    arg_constraints = {"concentration": "positive", "rate": "positive"}
    support = "positive"
    has_rsample = True  # (the base Gamma's implicit-reparameterization draws, inverted)

    def __init__(self, concentration, rate, validate_args=None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        super().__init__(base, PowerTransform(-base.rate.new_ones(())), validate_args)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        a = self.concentration
        return trainrun.where(a > 1, self.rate / (a - 1).clamp(min=1e-30), trainrun.full_like(a, math.inf))

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        a = self.concentration
        finite = self.rate.pow(2) / ((a - 1).pow(2) * (a - 2).clamp(min=1e-30))
        return trainrun.where(a > 2, finite, trainrun.full_like(a, math.inf))

    def entropy(self):
        a = self.concentration
        return a + self.rate.log() + trainrun.lgamma(a) - (1 + a) * trainrun.digamma(a)
