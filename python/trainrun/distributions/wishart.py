"""torch.distributions.Wishart(df, covariance_matrix=None, precision_matrix=None, scale_tril=None): the
distribution of sum_i x_i x_i^T over df Normal(0, covariance) vectors (p x p positive definite matrices, df >
p - 1). Draws by Bartlett's decomposition: L A (L A)^T, A lower triangular with sqrt(chi2(df - i)) on its
diagonal and standard normals below."""
import math

import trainrun
from trainrun import Size
from trainrun.distributions.exp_family import ExponentialFamily
from trainrun.distributions.gamma import standard_gamma

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """d/dx of the multivariate log-gamma: sum_{i<p} digamma(x - i / 2)."""
    offsets = trainrun.arange(p, dtype=x.dtype) / 2
    return trainrun.digamma(x.unsqueeze(-1) - offsets).sum(-1)


class Wishart(ExponentialFamily):
    arg_constraints = {"covariance_matrix": "positive_definite", "precision_matrix": "positive_definite",
                       "scale_tril": "lower_cholesky", "df": "dependent"}  # (df > p - 1: checked in __init__)
    support = "positive_definite"
    has_rsample = False
    _mean_carrier_measure = 0

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = given[0]
        if matrix.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if scale_tril is not None:
            tril = scale_tril
        elif covariance_matrix is not None:
            tril = trainrun.linalg.cholesky(covariance_matrix)
        else:
            tril = trainrun.linalg.cholesky(trainrun.linalg.inv(precision_matrix))
        p = matrix.shape[-1]
        df = df if trainrun._C._is_cpp_tensor(df) else trainrun.tensor(float(df), dtype=matrix.dtype)
        batch = trainrun.broadcast_shapes(tuple(tril.shape[:-2]), tuple(df.shape))
        self.df = df.to(matrix.dtype).expand(list(batch))
        self._unbroadcasted_scale_tril = tril
        self.scale_tril = tril.expand(list(batch) + [p, p])
        super().__init__(Size(batch), Size([p, p]), validate_args)
        self._check_parameter("df", self.df > p - 1, f"GreaterThan(lower_bound={p - 1})")

    @property
    def covariance_matrix(self):
        return self.scale_tril @ self.scale_tril.transpose(-2, -1)

    @property
    def precision_matrix(self):
        return trainrun.cholesky_inverse(self._unbroadcasted_scale_tril).expand(list(self.batch_shape) +
                                                                                list(self.event_shape))

    @property
    def mean(self):
        return self.df.reshape(list(self.batch_shape) + [1, 1]) * self.covariance_matrix

    @property
    def mode(self):
        p = self.event_shape[-1]
        factor = (self.df - p - 1).reshape(list(self.batch_shape) + [1, 1])
        mode = factor * self.covariance_matrix
        return mode.masked_fill((factor <= 0).expand(list(mode.shape)), float("nan"))

    @property
    def variance(self):
        v = self.covariance_matrix
        diagonal = v.diagonal(dim1=-2, dim2=-1)
        return self.df.reshape(list(self.batch_shape) + [1, 1]) * (v.pow(2) + diagonal.unsqueeze(-1) *
                                                                    diagonal.unsqueeze(-2))

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def sample(self, sample_shape=Size()):
        p = self.event_shape[-1]
        shape = list(sample_shape) + list(self.batch_shape)
        with trainrun.no_grad():
            dof = self.df.expand(shape).unsqueeze(-1) - trainrun.arange(p, dtype=self.df.dtype)
            chi2 = 2 * standard_gamma(dof / 2, shape + [p])
            noise = trainrun.randn(shape + [p, p], dtype=self.df.dtype).tril(-1)
            a = noise + trainrun.diag_embed(chi2.sqrt())
            la = self.scale_tril @ a
            return la @ la.transpose(-2, -1)

    def log_prob(self, value):
        self._check_sample(value)
        nu, p = self.df, self.event_shape[-1]
        return (-nu * (p * _LOG_2 / 2 + self._half_log_det()) - trainrun.mvlgamma(nu / 2, p=p)
                + (nu - p - 1) / 2 * trainrun.linalg.slogdet(value).logabsdet
                - trainrun.cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(-1)
                / 2)

    def entropy(self):
        nu, p = self.df, self.event_shape[-1]
        return ((p + 1) * (p * _LOG_2 / 2 + self._half_log_det()) + trainrun.mvlgamma(nu / 2, p=p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)
