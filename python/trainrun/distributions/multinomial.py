"""torch.distributions.Multinomial(total_count=1, probs=None, logits=None): counts of total_count categorical
draws over the last dim."""
import trainrun
from trainrun import Size
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.distribution import Distribution


class Multinomial(Distribution):
    arg_constraints = {"probs": "simplex", "logits": "real_vector"}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits, validate_args=validate_args)
        shape = self._categorical.probs.shape
        super().__init__(shape[:-1], shape[-1:], validate_args)

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def support(self):
        from trainrun.distributions import constraints
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        sample_shape = Size(sample_shape)
        draws = self._categorical.sample(Size((self.total_count,) + tuple(sample_shape)))  # [n, sample, batch]
        k = self._event_shape[0]
        counts = trainrun.nn.functional.one_hot(draws.long(), k).to(self.probs.dtype).sum(0)
        return counts

    def log_prob(self, value):
        self._check_sample(value)
        logits, value = trainrun.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        log_factorial_n = trainrun.lgamma(value.sum(-1) + 1)
        log_factorial_xs = trainrun.lgamma(value + 1).sum(-1)
        terms = trainrun.where(value == 0, trainrun.zeros_like(value), value * logits)
        return log_factorial_n - log_factorial_xs + terms.sum(-1)

    def entropy(self):
        n = self.total_count
        support = trainrun.arange(n + 1, dtype=self.probs.dtype)
        binomial = trainrun.distributions.Binomial(n, self.probs)
        counts = support.reshape([-1] + [1] * self.probs.dim())
        weights = binomial.log_prob(counts.expand((n + 1,) + tuple(self.probs.shape))).exp()
        return -trainrun.lgamma(trainrun.tensor(float(n + 1))) - (self.probs * self.logits).sum(-1) * n + \
            (weights * trainrun.lgamma(counts + 1)).sum([0, -1])
