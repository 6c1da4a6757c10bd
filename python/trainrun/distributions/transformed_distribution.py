"""torch.distributions.TransformedDistribution(base, transforms): draws of base pushed through the transforms;
log_prob(y) = base.log_prob(x) - sum of log|det J| along the way back (x the inverse image of y)."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.transforms import ComposeTransform, Transform, _sum_rightmost


class TransformedDistribution(Distribution):
    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        if not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("transforms must be a Transform or a list of Transforms")
        self.transforms = list(transforms)
        # The shapes, as PyTorch's: the chain's events may span more dims than the base's (a base batch dim then
        # becomes part of its event: Independent) or change size (StickBreakingTransform: n -> n + 1).
        base_shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        base_event_dim = len(base_distribution.event_shape)
        chain = ComposeTransform(self.transforms)
        if len(base_shape) < chain.domain.event_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least {chain.domain.event_dim}, "
                             f"but got {base_shape}.")
        forward_shape = chain.forward_shape(base_shape)
        expanded_base_shape = chain.inverse_shape(forward_shape)
        if base_shape != tuple(expanded_base_shape):
            base_distribution = base_distribution.expand(expanded_base_shape[:len(expanded_base_shape) -
                                                                             base_event_dim])
        reinterpreted = chain.domain.event_dim - base_event_dim
        if reinterpreted > 0:
            from trainrun.distributions.independent import Independent
            base_distribution = Independent(base_distribution, reinterpreted)
        self.base_dist = base_distribution
        event_dim = chain.codomain.event_dim + max(base_event_dim - chain.domain.event_dim, 0)
        cut = len(forward_shape) - event_dim
        super().__init__(Size(forward_shape[:cut]), Size(forward_shape[cut:]), validate_args=False)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        """Where the last transform lands (the base distribution's support when there is none)."""
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def sample(self, sample_shape=Size()):
        with trainrun.no_grad():
            x = self.base_dist.sample(sample_shape)
            for transform in self.transforms:
                x = transform(x)
            return x

    def rsample(self, sample_shape=Size()):
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value):
        """The base's log_prob at the inverse image, less each transform's log|det J| summed over the event dims
        it does not already cover."""
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            event_dim += transform.domain.event_dim - transform.codomain.event_dim
            log_prob = log_prob - _sum_rightmost(transform.log_abs_det_jacobian(x, y),
                                                 event_dim - transform.domain.event_dim)
            y = x
        return log_prob + _sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """The base's CDF turned into this one's: 1 - F where the transforms, together, decrease."""
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for transform in reversed(self.transforms):
            value = transform.inv(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        x = self.base_dist.icdf(self._monotonize_cdf(value))
        for transform in self.transforms:
            x = transform(x)
        return x

    def __repr__(self):
        return f"TransformedDistribution({self.base_dist!r}, {ComposeTransform(self.transforms).parts!r})"
