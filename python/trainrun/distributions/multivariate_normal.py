"""torch.distributions.MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None,
scale_tril=None): parameterized internally by the lower Cholesky factor L (covariance = L L^T). Gradients
flow through loc, scale_tril and a covariance or precision matrix (through the Cholesky factorization's and
the inverse's gradients)."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution


def _cholesky(matrix, what):
    return trainrun.linalg.cholesky(matrix)


class MultivariateNormal(Distribution):
    has_rsample = True
    arg_constraints = {"loc": "real_vector", "scale_tril": "lower_cholesky"}
    support = "real_vector"

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, with optional leading batch "
                                 "dimensions")
            tril = scale_tril
        elif covariance_matrix is not None:
            tril = _cholesky(covariance_matrix, "covariance_matrix")
        else:
            tril = _cholesky(trainrun.linalg.inv(precision_matrix), "precision_matrix")
        batch = trainrun.broadcast_shapes(tuple(tril.shape[:-2]), tuple(loc.shape[:-1]))
        k = loc.shape[-1]
        self.loc = loc.expand(list(batch) + [k])
        self.scale_tril = tril.expand(list(batch) + [k, k])
        super().__init__(Size(batch), Size([k]), validate_args)
        diagonal = self.scale_tril.diagonal(dim1=-2, dim2=-1)
        self._check_parameter("scale_tril", diagonal > 0, "LowerCholesky()")

    @property
    def covariance_matrix(self):
        return self.scale_tril @ self.scale_tril.transpose(-2, -1)

    @property
    def precision_matrix(self):
        return trainrun.linalg.inv(self.covariance_matrix)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self.scale_tril.pow(2).sum(dim=-1)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = trainrun.randn(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self.scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self.scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(dim=-1)

    def log_prob(self, value):
        self._check_sample(value)
        diff = value - self.loc
        shape = trainrun.broadcast_shapes(tuple(diff.shape), tuple(self.loc.shape))
        tril = self.scale_tril.expand(list(shape) + [shape[-1]])
        solved = trainrun.linalg.solve(tril, diff.expand(list(shape)).unsqueeze(-1)).squeeze(-1)
        mahalanobis = solved.pow(2).sum(dim=-1)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + mahalanobis) - self._half_log_det()

    def entropy(self):
        k = self._event_shape[0]
        return 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
