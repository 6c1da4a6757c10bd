"""PyTorch's other names for trainrun's ops, and small composites of them, as functions (trainrun.<name>) and
Tensor methods where PyTorch has both: the tables below are the whole list (an alias is its target's
function; a composite's gradient comes from the ops it uses)."""
import math

import trainrun
from trainrun import _C

# name -> target name: the same function (trainrun.<target>) and, where PyTorch has the method, Tensor method.
ALIASES = {
    "multiply": "mul", "divide": "div", "subtract": "sub", "true_divide": "div", "greater": "gt",
    "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne", "negative": "neg",
    "absolute": "abs", "ger": "outer", "arctanh": "atanh", "arcsinh": "asinh", "arccosh": "acosh",
}


def _positive(input):  # noqa: A002
    return input


def _floor_divide(input, other):  # noqa: A002
    return trainrun.div(input, other, rounding_mode="floor")


def _logit(input, eps=None):  # noqa: A002
    x = input if eps is None else input.clamp(eps, 1.0 - eps)
    return trainrun.log(x / (1.0 - x))


def _atanh(input):  # noqa: A002
    return 0.5 * trainrun.log1p(2.0 * input / (1.0 - input))


def _asinh(input):  # noqa: A002
    a = input.abs()  # (computed on |x|: no cancellation for large negative x)
    return trainrun.sign(input) * trainrun.log(a + trainrun.sqrt(a * a + 1.0))


def _acosh(input):  # noqa: A002
    return trainrun.log(input + trainrun.sqrt(input * input - 1.0))


def _erfc(input):  # noqa: A002
    return 1.0 - trainrun.erf(input)


def _sinc(input):  # noqa: A002
    pix = input * math.pi
    safe = trainrun.where(input == 0, trainrun.ones_like(pix), pix)
    return trainrun.where(input == 0, trainrun.ones_like(pix), trainrun.sin(safe) / safe)


def _hypot(input, other):  # noqa: A002
    return trainrun.sqrt(input * input + other * other)


def _atan2(input, other):  # noqa: A002
    """The angle of the point (other, input): atan(input / other) in the quadrant the signs give, in (-pi, pi]."""
    from trainrun._complex import _atan2 as angle
    input, other = trainrun.broadcast_tensors(*(t if _C._is_cpp_tensor(t) else trainrun.tensor(float(t))
                                                for t in (input, other)))
    if not input.is_floating_point():
        input, other = input.float(), other.float()
    return angle(input, other)


def _ldexp(input, other):  # noqa: A002
    """input * 2 ** other."""
    exponent = other if _C._is_cpp_tensor(other) else trainrun.tensor(other)
    scale = trainrun.pow(2.0, exponent.to(input.dtype if input.is_floating_point() else trainrun.float32))
    return input * scale


def _logaddexp2(input, other):  # noqa: A002
    return trainrun.logaddexp(input * math.log(2.0), other * math.log(2.0)) / math.log(2.0)


def _deg2rad(input):  # noqa: A002
    return input * (math.pi / 180.0)


def _rad2deg(input):  # noqa: A002
    return input * (180.0 / math.pi)


def _signbit(input):  # noqa: A002
    if not input.is_floating_point():
        return input < 0
    return (input < 0) | ((input == 0) & (1.0 / input < 0))  # -0.0 has its sign bit set


def _copysign(input, other):  # noqa: A002
    other = other if _C._is_cpp_tensor(other) else trainrun.tensor(float(other))
    return trainrun.where(_signbit(other), -input.abs(), input.abs())


def _heaviside(input, values):  # noqa: A002
    return trainrun.where(input == 0, values.to(input.dtype).expand_as(input),
                          (input > 0).to(input.dtype))


def _float_power(input, exponent):  # noqa: A002
    base = input.double() if _C._is_cpp_tensor(input) else input
    return trainrun.pow(base, exponent.double() if _C._is_cpp_tensor(exponent) else exponent)


def _fmax(input, other):  # noqa: A002
    return trainrun.where(input.isnan(), other, trainrun.where(other.isnan(), input, trainrun.maximum(input, other)))


def _fmin(input, other):  # noqa: A002
    return trainrun.where(input.isnan(), other, trainrun.where(other.isnan(), input, trainrun.minimum(input, other)))


def _dist(input, other, p=2):  # noqa: A002
    return trainrun.linalg.vector_norm(input - other, float(p))


def _vdot(input, other):  # noqa: A002
    return (input * other).sum()


def _addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    return input * beta + trainrun.outer(vec1, vec2) * alpha


def _cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """The covariance of the rows (variables) over the columns (observations); fweights (integer repeat counts)
    and aweights (importance) weigh the observations, as NumPy's and PyTorch's cov do."""
    x = input if input.dim() == 2 else input.reshape([1, -1])
    n = x.shape[1]
    for name, w in (("fweights", fweights), ("aweights", aweights)):
        if w is not None and (w.dim() > 1 or w.numel() != n):
            raise RuntimeError(f"cov(): expected {name} to have one dimension of size {n}, got shape {list(w.shape)}")
    if fweights is not None and fweights.is_floating_point():
        raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with {fweights.dtype} "
                           "dtype")
    if fweights is None and aweights is None:
        centred = x - x.mean(dim=1, keepdim=True)
        out = centred @ centred.t() / max(n - correction, 0)
        return out.reshape([]) if input.dim() < 2 else out
    w = fweights if aweights is None else (aweights if fweights is None else fweights * aweights)
    w = w.to(x.dtype)
    w_sum = w.sum()
    avg = (x * w).sum(dim=1, keepdim=True) / w_sum
    if correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    else:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    centred = x - avg
    out = (centred * w) @ centred.t() / norm.clamp(min=0)
    return out.reshape([]) if input.dim() < 2 else out


def _corrcoef(input):  # noqa: A002
    c = _cov(input)
    if c.dim() == 0:
        return c / c
    d = trainrun.sqrt(c.diagonal())
    return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1.0, 1.0)


def _msort(input):  # noqa: A002
    return trainrun.sort(input, dim=0).values


def _ravel(input):  # noqa: A002
    return input.reshape([-1])


def _split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    return trainrun.split(input, list(split_sizes), dim)


def _hsplit(input, indices_or_sections):  # noqa: A002
    return trainrun.tensor_split(input, indices_or_sections, dim=1 if input.dim() > 1 else 0)


def _vsplit(input, indices_or_sections):  # noqa: A002
    return trainrun.tensor_split(input, indices_or_sections, dim=0)


def _dsplit(input, indices_or_sections):  # noqa: A002
    return trainrun.tensor_split(input, indices_or_sections, dim=2)


def _diagflat(input, offset=0):  # noqa: A002
    return trainrun.diag(input.reshape([-1]), offset)


def _window(name, coefficients):
    """A periodic/symmetric cosine-sum window (hann, hamming, blackman), as torch.<name>_window."""
    def window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
        if window_length == 1:
            return trainrun.ones(1, dtype=dtype, device=device, requires_grad=requires_grad)
        n = trainrun.arange(window_length, dtype=dtype or trainrun.get_default_dtype(), device=device)
        denominator = window_length if periodic else window_length - 1
        out = trainrun.zeros_like(n)
        for k, a in enumerate(coefficients):
            out = out + ((-1) ** k) * a * trainrun.cos(2.0 * math.pi * k * n / denominator)
        return out.requires_grad_(requires_grad)
    window.__name__ = f"{name}_window"
    return window


def _bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    if window_length == 1:
        return trainrun.ones(1, dtype=dtype, device=device, requires_grad=requires_grad)
    n = trainrun.arange(window_length, dtype=dtype or trainrun.get_default_dtype(), device=device)
    half = (window_length if periodic else window_length - 1) / 2.0
    return (1.0 - ((n - half) / half).abs()).requires_grad_(requires_grad)


def _vander(x, N=None, increasing=False):  # noqa: N803  (PyTorch's name)
    n = x.shape[0] if N is None else N
    powers = trainrun.arange(n, dtype=x.dtype if x.is_floating_point() else trainrun.int64, device=x.device)
    if not increasing:
        powers = powers.flip(0)
    return x.unsqueeze(1) ** powers.unsqueeze(0)


def _combinations(input, r=2, with_replacement=False):  # noqa: A002
    import itertools
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    index = list(pick(range(input.shape[0]), r))
    if not index:
        return trainrun.empty([0, r], dtype=input.dtype, device=input.device)
    rows = trainrun.tensor(index, dtype=trainrun.int64, device=input.device)
    return input[rows.reshape([-1])].reshape([len(index), r])


def _renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each sub-tensor along dim scaled down to p-norm maxnorm where it is above."""
    dims = [d for d in range(input.dim()) if d != dim % input.dim()]
    norms = trainrun.linalg.vector_norm(input, float(p), dim=dims, keepdim=True)
    scale = trainrun.where(norms > maxnorm, maxnorm / (norms + 1e-7), trainrun.ones_like(norms))
    return input * scale


def _is_nonzero(input):  # noqa: A002
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item() != 0)


def _is_same_size(input, other):  # noqa: A002
    return tuple(input.shape) == tuple(other.shape)


def _is_signed(input):  # noqa: A002
    return input.dtype not in (trainrun.uint8, trainrun.bool)


def _det(input):  # noqa: A002
    return trainrun.linalg.det(input)


def _inverse(input):  # noqa: A002
    return trainrun.linalg.inv(input)


def _slogdet(input):  # noqa: A002
    return trainrun.linalg.slogdet(input)


def _logdet(input):  # noqa: A002
    """log(det(input)): NaN where the determinant is negative, -inf where it is 0 (differentiable through det)."""
    det = trainrun.linalg.det(input)
    return trainrun.where(det < 0, trainrun.full_like(det, float("nan")), trainrun.log(det))


def _matrix_power(input, n):  # noqa: A002
    """input^n by repeated squaring (n < 0: of the inverse; n == 0: the identity)."""
    if n < 0:
        return _matrix_power(trainrun.linalg.inv(input), -n)
    result = trainrun.eye(input.shape[-1], dtype=input.dtype, device=input.device).expand(list(input.shape))
    base = input
    while n:
        if n & 1:
            result = result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def _pinverse(input, rcond=1e-15):  # noqa: A002
    """The Moore-Penrose pseudo-inverse from the SVD, singular values below rcond * the largest dropped."""
    u, s, vh = trainrun.linalg.svd(input, full_matrices=False)
    keep = s > rcond * s.amax(dim=-1, keepdim=True)
    inv = trainrun.where(keep, 1.0 / trainrun.where(keep, s, trainrun.ones_like(s)), trainrun.zeros_like(s))
    return (vh.transpose(-2, -1) * inv.unsqueeze(-2)) @ u.transpose(-2, -1)


def _svd(input, some=True, compute_uv=True):  # noqa: A002
    """The older torch.svd: (U, S, V) with V (not its transpose)."""
    from trainrun import return_types
    u, s, vh = trainrun.linalg.svd(input, full_matrices=not some)
    if not compute_uv:
        u, vh = trainrun.zeros_like(u), trainrun.zeros_like(vh)
    return return_types.svd(u, s, vh.transpose(-2, -1))


def _left_shift(input, other):  # noqa: A002
    """input << other for integer tensors: input * 2^other."""
    if input.is_floating_point():
        raise TypeError("bitwise shifts need integer tensors")
    return input * (trainrun.full_like(input, 2) ** other if _C._is_cpp_tensor(other) else 2 ** int(other))


def _right_shift(input, other):  # noqa: A002
    """input >> other for integer tensors: floor(input / 2^other), the arithmetic shift."""
    if input.is_floating_point():
        raise TypeError("bitwise shifts need integer tensors")
    divisor = trainrun.full_like(input, 2) ** other if _C._is_cpp_tensor(other) else 2 ** int(other)
    return trainrun.div(input, divisor, rounding_mode="floor")


def _index_put(input, indices, values, accumulate=False):  # noqa: A002
    """A copy of input with input[indices] = values (accumulate: += at each index, repeated ones adding up)."""
    out = input.clone()
    return _index_put_(out, indices, values, accumulate)


def _index_put_(input, indices, values, accumulate=False):  # noqa: A002
    indices = tuple(indices)
    if not accumulate:
        input[indices] = values
        return input
    # flat positions of the indexed elements, then index_add over the flattened tensor
    shape = list(input.shape)
    index = trainrun.broadcast_tensors(*[i.long() for i in indices])
    flat = trainrun.zeros_like(index[0])
    for k, i in enumerate(index):
        flat = flat * shape[k] + (i % shape[k])
    trailing = shape[len(index):]
    rows = input.reshape([-1] + trailing) if trailing else input.reshape([-1])
    update = trainrun.broadcast_to(values, list(index[0].shape) + trailing) if _C._is_cpp_tensor(values) else \
        trainrun.full(list(index[0].shape) + trailing, float(values), dtype=input.dtype)
    summed = rows.index_add(0, flat.reshape([-1]), update.reshape([-1] + trailing).to(input.dtype))
    return input.copy_(summed.reshape(shape))


def _put_(input, index, source, accumulate=False):  # noqa: A002
    """input viewed flat: input[index] = source (accumulate: +=)."""
    flat = input.reshape([-1])
    updated = _index_put(flat, (index.reshape([-1]),), source.reshape([-1]), accumulate)
    return input.copy_(updated.reshape(list(input.shape)))


COMPOSITES = {
    "positive": _positive, "floor_divide": _floor_divide, "logit": _logit, "atanh": _atanh, "asinh": _asinh,
    "acosh": _acosh, "erfc": _erfc, "sinc": _sinc, "hypot": _hypot, "logaddexp2": _logaddexp2,
    "atan2": _atan2, "arctan2": _atan2, "ldexp": _ldexp,
    "deg2rad": _deg2rad, "rad2deg": _rad2deg, "signbit": _signbit, "copysign": _copysign,
    "heaviside": _heaviside, "float_power": _float_power, "fmax": _fmax, "fmin": _fmin, "dist": _dist,
    "vdot": _vdot, "addr": _addr, "cov": _cov, "corrcoef": _corrcoef, "msort": _msort, "ravel": _ravel,
    "split_with_sizes": _split_with_sizes, "hsplit": _hsplit, "vsplit": _vsplit, "dsplit": _dsplit,
    "diagflat": _diagflat, "renorm": _renorm, "is_nonzero": _is_nonzero, "is_same_size": _is_same_size,
    "is_signed": _is_signed, "det": _det, "inverse": _inverse, "slogdet": _slogdet, "logdet": _logdet,
    "matrix_power": _matrix_power, "pinverse": _pinverse, "svd": _svd, "index_put": _index_put,
}
# Functions only (no Tensor method in PyTorch).
FUNCTIONS_ONLY = {
    "hann_window": _window("hann", [0.5, 0.5]), "hamming_window": _window("hamming", [0.54, 0.46]),
    "blackman_window": _window("blackman", [0.42, 0.5, 0.08]), "bartlett_window": _bartlett_window,
    "vander": _vander, "combinations": _combinations,
}
# Tensor methods only: the dtype conversions PyTorch has names for.
METHODS_ONLY = {
    "byte": lambda self: self.to(trainrun.uint8), "char": lambda self: self.to(trainrun.int8),
    "is_complex": lambda self: False, "is_conj": lambda self: False, "is_neg": lambda self: False,
    "resolve_conj": lambda self: self, "resolve_neg": lambda self: self, "conj": lambda self: self,
    "get_device": lambda self: self.device.index if self.device.type == "cuda" else -1,
    "index_put_": _index_put_, "put_": _put_,
    "put": lambda self, index, source, accumulate=False: _put_(self.clone(), index, source, accumulate),
}
ALIASES["sgn"] = "sign"


def _install():
    namespace = vars(trainrun)
    for name, target in ALIASES.items():
        if name in namespace:
            continue
        fn = COMPOSITES.get(target) or namespace.get(target)
        if fn is None:
            continue
        namespace[name] = fn
        method = getattr(_C.Tensor, target, None) or COMPOSITES.get(target)
        if method is not None and not hasattr(_C.Tensor, name):
            setattr(_C.Tensor, name, method)
    for name, fn in COMPOSITES.items():
        if name not in namespace:
            namespace[name] = fn
        if not hasattr(_C.Tensor, name):
            setattr(_C.Tensor, name, fn)
    for name, fn in FUNCTIONS_ONLY.items():
        namespace.setdefault(name, fn)
    for name, fn in METHODS_ONLY.items():
        if not hasattr(_C.Tensor, name):
            setattr(_C.Tensor, name, fn)
    # a // b, b // a, a //= b and a @ b from the right: PyTorch's operators
    _C.Tensor.__floordiv__ = _floor_divide
    _C.Tensor.__rfloordiv__ = lambda self, other: _floor_divide(
        trainrun.full_like(self, other) if not _C._is_cpp_tensor(other) else other, self)
    _C.Tensor.__ifloordiv__ = lambda self, other: self.copy_(_floor_divide(self, other))
    _C.Tensor.__rmatmul__ = lambda self, other: trainrun.matmul(other, self)
    _C.Tensor.__lshift__ = _left_shift
    _C.Tensor.__rshift__ = _right_shift
    for name in ("real",):  # torch.real of a real tensor is the tensor
        namespace.setdefault(name, lambda input: input)  # noqa: A002


_install()
