"""The dropouts of torch.nn.functional: elementwise (dropout, a C++ kernel), per channel (dropout1d/2d/3d),
and the self-normalising alpha dropouts SELU networks use."""
import math

from trainrun import _C
from trainrun._op_table import op


@op(function=False, functional=True)
def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout(): p must be in [0, 1], got {p}")
    out = _C.dropout(input, p, training)
    return input.copy_(out) if inplace else out


def _channel_dropout(input, p, training, inplace, spatial, where):  # noqa: A002
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{where}: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    shape = list(input.shape[:-spatial]) + [1] * spatial  # one draw per channel
    if p == 1.0:
        out = input * 0.0
    else:  # PyTorch's feature noise: bernoulli(1 - p) per channel, divided by 1 - p
        noise = _C.empty(shape, input.dtype, input.device).bernoulli_(1.0 - p)
        out = input * noise.div_(1.0 - p)
    return input.copy_(out) if inplace else out


@op(function=False, functional=True)
def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


@op(function=False, functional=True)
def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    return _channel_dropout(input, p, training, inplace, 2, "dropout2d")


@op(function=False, functional=True)
def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    return _channel_dropout(input, p, training, inplace, 3, "dropout3d")


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def _alpha_dropout(input, p, training, inplace, shape, where):  # noqa: A002
    """Dropped units take SELU's negative saturation value, then an affine map keeps mean 0 and variance 1
    (PyTorch's formula)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{where}: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    saturation = -_SELU_ALPHA * _SELU_SCALE
    a = 1.0 / math.sqrt((saturation * saturation * p + 1) * (1 - p))
    b = -a * saturation * p
    keep = _C.empty(shape, input.dtype, input.device).bernoulli_(1.0 - p)  # (PyTorch's draws)
    out = (input * keep + saturation * (1.0 - keep)) * a + b
    return input.copy_(out) if inplace else out


@op(function=False, functional=True)
def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    return _alpha_dropout(input, p, training, inplace, list(input.shape), "alpha_dropout")


@op(function=False, functional=True)
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    shape = list(input.shape[:2]) + [1] * (input.ndim - 2)  # one draw per channel
    return _alpha_dropout(input, p, training, inplace, shape, "feature_alpha_dropout")
