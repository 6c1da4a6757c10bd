"""torch.distributions.OneHotCategorical(probs=None, logits=None): a Categorical whose draws are one-hot vectors
(event_shape: the number of classes)."""
import trainrun
from trainrun import Size
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.distribution import Distribution
from trainrun.nn import functional as F


class OneHotCategorical(Distribution):
    has_enumerate_support = True
    support = "one_hot"
    arg_constraints = {"probs": "simplex", "logits": "real_vector"}

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        super().__init__(self._categorical.batch_shape, self.probs.shape[-1:], validate_args)

    def _support_ok(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)

    @property
    def param_shape(self):
        return self.probs.shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return F.one_hot(self.probs.argmax(-1), self.probs.shape[-1]).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        indices = self._categorical.sample(sample_shape)
        return F.one_hot(indices, self.probs.shape[-1]).to(self.probs.dtype)

    def log_prob(self, value):
        self._check_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = trainrun.eye(n, dtype=self.probs.dtype).view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """A OneHotCategorical whose rsample is the straight-through estimator: the one-hot draw forward, the
    probabilities' gradient backward (draw + probs - probs.detach())."""
    has_rsample = True

    def rsample(self, sample_shape=Size()):
        draws = self.sample(sample_shape)
        probs = self._categorical.probs
        return draws + (probs - probs.detach())
