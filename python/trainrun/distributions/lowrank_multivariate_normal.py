"""torch.distributions.LowRankMultivariateNormal(loc, cov_factor, cov_diag): a Gaussian whose covariance is
W W^T + diag(D) (W: event x rank). log_prob and entropy never form the event x event matrix: the Woodbury
identity and the matrix determinant lemma work through the rank x rank "capacitance" I + W^T D^-1 W, as
PyTorch's does."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.distribution import Distribution


class LowRankMultivariateNormal(Distribution):
    has_rsample = True
    arg_constraints = {"loc": "real_vector", "cov_factor": "real", "cov_diag": "independent(positive, 1)"}
    support = "real_vector"

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event = loc.shape[-1]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2] != event:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event} x m")
        if cov_diag.shape[-1:] != (event,):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {tuple(loc.shape[-1:])}")
        batch = trainrun.broadcast_shapes(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]),
                                          tuple(cov_diag.shape[:-1]))
        self.loc = loc.expand(tuple(batch) + (event,))
        self.cov_factor = cov_factor.expand(tuple(batch) + tuple(cov_factor.shape[-2:]))
        self.cov_diag = cov_diag.expand(tuple(batch) + (event,))
        super().__init__(Size(batch), Size((event,)), validate_args)
        self._check_parameter("cov_diag", self.cov_diag > 0, "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)")
        rank = cov_factor.shape[-1]
        scaled = self.cov_factor / self.cov_diag.unsqueeze(-1)  # D^-1 W
        capacitance = trainrun.eye(rank, dtype=loc.dtype) + self.cov_factor.transpose(-2, -1) @ scaled
        self._capacitance_tril = trainrun.linalg.cholesky(capacitance)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self.cov_factor.pow(2).sum(-1) + self.cov_diag

    @property
    def covariance_matrix(self):
        return self.cov_factor @ self.cov_factor.transpose(-2, -1) + self.cov_diag.diag_embed()

    @property
    def scale_tril(self):
        return trainrun.linalg.cholesky(self.covariance_matrix)

    @property
    def precision_matrix(self):
        """(W W^T + D)^-1 by Woodbury: D^-1 - D^-1 W C^-1 W^T D^-1, C the capacitance."""
        scaled = self.cov_factor / self.cov_diag.unsqueeze(-1)
        inner = trainrun.cholesky_solve(scaled.transpose(-2, -1), self._capacitance_tril)
        return (1 / self.cov_diag).diag_embed() - scaled @ inner

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        rank = self.cov_factor.shape[-1]
        eps_w = trainrun.randn(*(tuple(shape[:-1]) + (rank,)), dtype=self.loc.dtype)
        eps_d = trainrun.randn(tuple(shape), dtype=self.loc.dtype)
        return self.loc + (self.cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1) + self.cov_diag.sqrt() * eps_d

    def _log_det(self):
        """log det(W W^T + D) = log det(C) + sum log D (the matrix determinant lemma)."""
        return 2 * self._capacitance_tril.diagonal(0, -2, -1).log().sum(-1) + self.cov_diag.log().sum(-1)

    def log_prob(self, value):
        self._check_sample(value)
        diff = value - self.loc
        # Mahalanobis by Woodbury: x^T D^-1 x - |L^-1 W^T D^-1 x|^2, L the capacitance's Cholesky factor
        scaled = diff / self.cov_diag
        projected = (self.cov_factor.transpose(-2, -1) @ scaled.unsqueeze(-1))
        shape = trainrun.broadcast_shapes(tuple(projected.shape[:-2]), tuple(self._capacitance_tril.shape[:-2]))
        tril = self._capacitance_tril.expand(tuple(shape) + tuple(self._capacitance_tril.shape[-2:]))
        solved = trainrun.linalg.solve_triangular(tril, projected.expand(tuple(shape) + tuple(projected.shape[-2:])),
                                                  upper=False).squeeze(-1)
        mahalanobis = (diff * scaled).sum(-1) - solved.pow(2).sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + mahalanobis + self._log_det())

    def entropy(self):
        k = self._event_shape[0]
        return 0.5 * (k * (1.0 + math.log(2 * math.pi)) + self._log_det())
