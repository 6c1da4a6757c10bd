"""torch.distributions.NegativeBinomial(total_count, probs=None, logits=None): the number of successes before
total_count failures, success probability probs. Draws are Poisson(Gamma(total_count, (1 - p) / p))."""
import trainrun
from trainrun import Size
from trainrun.distributions._probs_or_logits import probs_and_logits
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.gamma import standard_gamma
from trainrun.nn import functional as F


class NegativeBinomial(Distribution):
    arg_constraints = {"total_count": "nonnegative", "probs": "unit_interval", "logits": "real"}
    support = "nonnegative_integer"

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        self.probs, self.logits, self.total_count = probs_and_logits(probs, logits, total_count)
        self.total_count = self.total_count.to(self.logits.dtype)
        super().__init__(self.logits.shape, Size(), validate_args)
        self._check_parameter("total_count", self.total_count >= 0, "GreaterThanEq(lower_bound=0.0)")

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with trainrun.no_grad():
            rates = standard_gamma(self.total_count, shape) * self.logits.exp()
            return trainrun.poisson(rates)

    def log_prob(self, value):
        self._check_sample(value)
        n = self.total_count
        unnormalized = n * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        normalization = -trainrun.lgamma(n + value) + trainrun.lgamma(1.0 + value) + trainrun.lgamma(n)
        normalization = trainrun.where(n + value == 0.0, trainrun.zeros_like(normalization), normalization)
        return unnormalized - normalization
