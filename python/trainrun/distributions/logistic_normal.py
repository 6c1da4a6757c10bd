"""torch.distributions.LogisticNormal(loc, scale): a Normal over R^(K-1) pushed onto the K-simplex by the
stick-breaking transform (its event: the last dim, one longer than loc's)."""
from trainrun.distributions.normal import Normal
from trainrun.distributions.transformed_distribution import TransformedDistribution
from trainrun.distributions.transforms import StickBreakingTransform


class LogisticNormal(TransformedDistribution):
    arg_constraints = {"loc": "real", "scale": "positive"}
    support = "simplex"
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale
