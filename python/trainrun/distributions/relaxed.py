"""torch.distributions.RelaxedBernoulli(temperature, probs=None, logits=None) and
RelaxedOneHotCategorical(temperature, probs=None, logits=None): the Concrete / Gumbel-softmax relaxations,
reparameterized (gradients flow to the logits through the draws), as PyTorch's: a logistic (resp. Gumbel) noise
draw on the logit scale, pushed through a sigmoid (resp. exp of a log-softmax)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions._probs_or_logits import probs_and_logits
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.transformed_distribution import TransformedDistribution
from trainrun.distributions.transforms import ExpTransform, SigmoidTransform
from trainrun.nn import functional as F


class LogitRelaxedBernoulli(Distribution):
    has_rsample = True
    arg_constraints = {"probs": "unit_interval", "logits": "real"}
    support = "real"

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        self.probs, self.logits = probs_and_logits(probs, logits)
        super().__init__(self.logits.shape, Size(), validate_args)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        finfo = trainrun.finfo(self.logits.dtype)
        u = trainrun.rand(tuple(shape), dtype=self.logits.dtype, device=self.logits.device).clamp(min=finfo.tiny,
                                                                                            max=1 - finfo.eps)
        return (u.log() - (-u).log1p() + self.logits) / self.temperature

    def log_prob(self, value):
        diff = self.logits - value * self.temperature
        log_temperature = self.temperature.log() if trainrun._C._is_cpp_tensor(self.temperature) else \
            math.log(self.temperature)
        return log_temperature + diff - 2 * F.softplus(diff)


class _RelaxedParameters:
    """temperature, logits and probs of a relaxed family: its base distribution's."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_RelaxedParameters, TransformedDistribution):
    has_rsample = True
    arg_constraints = {"probs": "unit_interval", "logits": "real"}
    support = "unit_interval"

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits), SigmoidTransform(), validate_args)


class ExpRelaxedCategorical(Distribution):
    has_rsample = True
    arg_constraints = {"probs": "simplex", "logits": "real_vector"}
    support = "real_vector"

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        shape = self._categorical.probs.shape
        super().__init__(shape[:-1], shape[-1:], validate_args)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        finfo = trainrun.finfo(self.logits.dtype)
        u = trainrun.rand(tuple(shape), dtype=self.logits.dtype, device=self.logits.device).clamp(min=finfo.tiny,
                                                                                            max=1 - finfo.eps)
        scores = (self.logits - (-u.log()).log()) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        k = self._event_shape[0]
        temperature = self.temperature if trainrun._C._is_cpp_tensor(self.temperature) else \
            trainrun.tensor(float(self.temperature), dtype=self.logits.dtype)
        log_scale = math.lgamma(k) - temperature.log().mul(-(k - 1))
        score = self.logits - value * temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_RelaxedParameters, TransformedDistribution):
    has_rsample = True
    arg_constraints = {"probs": "simplex", "logits": "real_vector"}
    support = "simplex"

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(ExpRelaxedCategorical(temperature, probs, logits), ExpTransform(), validate_args)
