"""torch.distributions.FisherSnedecor(df1, df2): the F distribution, (X1 / df1) / (X2 / df2) of two chi-square
draws (here the ratio of Gamma(df/2, df/2) draws)."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.distributions.gamma import standard_gamma, standard_gamma_rsample


class FisherSnedecor(Distribution):
    arg_constraints = {"df1": "positive", "df2": "positive"}
    support = "positive"

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        super().__init__(self.df1.shape, Size(), validate_args)
        self._check_parameter("df1", self.df1 > 0, "GreaterThan(lower_bound=0.0)")
        self._check_parameter("df2", self.df2 > 0, "GreaterThan(lower_bound=0.0)")

    def _support_ok(self, value):
        return value > 0

    @property
    def mean(self):
        df2 = self.df2.clone()
        return (df2 / (df2 - 2)).masked_fill(df2 <= 2, float("nan"))

    @property
    def mode(self):
        return ((self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)).masked_fill(self.df1 <= 2, float("nan"))

    @property
    def variance(self):
        df1, df2 = self.df1, self.df2
        value = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return value.masked_fill(df2 <= 4, float("nan"))

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with trainrun.no_grad():
            x1 = standard_gamma(0.5 * self.df1, shape) / (0.5 * self.df1)
            x2 = standard_gamma(0.5 * self.df2, shape) / (0.5 * self.df2)
            tiny = trainrun.finfo(x2.dtype).tiny
            return (x1 / x2).clamp(min=tiny)

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        """The ratio of scaled gamma draws, differentiable in both degrees of freedom (implicit gradients)."""
        shape = self._extended_shape(sample_shape)
        x1 = standard_gamma_rsample(0.5 * self.df1, shape) / (0.5 * self.df1)
        x2 = standard_gamma_rsample(0.5 * self.df2, shape) / (0.5 * self.df2)
        return (x1 / x2).clamp(min=trainrun.finfo(x2.dtype).tiny)

    def log_prob(self, value):
        self._check_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        t1 = trainrun.lgamma(half1 + half2) - trainrun.lgamma(half1) - trainrun.lgamma(half2)
        t2 = half1 * ratio.log() + (half1 - 1) * value.log()
        t3 = (half1 + half2) * trainrun.log1p(ratio * value)
        return t1 + t2 - t3
