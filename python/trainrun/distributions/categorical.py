"""torch.distributions.Categorical(probs=None, logits=None): one draw is a class index over the last dim."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution


class Categorical(Distribution):
    has_enumerate_support = True
    arg_constraints = {"probs": "simplex", "logits": "real_vector"}

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = trainrun.log(self.probs.clamp(min=trainrun.finfo(self.probs.dtype).tiny))
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self.probs = trainrun.softmax(self.logits, -1)
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1], Size(), validate_args)
        if probs is not None:
            self._check_parameter("probs", probs >= 0, "Simplex()")

    def _support_ok(self, value):
        return (value >= 0) & (value < self._num_events) & (value == value.floor())

    @property
    def param_shape(self):
        return self.probs.shape

    @property
    def support(self):
        from trainrun.distributions import constraints
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self):
        return trainrun.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return trainrun.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=Size()):
        sample_shape = Size(sample_shape)
        n = 1
        for s in sample_shape:
            n *= s
        flat = self.probs.reshape(-1, self._num_events)
        with trainrun.no_grad():
            draws = trainrun.multinomial(flat, n, replacement=True).t()  # [n, batch]
        return draws.reshape(tuple(sample_shape) + tuple(self._batch_shape))

    def log_prob(self, value):
        self._check_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = trainrun.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        min_real = trainrun.finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = trainrun.arange(self._num_events, dtype=trainrun.int64).view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
