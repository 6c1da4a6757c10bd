"""torch.distributions.LKJCholesky(dim, concentration=1.0): the LKJ distribution over correlation matrices, as
their lower Cholesky factors (density proportional to det(C)^(concentration - 1)). Draws by the onion method
(Lewandowski, Kurowicka and Joe 2009, section 3.2): each row a Beta-distributed radius times a uniform direction,
the diagonal completing the row to unit norm."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.beta import Beta
from trainrun.distributions.distribution import Distribution, broadcast_all


class LKJCholesky(Distribution):
    arg_constraints = {"concentration": "positive"}
    support = "dependent"  # (lower Cholesky factors of correlation matrices)

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        super().__init__(self.concentration.shape, Size([dim, dim]), validate_args)
        self._check_parameter("concentration", self.concentration > 0, "GreaterThan(lower_bound=0.0)")
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = trainrun.cat([trainrun.zeros(1, dtype=self.concentration.dtype),
                               trainrun.arange(dim - 1, dtype=self.concentration.dtype)])
        self._beta = Beta(offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset)

    def sample(self, sample_shape=Size()):
        with trainrun.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            normal = trainrun.randn(list(self._extended_shape(sample_shape)), dtype=y.dtype).tril(-1)
            norms = normal.norm(dim=-1, keepdim=True)
            direction = normal / trainrun.where(norms > 0, norms, trainrun.ones_like(norms))  # (row 0: all zero)
            w = y.sqrt() * direction
            diagonal = (1 - w.pow(2).sum(-1)).clamp(min=trainrun.finfo(w.dtype).tiny).sqrt()
            return w + trainrun.diag_embed(diagonal)

    def log_prob(self, value):
        diagonal = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = trainrun.arange(2, self.dim + 1, dtype=value.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diagonal.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalizer = 0.5 * dm1 * math.log(math.pi) + trainrun.mvlgamma(alpha - 0.5, p=dm1) - trainrun.lgamma(alpha) * dm1
        return unnormalized - normalizer
