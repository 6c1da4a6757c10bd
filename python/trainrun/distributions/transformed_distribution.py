"""torch.distributions.TransformedDistribution(base, transforms): draws of base pushed through the transforms;
log_prob(y) = base.log_prob(x) - sum of log|det J| along the way back (x the inverse image of y)."""
import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.transforms import ComposeTransform, Transform


class TransformedDistribution(Distribution):
    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        if not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("transforms must be a Transform or a list of Transforms")
        self.base_dist, self.transforms = base_distribution, list(transforms)
        super().__init__(base_distribution.batch_shape, base_distribution.event_shape, validate_args=False)

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
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            term = transform.log_abs_det_jacobian(x, y)
            if event_dim:
                term = term.reshape(list(term.shape[:term.dim() - event_dim]) + [-1]).sum(-1)
            log_prob = log_prob - term
            y = x
        return log_prob + self.base_dist.log_prob(y)

    def cdf(self, value):
        for transform in reversed(self.transforms):
            value = transform.inv(value)
        return self.base_dist.cdf(value)

    def icdf(self, value):
        x = self.base_dist.icdf(value)
        for transform in self.transforms:
            x = transform(x)
        return x

    def __repr__(self):
        return f"TransformedDistribution({self.base_dist!r}, {ComposeTransform(self.transforms).parts!r})"
