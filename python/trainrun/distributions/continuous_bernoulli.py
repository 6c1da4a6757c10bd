"""torch.distributions.ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501)): on [0, 1], density
C(p) p^x (1 - p)^(1 - x) (the VAE likelihood for pixel intensities, Loaiza-Ganem & Cunningham 2019). Near
p = 1/2 the closed forms lose their digits, so within `lims` the normalizer, mean and variance are their Taylor
expansions, as PyTorch's."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions._probs_or_logits import probs_and_logits
from trainrun.distributions.exp_family import ExponentialFamily


class ContinuousBernoulli(ExponentialFamily):
    arg_constraints = {"probs": "unit_interval", "logits": "real"}
    support = "unit_interval"
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        self.probs, self.logits = probs_and_logits(probs, logits)
        self._lims = lims
        super().__init__(self.probs.shape, Size(), validate_args)
        if probs is not None:
            self._check_parameter("probs", (self.probs >= 0) & (self.probs <= 1), "Interval(lower_bound=0.0, "
                                  "upper_bound=1.0)")

    def _support_ok(self, value):
        return (value >= 0) & (value <= 1)

    _mean_carrier_measure = 0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return trainrun.where(self._outside_unstable_region(), self.probs,
                              trainrun.full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """log C(p): log(|log(1 - p) - log p| / |1 - 2p|), log 2 + (4/3 + 104/45 x) x near p = 1/2."""
        cut = self._cut_probs()
        below = trainrun.where(cut <= 0.5, cut, trainrun.zeros_like(cut))
        above = trainrun.where(cut >= 0.5, cut, trainrun.ones_like(cut))
        log_norm = trainrun.log(trainrun.abs(trainrun.log1p(-cut) - trainrun.log(cut))) - trainrun.where(
            cut <= 0.5, trainrun.log1p(-2.0 * below), trainrun.log(2.0 * above - 1.0))
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return trainrun.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        exact = cut / (2.0 * cut - 1.0) + 1.0 / (trainrun.log1p(-cut) - trainrun.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return trainrun.where(self._outside_unstable_region(), exact, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        cut = self._cut_probs()
        exact = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / (trainrun.log1p(-cut) - trainrun.log(cut)).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return trainrun.where(self._outside_unstable_region(), exact, taylor)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = trainrun.rand(tuple(shape), dtype=self.probs.dtype)
        return self.icdf(u)

    def log_prob(self, value):
        self._check_sample(value)
        logits, value = trainrun.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return (-trainrun.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")
                + self._cont_bern_log_norm())

    def cdf(self, value):
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = trainrun.where(self._outside_unstable_region(), cdfs, value)
        return trainrun.where(value <= 0.0, trainrun.zeros_like(value),
                              trainrun.where(value >= 1.0, trainrun.ones_like(value), unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        exact = ((trainrun.log1p(-cut + value * (2.0 * cut - 1.0)) - trainrun.log1p(-cut))
                 / (trainrun.log(cut) - trainrun.log1p(-cut)))
        return trainrun.where(self._outside_unstable_region(), exact, value)

    def entropy(self):
        log0, log1 = trainrun.log1p(-self.probs), trainrun.log(self.probs)
        return self.mean * (log0 - log1) - self._cont_bern_log_norm() - log0
