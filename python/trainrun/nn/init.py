"""trainrun.nn.init: in-place initializers with torch.nn.init's names,
arguments and fan rules. Each fills the tensor without recording a graph
and returns it."""
import math

from trainrun import _C
from trainrun._autograd import no_grad


def calculate_gain(nonlinearity, param=None):
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain(): unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("fan in and fan out can not be computed for a tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with no_grad():
        _C._ops.uniform_(tensor, a, b)
    return tensor


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        _C._ops.normal_(tensor, mean, std)
    return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal values redrawn until they fall in [a, b] (rejection, so the shape is exact)."""
    with no_grad():
        out = _C.zeros(list(tensor.shape), dtype=_C.dtype.float32)
        todo = _C.ones(list(tensor.shape), dtype=_C.dtype.bool)
        for _ in range(100):
            draw = _C._ops.normal_(_C.empty(list(tensor.shape), dtype=_C.dtype.float32), mean, std)
            take = todo & (draw >= a) & (draw <= b)
            out = _C.where(take, draw, out)
            todo = todo & ~take
            if not todo.any().item():
                break
        tensor.copy_(_C.clamp(out, a, b).to(tensor.dtype))
    return tensor


def constant_(tensor, val):
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        tensor.zero_()
    return tensor


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("eye_(): only 2-D tensors are supported")
    with no_grad():
        tensor.copy_(_C.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))
    return tensor


def dirac_(tensor, groups=1):
    raise NotImplementedError("dirac_ is not supported")


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)))


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal draw (NumPy on the host)."""
    import numpy as np
    if tensor.ndim < 2:
        raise ValueError("orthogonal_(): only tensors with 2 or more dimensions are supported")
    rows, cols = tensor.shape[0], tensor.numel() // tensor.shape[0]
    flat = _C._ops.normal_(_C.empty([rows, cols], dtype=_C.dtype.float64), 0.0, 1.0).numpy()
    q, r = np.linalg.qr(flat.T if rows < cols else flat)
    q = q * np.sign(np.diag(r))
    q = q.T if rows < cols else q
    with no_grad():
        tensor.copy_(_C.from_numpy(np.ascontiguousarray(q * gain)).reshape(list(tensor.shape)).to(tensor.dtype))
    return tensor
