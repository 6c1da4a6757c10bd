"""torch.distributions.transforms: invertible maps y = f(x) with log|det J| for TransformedDistribution (SAC's
tanh-squashed Gaussian policy, log-normal flows): ExpTransform, AffineTransform, SigmoidTransform,
TanhTransform, PowerTransform, ComposeTransform, and .inv for the inverse of any of them. cache_size=1 keeps the
last (x, y) pair, so log_abs_det_jacobian of a sample reuses its x instead of inverting y (tanh near +-1)."""
import math

import trainrun
from trainrun.nn import functional as F


class Transform:
    bijective = True
    sign = 1

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
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class ExpTransform(Transform):
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
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    def with_cache(self, cache_size=1):
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size)

    @property
    def sign(self):
        return self.scale.sign() if isinstance(self.scale, trainrun.Tensor) else (1 if self.scale > 0 else -1)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        result = scale.abs().log() if isinstance(scale, trainrun.Tensor) else \
            trainrun.full_like(x, math.log(abs(scale)))
        result = result.expand(x.shape) if tuple(result.shape) != tuple(x.shape) else result
        if self.event_dim:
            result = result.reshape(list(result.shape[:-self.event_dim]) + [-1]).sum(-1)
        return result


class SigmoidTransform(Transform):
    def _call(self, x):
        return x.sigmoid()

    def _inverse(self, y):
        finfo = trainrun.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class TanhTransform(Transform):
    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * ((1 + y).log() - (1 - y).log())  # atanh

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2), in the numerically stable form PyTorch uses
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class PowerTransform(Transform):
    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size=1):
        return PowerTransform(self.exponent, cache_size)

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        exponent = self.exponent if isinstance(self.exponent, trainrun.Tensor) else trainrun.tensor(
            float(self.exponent), dtype=x.dtype)
        return (exponent * y / x).abs().log()


class ComposeTransform(Transform):
    """The transforms applied in order (the first one first)."""

    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size)
        self.parts = [part.with_cache(cache_size) if cache_size else part for part in parts]

    def with_cache(self, cache_size=1):
        return ComposeTransform(self.parts, cache_size)

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
