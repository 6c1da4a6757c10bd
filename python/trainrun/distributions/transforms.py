"""torch.distributions.transforms: invertible maps y = f(x) with log|det J| for TransformedDistribution (SAC's
tanh-squashed Gaussian policy, log-normal flows): ExpTransform, AffineTransform, SigmoidTransform,
TanhTransform, PowerTransform, ComposeTransform, and .inv for the inverse of any of them. cache_size=1 keeps the
last (x, y) pair, so log_abs_det_jacobian of a sample reuses its x instead of inverting y (tanh near +-1)."""
import math

import trainrun
from trainrun.distributions import constraints
from trainrun.nn import functional as F


class Transform:
    """domain and codomain: the constraints x and y satisfy; event_dim: the rightmost dims one event spans."""
    bijective = True
    sign = 1
    domain = constraints.real
    codomain = constraints.real

    @property
    def event_dim(self):
        return max(self.domain.event_dim, self.codomain.event_dim)

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached = (None, None)

    @property
    def inv(self):
        return _InverseTransform(self)

    def with_cache(self, cache_size=1):
        return type(self)(cache_size=cache_size)

    def __call__(self, x):
        if self._cache_size:
            if self._cached[0] is x:
                return self._cached[1]
            y = self._call(x)
            self._cached = (x, y)
            return y
        return self._call(x)

    def _inv_call(self, y):
        if self._cache_size and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__(transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    @property
    def sign(self):
        return self._inv.sign


class ExpTransform(Transform):
    codomain = constraints.positive
    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    """y = loc + scale * x; event_dim: how many rightmost dims one event spans (their log-dets are summed)."""

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.independent(constraints.real, self._event_dim) if self._event_dim else constraints.real

    codomain = domain

    def with_cache(self, cache_size=1):
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size)

    @property
    def sign(self):
        return self.scale.sign() if trainrun._C._is_cpp_tensor(self.scale) else (1 if self.scale > 0 else -1)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        result = scale.abs().log() if trainrun._C._is_cpp_tensor(scale) else \
            trainrun.full_like(x, math.log(abs(scale)))
        result = result.expand(x.shape) if tuple(result.shape) != tuple(x.shape) else result
        if self.event_dim:
            result = result.reshape(list(result.shape[:-self.event_dim]) + [-1]).sum(-1)
        return result


class SigmoidTransform(Transform):
    codomain = constraints.unit_interval
    def _call(self, x):
        return x.sigmoid()

    def _inverse(self, y):
        finfo = trainrun.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class TanhTransform(Transform):
    codomain = constraints.interval(-1.0, 1.0)
    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * ((1 + y).log() - (1 - y).log())  # atanh

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2), in the numerically stable form PyTorch uses
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class PowerTransform(Transform):
    domain = constraints.positive
    codomain = constraints.positive
    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size=1):
        return PowerTransform(self.exponent, cache_size)

    @property
    def sign(self):
        """+1 where the power increases, -1 where it decreases (a negative exponent)."""
        e = self.exponent
        return e.sign() if trainrun._C._is_cpp_tensor(e) else (1 if e > 0 else -1 if e < 0 else 0)

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        exponent = self.exponent if trainrun._C._is_cpp_tensor(self.exponent) else trainrun.tensor(
            float(self.exponent), dtype=x.dtype)
        return (exponent * y / x).abs().log()


class ComposeTransform(Transform):
    """The transforms applied in order (the first one first)."""

    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size)
        self.parts = [part.with_cache(cache_size) if cache_size else part for part in parts]

    def with_cache(self, cache_size=1):
        return ComposeTransform(self.parts, cache_size)

    @property
    def sign(self):
        sign = 1
        for part in self.parts:
            sign = sign * part.sign
        return sign

    @property
    def domain(self):
        """The first part's domain, over as many rightmost dims as the chain's events span (PyTorch's rule)."""
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim = max(event_dim + part.domain.event_dim - part.codomain.event_dim, part.domain.event_dim)
        return constraints.independent(domain, event_dim - domain.event_dim) if event_dim > domain.event_dim \
            else domain

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim = max(event_dim + part.codomain.event_dim - part.domain.event_dim, part.codomain.event_dim)
        return constraints.independent(codomain, event_dim - codomain.event_dim) if event_dim > codomain.event_dim \
            else codomain

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return trainrun.zeros_like(x)
        total = 0
        for part in self.parts:
            y_part = part(x)
            total = total + part.log_abs_det_jacobian(x, y_part)
            x = y_part
        return total


identity_transform = ComposeTransform([])


class AbsTransform(Transform):
    bijective = False
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class SoftplusTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y  # log(exp(y) - 1), without overflow

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)


class SoftmaxTransform(Transform):
    """x -> softmax(x) over the last dim (not bijective: the inverse is log, up to a constant)."""
    bijective = False
    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        return (x - x.amax(-1, keepdim=True)).exp() / (x - x.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()


class StickBreakingTransform(Transform):
    """A bijection from R^(K-1) onto the K-simplex by stick breaking (sigmoid of the offset inputs)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        offset = x.shape[-1] + 1 - trainrun.ones(x.shape[-1], dtype=x.dtype).cumsum(-1)
        z = (x - offset.log()).sigmoid()
        z_cumprod = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - trainrun.ones(y_crop.shape[-1], dtype=y.dtype).cumsum(-1)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=trainrun.finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        offset = x.shape[-1] + 1 - trainrun.ones(x.shape[-1], dtype=x.dtype).cumsum(-1)
        x = x - offset.log()
        return (-x + F.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


def _sum_rightmost(value, dims):
    return value.reshape(list(value.shape[:value.dim() - dims]) + [-1]).sum(-1) if dims > 0 else value


class CorrCholeskyTransform(Transform):
    """A vector of D(D-1)/2 reals -> the lower Cholesky factor of a D x D correlation matrix (rows of unit norm,
    positive diagonal): tanh into (-1, 1), then stick breaking along each row on the squared values (Stan's
    construction). log_abs_det_jacobian is that of x and the factor's strictly lower part."""
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky

    def _call(self, x):
        from trainrun.distributions.utils import vec_to_tril_matrix
        eps = trainrun.finfo(x.dtype).eps
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        remaining = (1 - r.pow(2)).sqrt().cumprod(-1)  # (what each row has left, before the next entry)
        r = r + trainrun.eye(r.shape[-1], dtype=r.dtype)
        return r * F.pad(remaining[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        from trainrun.distributions.utils import tril_matrix_to_vec
        left = F.pad((1 - (y * y).cumsum(-1))[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(left, diag=-1).sqrt()
        return (t.log1p() - (-t).log1p()) / 2

    def log_abs_det_jacobian(self, x, y):
        from trainrun.distributions.utils import tril_matrix_to_vec
        left = tril_matrix_to_vec(1 - (y * y).cumsum(-1), diag=-2)  # (diag -2: no shift needed)
        stick_breaking = 0.5 * left.log().sum(-1)
        tanh = -2 * (x + F.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattend lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        return tuple(shape[:-2]) + (shape[-1] * (shape[-1] - 1) // 2,)


class LowerCholeskyTransform(Transform):
    """An unconstrained square matrix -> a lower-triangular one with a positive diagonal (exp of x's)."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(0, -2, -1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(0, -2, -1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """An unconstrained square matrix -> L L^T, L its LowerCholeskyTransform."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        low = LowerCholeskyTransform()(x)
        return low @ low.transpose(-2, -1)

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(trainrun.linalg.cholesky(y))


class IndependentTransform(Transform):
    """base_transform over events of reinterpreted_batch_ndims more dims (log-dets summed over them)."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size)
        self.base_transform = base_transform.with_cache(cache_size) if cache_size else base_transform
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size)

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        result = self.base_transform.log_abs_det_jacobian(x, y)
        n = self.reinterpreted_batch_ndims
        return result.reshape(list(result.shape[:result.dim() - n]) + [-1]).sum(-1) if n else result


class ReshapeTransform(Transform):
    """Events of in_shape reshaped to out_shape (same number of elements; log-det 0)."""

    def __init__(self, in_shape, out_shape, cache_size=0):
        super().__init__(cache_size)
        self.in_shape, self.out_shape = trainrun.Size(in_shape), trainrun.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")

    def with_cache(self, cache_size=1):
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def _call(self, x):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch + tuple(self.out_shape))

    def _inverse(self, y):
        batch = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return trainrun.zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]), dtype=x.dtype)

    def forward_shape(self, shape):
        return tuple(shape[:len(shape) - len(self.in_shape)]) + tuple(self.out_shape)

    def inverse_shape(self, shape):
        return tuple(shape[:len(shape) - len(self.out_shape)]) + tuple(self.in_shape)


class CumulativeDistributionTransform(Transform):
    """x -> distribution.cdf(x) (a copula's building block); the inverse is its icdf."""
    codomain = constraints.unit_interval

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size)
        self.distribution = distribution

    def with_cache(self, cache_size=1):
        return CumulativeDistributionTransform(self.distribution, cache_size)

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


# Transforms of slices along a dim (CatTransform, StackTransform): _slice_transforms.py.
from trainrun.distributions._slice_transforms import CatTransform, StackTransform  # noqa: E402,F401
