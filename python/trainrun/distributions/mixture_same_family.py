"""torch.distributions.MixtureSameFamily(mixture_distribution, component_distribution): a Categorical over K
components of one family; the components' rightmost batch dim is K. log_prob is the log-sum-exp over
components of each one's log_prob plus its log weight."""
import trainrun
from trainrun import Size
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.distribution import Distribution


class MixtureSameFamily(Distribution):
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("The Mixture distribution needs to be an instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        mixture_batch = tuple(mixture_distribution.batch_shape)
        component_batch = tuple(component_distribution.batch_shape)
        if not component_batch:
            raise ValueError("the component distribution needs a batch dim of the number of components")
        for a, b in zip(reversed(mixture_batch), reversed(component_batch[:-1])):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_batch}) is not compatible with "
                                 f"`component_distribution.batch_shape`({component_batch})")
        k = mixture_distribution.logits.shape[-1]
        if component_batch[-1] != k:
            raise ValueError(f"`mixture_distribution component` ({k}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({component_batch[-1]})")
        self._num_component = k
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(Size(component_batch[:-1]), component_distribution.event_shape, validate_args)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def support(self):
        return self._component_distribution.support

    def _pad_probs(self, probs):
        return probs.reshape(tuple(probs.shape) + (1,) * self._event_ndims)

    @property
    def mean(self):
        probs = self._pad_probs(self._mixture_distribution.probs)
        return (probs * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_probs(self._mixture_distribution.probs)
        dim = -1 - self._event_ndims
        within = (probs * self._component_distribution.variance).sum(dim)
        between = (probs * (self._component_distribution.mean - self.mean.unsqueeze(dim)).pow(2)).sum(dim)
        return within + between

    def cdf(self, x):
        x = x.unsqueeze(-1 - self._event_ndims)
        return (self._component_distribution.cdf(x) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        x = x.unsqueeze(-1 - self._event_ndims)
        log_prob_x = self._component_distribution.log_prob(x)  # [S, B, k]
        log_mix_prob = trainrun.log_softmax(self._mixture_distribution.logits, -1)
        return (log_prob_x + log_mix_prob).logsumexp(-1)

    def sample(self, sample_shape=Size()):
        with trainrun.no_grad():
            sample_shape = Size(sample_shape)
            choice = self._mixture_distribution.sample(sample_shape)  # [S, B]
            draws = self._component_distribution.sample(sample_shape)  # [S, B, k, E]
            index = choice.reshape(tuple(choice.shape) + (1,) * (1 + self._event_ndims)).long()
            index = index.expand(tuple(choice.shape) + (1,) + tuple(self._event_shape))
            if tuple(index.shape[:len(sample_shape)]) != tuple(draws.shape[:len(sample_shape)]) or \
                    index.dim() != draws.dim():
                index = index.expand(tuple(draws.shape[:-1 - self._event_ndims]) + (1,) + tuple(self._event_shape))
            return draws.gather(-1 - self._event_ndims, index).squeeze(-1 - self._event_ndims)
