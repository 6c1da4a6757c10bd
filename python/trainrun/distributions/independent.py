"""torch.distributions.Independent(base, reinterpreted_batch_ndims): the base's rightmost batch dims become event
dims (a diagonal Normal over vectors: Independent(Normal(loc, scale), 1)); log_prob and entropy sum over them."""
from trainrun import Size
from trainrun.distributions.distribution import Distribution


def _sum_rightmost(value, n):
    return value.reshape(tuple(value.shape[:value.dim() - n]) + (-1,)).sum(-1) if n > 0 else value


class Independent(Distribution):
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, reinterpreted_batch_ndims
        super().__init__(Size(shape[:len(shape) - event_dim]), Size(shape[len(shape) - event_dim:]), validate_args)

    def expand(self, batch_shape, _instance=None):
        """The base expanded to batch_shape plus the batch dims this reinterprets as its event."""
        reinterpreted = tuple(self.base_dist.batch_shape)[len(self.base_dist.batch_shape) -
                                                          self.reinterpreted_batch_ndims:]
        return Independent(self.base_dist.expand(tuple(batch_shape) + reinterpreted), self.reinterpreted_batch_ndims)

    @property
    def support(self):
        from trainrun.distributions import constraints
        base = self.base_dist.support
        if not isinstance(base, constraints.Constraint) or not self.reinterpreted_batch_ndims:
            return base
        return constraints.independent(base, self.reinterpreted_batch_ndims)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist}, {self.reinterpreted_batch_ndims})"
