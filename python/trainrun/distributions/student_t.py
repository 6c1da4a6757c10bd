"""torch.distributions.StudentT(df, loc=0., scale=1.). Draws are Normal / sqrt(Chi2 / df) (sample only: the
chi-squared draw is a gamma draw, which carries no gradient here)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.distributions.gamma import standard_gamma, standard_gamma_rsample


class StudentT(Distribution):
    arg_constraints = {"df": "positive", "loc": "real", "scale": "positive"}
    support = "real"

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        super().__init__(self.df.shape, Size(), validate_args)
        self._check_parameter("df", self.df > 0, "GreaterThan(lower_bound=0.0)")
        self._check_parameter("scale", self.scale > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self):
        return trainrun.where(self.df > 1, self.loc, trainrun.full_like(self.loc, math.nan))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        finite = self.scale.pow(2) * self.df / (self.df - 2).clamp(min=1e-30)
        infinite = trainrun.full_like(self.df, math.inf)
        undefined = trainrun.full_like(self.df, math.nan)
        return trainrun.where(self.df > 2, finite, trainrun.where(self.df > 1, infinite, undefined))

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with trainrun.no_grad():
            x = trainrun.randn(tuple(shape), dtype=self.df.dtype, device=self.df.device)
            chi2 = 2 * standard_gamma(0.5 * self.df, shape)
            return self.loc + self.scale * x * (self.df / chi2).sqrt()

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        """loc + scale * z * sqrt(df / chi2): differentiable in loc, scale and df (the chi-square's implicit
        gradient)."""
        shape = self._extended_shape(sample_shape)
        x = trainrun.randn(tuple(shape), dtype=self.df.dtype, device=self.df.device)
        chi2 = 2 * standard_gamma_rsample(0.5 * self.df, shape)
        return self.loc + self.scale * x * (self.df / chi2).sqrt()

    def log_prob(self, value):
        self._check_sample(value)
        y = (value - self.loc) / self.scale
        z = self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + trainrun.lgamma(0.5 * self.df) - \
            trainrun.lgamma(0.5 * (self.df + 1.0))
        return -0.5 * (self.df + 1.0) * (y ** 2 / self.df).log1p() - z

    def entropy(self):
        lbeta = trainrun.lgamma(0.5 * self.df) + math.lgamma(0.5) - trainrun.lgamma(0.5 * (self.df + 1))
        return self.scale.log() + 0.5 * (self.df + 1) * (trainrun.digamma(0.5 * (self.df + 1)) -
                                                         trainrun.digamma(0.5 * self.df)) + \
            0.5 * self.df.log() + lbeta
