"""torch.distributions.Bernoulli(probs=None, logits=None): draws of 0 or 1."""
import trainrun
from trainrun import Size
from trainrun.distributions._probs_or_logits import probs_and_logits
from trainrun.distributions.exp_family import ExponentialFamily


class Bernoulli(ExponentialFamily):
    # The exponential-family form (exp_family.py): natural parameters, log normalizer, E[k(x)].
    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        return trainrun.log1p(trainrun.exp(x))

    _mean_carrier_measure = 0

    has_enumerate_support = True
    arg_constraints = {"probs": "unit_interval", "logits": "real"}
    support = "boolean"

    def __init__(self, probs=None, logits=None, validate_args=None):
        self.probs, self.logits = probs_and_logits(probs, logits)
        super().__init__(self.probs.shape, Size(), validate_args)
        if probs is not None:
            self._check_parameter("probs", (self.probs >= 0) & (self.probs <= 1), "Interval(lower_bound=0.0, "
                                  "upper_bound=1.0)")

    def _support_ok(self, value):
        return (value == 0) | (value == 1)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with trainrun.no_grad():
            return trainrun.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        self._check_sample(value)
        logits, value = trainrun.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return -trainrun.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return trainrun.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = trainrun.arange(2, dtype=self.probs.dtype).view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
