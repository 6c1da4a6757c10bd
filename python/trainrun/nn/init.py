"""trainrun.nn.init: in-place initializers with torch.nn.init's names,
arguments and fan rules. Each fills the tensor without recording a graph
and returns it. A sharded parameter (a DTensor: fully_shard, tensor
parallelism) gets on each rank exactly the values of its piece of the whole
tensor that one process would draw, so a model built on the meta device,
sharded, then materialised and initialised equals the unsharded one. A meta
tensor is left as it is (it has no values)."""
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


def _piece(tensor):
    """(local tensor, global shape, offsets of the local piece): a DTensor's piece, or the whole tensor."""
    piece = getattr(tensor, "_piece", None)
    if piece is not None:
        return piece()
    return tensor, list(tensor.shape), [0] * tensor.ndim


def _draw_into(tensor, normal, a, b):
    local, shape, offsets = _piece(tensor)
    with no_grad():
        _C._ops.random_piece_(local, normal, a, b, shape, offsets)
    return tensor


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _draw_into(tensor, False, a, b)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _draw_into(tensor, True, mean, std)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal values cut to [a, b], by PyTorch's inverse-CDF method: uniform values between the normal
    CDF at a and at b mapped back through the inverse CDF (one draw per element, so a sharded piece takes the
    values of that part of the whole)."""
    local, shape, offsets = _piece(tensor)
    if std <= 0 or a > b:
        raise ValueError(f"trunc_normal_(): needs std > 0 and a <= b, got std={std}, a={a}, b={b}")
    lo, hi = _normal_cdf((a - mean) / std), _normal_cdf((b - mean) / std)
    with no_grad():
        u = _C.empty(list(local.shape), dtype=local.dtype, device=local.device)  # (drawn as PyTorch: the dtype's)
        _C._ops.random_piece_(u, False, 2 * lo - 1, 2 * hi - 1, shape, offsets)
        if local.is_meta:
            return tensor
        x = _erfinv(u.to(_C.dtype.float64)) * (std * math.sqrt(2.0)) + mean
        local.copy_(_C.clamp(x, a, b).to(local.dtype))
    return tensor


def _normal_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def _erfinv(y):
    """The inverse error function of a float64 tensor in (-1, 1): Giles' single-precision approximation
    ("Approximating the erfinv function", 2010), then two Newton steps on erf for double precision."""
    w = -_C.log((1.0 - y) * (1.0 + y))
    central, tail = w - 2.5, _C.sqrt(w) - 3.0
    p = _C.full(list(y.shape), 2.81022636e-08, dtype=y.dtype, device=y.device)
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p = p * central + c
    q = _C.full(list(y.shape), -0.000200214257, dtype=y.dtype, device=y.device)
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        q = q * tail + c
    x = _C.where(w < 5.0, p, q) * y
    for _ in range(2):
        x = x - (_C.erf(x) - y) / (_C.exp(-x * x) * (2.0 / math.sqrt(math.pi)))
    return x


def constant_(tensor, val):
    with no_grad():
        _piece(tensor)[0].fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        _piece(tensor)[0].zero_()
    return tensor


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("eye_(): only 2-D tensors are supported")
    with no_grad():
        tensor.copy_(_C.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))
    return tensor


def dirac_(tensor, groups=1):
    """The identity of a convolution (3-5 dims, out_channels divisible by groups): each output channel copies
    one input channel at the kernel's centre."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per_group = tensor.shape[0] // groups
    if tensor.shape[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    centre = [s // 2 for s in tensor.shape[2:]]
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(out_per_group, tensor.shape[1])):
                tensor[(g * out_per_group + d, d, *centre)] = 1.0
    return tensor


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


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor drawn from N(0, std), then in each column ceil(sparsity * rows) entries, chosen at random,
    set to zero (Martens 2010), as PyTorch's."""
    import math

    import trainrun
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        normal_(tensor, 0.0, std, generator=generator)
        for col in range(cols):
            picked = trainrun.randperm(rows, generator=generator)[:zeros]
            tensor[picked, col] = 0.0
    return tensor
