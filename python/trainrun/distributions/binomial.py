"""torch.distributions.Binomial(total_count=1, probs=None, logits=None): the number of successes in total_count
independent trials (sampled as the count of Bernoulli draws, exact for any total_count)."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution, broadcast_all
from trainrun.nn import functional as F


class Binomial(Distribution):
    has_enumerate_support = True
    arg_constraints = {"total_count": "nonnegative_integer", "probs": "unit_interval", "logits": "real"}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            self.logits = self.probs.clamp(1e-12, 1 - 1e-7).log() - (1 - self.probs).clamp(min=1e-12).log()
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            self.probs = self.logits.sigmoid()
        super().__init__(self.probs.shape, Size(), validate_args)
        if probs is not None:
            self._check_parameter("probs", (probs >= 0) & (probs <= 1), "Interval(lower_bound=0.0, upper_bound=1.0)")

    def _support_ok(self, value):
        return (value >= 0) & (value <= self.total_count) & (value == value.floor())

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        n_max = int(self.total_count.max().item()) if self.total_count.numel() else 0
        with trainrun.no_grad():
            trials = trainrun.rand(tuple(shape) + (max(n_max, 1),), dtype=self.probs.dtype)
            counted = trainrun.arange(max(n_max, 1), dtype=self.probs.dtype) < self.total_count.expand(
                shape).unsqueeze(-1)
            return ((trials < self.probs.expand(shape).unsqueeze(-1)) & counted).to(self.probs.dtype).sum(-1)

    def log_prob(self, value):
        self._check_sample(value)
        n, k = self.total_count, value
        log_comb = trainrun.lgamma(n + 1) - trainrun.lgamma(k + 1) - trainrun.lgamma(n - k + 1)
        # k log p + (n - k) log(1 - p) from the logits, stable for large |logits|
        return log_comb + k * self.logits - n * F.softplus(self.logits)

    def entropy(self):
        n_max = int(self.total_count.max().item())
        values = trainrun.arange(n_max + 1, dtype=self.probs.dtype).view((-1,) + (1,) * len(self.batch_shape))
        log_p = self._log_prob_masked(values)  # (k above a smaller total_count: probability 0)
        return -(log_p.exp() * log_p).nan_to_num().sum(0)

    def _log_prob_masked(self, values):
        n, k = self.total_count, values
        valid = k <= n
        safe = trainrun.where(valid, k, trainrun.zeros_like(k))
        log_comb = trainrun.lgamma(n + 1) - trainrun.lgamma(safe + 1) - trainrun.lgamma(n - safe + 1)
        log_p = log_comb + safe * self.logits - n * F.softplus(self.logits)
        return trainrun.where(valid, log_p, trainrun.full_like(log_p, float("-inf")))

    def enumerate_support(self, expand=True):
        n = int(self.total_count.max().item())
        if not bool((self.total_count == n).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = trainrun.arange(n + 1, dtype=self.probs.dtype).view((-1,) + (1,) * len(self.batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self.batch_shape))
        return values
