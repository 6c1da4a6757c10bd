"""Math ops with PyTorch's signatures that are composites of core ops:
rounding, exponent/log bases, clamps, closeness tests, order statistics
(median, kthvalue, mode), erfinv, histc, and Tensor.unfold/new_tensor.
Their gradients come from the core ops they are made of. (Products, einsum
and distances are in _ops_linalg.py.)"""
import builtins
import collections
import math

import numpy as np

from trainrun import _C
from trainrun._op_table import op, wrap_dim

_ops = _C._ops


def _like(value, t):
    return _C.full([], value, dtype=t.dtype if t.is_floating_point() else _C.dtype.float32, device=t.device)


# ---- elementwise ------------------------------------------------------------------------
@op(method=True, inplace=True)
def square(input):  # noqa: A002
    return input * input


@op(method=True, inplace=True)
def reciprocal(input):  # noqa: A002
    return 1.0 / (input if input.is_floating_point() else input.float())


@op(method=True, inplace=True)
def exp2(input):  # noqa: A002
    return _C.exp(input * math.log(2.0))


@op(method=True, inplace=True)
def expm1(input):  # noqa: A002
    return _C.exp(input) - 1.0


@op(method=True, inplace=True)
def log2(input):  # noqa: A002
    return _C.log(input) * (1.0 / math.log(2.0))


@op(method=True, inplace=True)
def log10(input):  # noqa: A002
    return _C.log(input) * (1.0 / math.log(10.0))


@op(method=True, inplace=True)
def ceil(input):  # noqa: A002
    return -_C.floor(-input) if input.is_floating_point() else input.clone()


@op(method=True, inplace=True, aliases=("fix",))
def trunc(input):  # noqa: A002
    return _C.where(input < 0, ceil(input), _C.floor(input)) if input.is_floating_point() else input.clone()


@op(method=True, inplace=True)
def frac(input):  # noqa: A002
    return input - trunc(input)


@op(method=True, inplace=True)
def fmod(input, other):  # noqa: A002
    """The C remainder: the sign of the dividend (Python's % is remainder())."""
    if not input.is_floating_point() and not (isinstance(other, float) or
                                              (_C._is_cpp_tensor(other) and other.is_floating_point())):
        r = _C.remainder(input, other)
        other_t = other if _C._is_cpp_tensor(other) else _C.full([], other, dtype=input.dtype, device=input.device)
        fix = (r != 0) & ((input < 0) != (other_t < 0))
        return _C.where(fix, r - other_t, r)
    q = input / other
    return input - trunc(q).detach() * other


@op(method=True, inplace=True)
def tan(input):  # noqa: A002
    return _C.sin(input) / _C.cos(input)


def _float_operand(input, name):
    if not _C._is_cpp_tensor(input):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input if input.is_floating_point() else input.to(_C._ops.get_default_dtype())


# The inverse trigonometric functions, from atan2 (trainrun/_complex.py: a series accurate to float64's precision,
# differentiable as a composition); outside [-1, 1] asin and acos are nan, as PyTorch's.
@op(method=True, inplace=True, aliases=("arctan",))
def atan(input):  # noqa: A002
    x = _float_operand(input, "atan")
    from trainrun._complex import _atan2
    return _atan2(x, _C.full([], 1.0, dtype=x.dtype, device=x.device).expand(x.shape))


@op(method=True, inplace=True, aliases=("arcsin",))
def asin(input):  # noqa: A002
    x = _float_operand(input, "asin")
    from trainrun._complex import _atan2
    return _atan2(x, _C.sqrt(1.0 - x * x))


@op(method=True, inplace=True, aliases=("arccos",))
def acos(input):  # noqa: A002
    x = _float_operand(input, "acos")
    from trainrun._complex import _atan2
    return _atan2(_C.sqrt(1.0 - x * x), x)


@op(method=True, inplace=True)
def sinh(input):  # noqa: A002
    return (_C.exp(input) - _C.exp(-input)) * 0.5


@op(method=True, inplace=True)
def cosh(input):  # noqa: A002
    return (_C.exp(input) + _C.exp(-input)) * 0.5


@op(method=True, inplace=True, aliases=("negative",))
def neg(input, *, out=None):  # noqa: A002
    return _C.neg(input, out=out)


@op(method=True, inplace=True, aliases=("clip",))
def clamp(input, min=None, max=None):  # noqa: A002
    """Each element limited to [min, max]; either bound may be a number or a tensor (or None)."""
    if min is None and max is None:
        raise ValueError("clamp(): at least one of min and max must not be None")
    if _C._is_cpp_tensor(min) or _C._is_cpp_tensor(max):
        out = input
        if min is not None:
            out = _C.maximum(out, min if _C._is_cpp_tensor(min) else
                             _C.full([], min, dtype=input.dtype, device=input.device))
        if max is not None:
            out = _C.minimum(out, max if _C._is_cpp_tensor(max) else
                             _C.full([], max, dtype=input.dtype, device=input.device))
        return out
    return _C.clamp(input, min, max)


@op(method=True, inplace=True)
def clamp_min(input, min):  # noqa: A002
    return clamp(input, min=min)


@op(method=True, inplace=True)
def clamp_max(input, max):  # noqa: A002
    return clamp(input, max=max)


@op(method=True, inplace=True)
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    """NaN, +inf and -inf replaced by nan, posinf and neginf (by default the dtype's largest/smallest)."""
    if not input.is_floating_point():
        return input.clone()
    info = np.finfo({"float16": np.float16, "float64": np.float64}.get(input.dtype.name, np.float32))
    big = float(info.max) if input.dtype.name != "bfloat16" else 3.3895313892515355e38
    out = _C.where(input != input, _like(nan, input), input)
    out = _C.where(out == float("inf"), _like(big if posinf is None else posinf, input), out)
    return _C.where(out == float("-inf"), _like(-big if neginf is None else neginf, input), out)


@op(method=True)
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):  # noqa: A002
    """The p-norm over dim (an int, a tuple, or every dim); "fro" is the 2-norm of the flattened dims; "nuc" the
    nuclear norm (sum of singular values) of the matrices over two dims (the last two when dim is None)."""
    x = input if dtype is None else input.to(dtype)
    if p == "nuc":
        from trainrun.linalg import matrix_norm
        dims = (-2, -1) if dim is None else tuple(dim) if not isinstance(dim, int) else (dim,)
        if len(dims) != 2 or (dim is None and x.dim() != 2):
            raise ValueError(f"norm(p='nuc') takes a matrix or two dims, got {x.dim()}-D input and dim={dim}")
        return matrix_norm(x, "nuc", dim=dims, keepdim=keepdim)
    if p == "fro" or p is None:
        p = 2.0
    elif isinstance(p, str):
        raise ValueError(f"norm(): p must be a number, inf, 'fro' or 'nuc', got {p!r}")
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return _C.norm(x, float(p), dims, keepdim)


@op(method=True)
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    return _ops.isclose(input, other, rtol, atol, equal_nan)


@op(method=True)
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    return _ops.allclose(input, other, rtol, atol, equal_nan)


@op(method=True)
def equal(input, other):  # noqa: A002
    """True when both have the same shape and elements."""
    return list(input.shape) == list(other.shape) and builtins.bool((input == other).all().item())


@op(method=True)
def cumprod(input, dim, *, dtype=None):  # noqa: A002
    """Running products along dim: exp of the running sum of logs of |x|, with signs and zeros handled
    (a zero makes every later product zero)."""
    x = input if dtype is None else input.to(dtype)
    if not x.is_floating_point():
        a = np.cumprod(x.cpu().numpy(), axis=wrap_dim(dim, x.ndim, "cumprod"))
        return _C.from_numpy(np.ascontiguousarray(a)).to(x.device)
    d = wrap_dim(dim, x.ndim, "cumprod")
    zero = x == 0
    safe = _C.where(zero, _C.ones([], dtype=x.dtype, device=x.device), x)
    negatives = _C.cumsum((safe < 0).to(_C.dtype.int64), d)
    magnitude = _C.exp(_C.cumsum(_C.log(safe.abs()), d))
    sign = 1.0 - 2.0 * _C.remainder(negatives, 2).to(x.dtype)
    seen_zero = _C.cumsum(zero.to(_C.dtype.int64), d) > 0
    return _C.where(seen_zero, _C.zeros([], dtype=x.dtype, device=x.device), magnitude * sign)


# ---- order statistics -----------------------------------------------------------------------
median_result = collections.namedtuple("median", ["values", "indices"])
kthvalue_result = collections.namedtuple("kthvalue", ["values", "indices"])
mode_result = collections.namedtuple("mode", ["values", "indices"])
nanmedian_result = collections.namedtuple("nanmedian", ["values", "indices"])
for _t in (median_result, kthvalue_result, mode_result):
    _t.__module__ = "trainrun.return_types"


def _kth_along(input, k, dim, keepdim, where):  # noqa: A002
    """The k-th smallest (0-based) along dim with its index, as the stable sort would place it (ties in index
    order, NaN last): the last of an unsorted top k + 1, which is a selection, not a sort."""
    d = wrap_dim(dim, input.ndim, where)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k < n:
        raise IndexError(f"{where}(): k = {k + 1} is out of range for dim {dim} of size {n}")
    if input.ndim == 0:
        return input.clone(), _C.zeros([], dtype=_C.dtype.int64, device=input.device)
    values, indices = _C.topk(input, k + 1, d, False, False)
    v, i = values.narrow(d, k, 1), indices.narrow(d, k, 1)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return v, i


def _median_along(input, dim, keepdim):  # noqa: A002
    """The lower median along dim and its index; a row holding a NaN gives that NaN and the index of its first
    one, as PyTorch's median (nanmedian skips them). The values are gathered at the indices, so a gradient goes
    to the element picked."""
    d = wrap_dim(dim, input.ndim, "median")
    if input.ndim == 0:  # (dim 0 or -1 of a number: itself)
        return input.clone(), _C.zeros([], dtype=_C.dtype.int64, device=input.device)
    _, index = _kth_along(input, (input.shape[d] - 1) // 2, d, True, "median")
    if input.is_floating_point():
        nan = input != input
        if bool(nan.any()):
            has_nan = nan.any(d, keepdim=True)
            index = _C.where(has_nan, nan.to(_C.dtype.int64).argmax(d, keepdim=True), index)
    values = input.gather(d, index)
    return (values, index) if keepdim else (values.squeeze(d), index.squeeze(d))


@op(method=True)
def median(input, dim=None, keepdim=False):  # noqa: A002
    """The lower median (for an even count, the smaller of the two middle values); NaN where a NaN is, as
    PyTorch's."""
    if dim is None:
        if input.numel() == 0:  # (PyTorch's: NaN)
            return _C.full([], float("nan"), dtype=input.dtype, device=input.device)
        return _median_along(input.reshape([-1]), 0, False)[0]
    return median_result(*_median_along(input, dim, keepdim))


def _nan_median_along(input, dim, keepdim):  # noqa: A002
    """The lower median of the non-NaN values along dim, and its index: NaNs sort last (as +inf), and the pick
    is at (count - 1) // 2 of each row's own count; a row of NaNs gives NaN (index 0)."""
    d = wrap_dim(dim, input.ndim, "nanmedian")
    nan = input != input
    filled = _C.where(nan, _C.full([], float("inf"), dtype=input.dtype, device=input.device), input)
    _, order = _C.sort(filled, d, False)
    count = (~nan).sum(d, keepdim=True)
    index = order.gather(d, (count - 1).clamp(min=0) // 2)
    values = input.gather(d, index)
    return (values, index) if keepdim else (values.squeeze(d), index.squeeze(d))


@op(method=True)
def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """median() ignoring NaNs, as PyTorch's."""
    if not input.is_floating_point():
        return median(input, dim, keepdim)
    if dim is None:
        return _nan_median_along(input.reshape([-1]), 0, False)[0]
    if input.ndim == 0:
        return nanmedian_result(input.clone(), _C.zeros([], dtype=_C.dtype.int64, device=input.device))
    return nanmedian_result(*_nan_median_along(input, dim, keepdim))


@op(method=True)
def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    return kthvalue_result(*_kth_along(input, k - 1, dim, keepdim, "kthvalue"))


@op(method=True)
def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """The most frequent value along dim (the smallest of ties) and the index of its last occurrence."""
    d = wrap_dim(dim, input.ndim, "mode")
    a = np.moveaxis(input.detach().cpu().numpy(), d, -1)
    rows = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
    values = np.empty(rows.shape[0], dtype=a.dtype)
    indices = np.empty(rows.shape[0], dtype=np.int64)
    for r, row in enumerate(rows):
        uniq, counts = np.unique(row, return_counts=True)
        values[r] = uniq[np.argmax(counts)]
        indices[r] = len(row) - 1 - np.flatnonzero(row[::-1] == values[r])[0]
    shape = list(a.shape[:-1])
    v = _C.from_numpy(values.reshape(shape)).to(input.device)
    i = _C.from_numpy(indices.reshape(shape)).to(input.device)
    if keepdim and input.ndim:
        v, i = v.unsqueeze(d), i.unsqueeze(d)
    return mode_result(v, i)


@op()
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    out = _C.pow(_C.full([], float(base), dtype=_C.dtype.float64), _C.linspace(start, end, steps,
                                                                                  dtype=_C.dtype.float64))
    out = out.to(dtype if dtype is not None else _ops.get_default_dtype())
    if device is not None:
        out = out.to(device)
    out.requires_grad = requires_grad
    return out


@op()
def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):  # noqa: A002
    c = (1 if unbiased else 0) if correction is None else correction
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return _C.std(input, dims, c, keepdim), _C.mean(input, dims, keepdim)


@op()
def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):  # noqa: A002
    c = (1 if unbiased else 0) if correction is None else correction
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return _C.var(input, dims, c, keepdim), _C.mean(input, dims, keepdim)


@op(method=True)
def logaddexp(input, other):  # noqa: A002
    m = _C.maximum(input, other).detach()
    m = _C.where(m.isinf(), _C.zeros([], dtype=m.dtype, device=m.device), m)
    return m + _C.log(_C.exp(input - m) + _C.exp(other - m))


@op(method=True)
def xlogy(input, other):  # noqa: A002
    """input * log(other), 0 where input is 0 (and other is not NaN)."""
    if not _C._is_cpp_tensor(other):
        other = _C.full([], float(other), dtype=input.dtype if input.is_floating_point() else _C.dtype.float32)
    if not _C._is_cpp_tensor(input):
        input = _C.full([], float(input), dtype=other.dtype)  # noqa: A001
    zero = input == 0
    safe = _C.where(zero, _C.ones([], dtype=other.dtype, device=other.device), other)
    return _C.where(zero & (other == other), _C.zeros([], dtype=safe.dtype, device=safe.device),
                    input * _C.log(safe))


class _Erfinv:
    """erfinv by Newton's method on erf from Giles' single-precision start (a few steps reach float64
    precision); the gradient is sqrt(pi)/2 * exp(erfinv(y)^2)."""

    @staticmethod
    def value(y):
        a = y.detach().to(_C.dtype.float64)
        w = -_C.log((1.0 - a) * (1.0 + a))
        small = w < 5.0
        ws, wl = w - 2.5, _C.sqrt(_C.clamp(w, 5.0, None)) - 3.0
        p_small, p_large = ws * 0.0 + 2.81022636e-08, wl * 0.0 - 0.000200214257
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                  0.246640727, 1.50140941):
            p_small = p_small * ws + c
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                  1.00167406, 2.83297682):
            p_large = p_large * wl + c
        x = _C.where(small, p_small, p_large) * a
        for _ in range(3):
            x = x - (_C.erf(x) - a) / (_C.exp(-x * x) * (2.0 / math.sqrt(math.pi)))
        x = _C.where(a == 1.0, _C.full([], float("inf"), dtype=_C.dtype.float64), x)
        x = _C.where(a == -1.0, _C.full([], float("-inf"), dtype=_C.dtype.float64), x)
        return x.to(y.dtype)


@op(method=True, inplace=True)
def erfinv(input):  # noqa: A002
    from trainrun.autograd import Function

    class ErfinvFunction(Function):
        @staticmethod
        def forward(ctx, y):
            x = _Erfinv.value(y)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * _C.exp(x * x) * (math.sqrt(math.pi) / 2.0)
    return ErfinvFunction.apply(input if input.is_floating_point() else input.float())


@op(method=True)
def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    return _C.sort(input, dim, descending)[1]


@op(method=True)
def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """Counts in `bins` equal bins over [min, max] (the data's range when both are 0); values outside are
    ignored."""
    a = input.detach().cpu().numpy().reshape(-1)
    lo, hi = (float(a.min()), float(a.max())) if min == 0 and max == 0 and a.size else (float(min), float(max))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts, _ = np.histogram(a[(a >= lo) & (a <= hi)], bins=bins, range=(lo, hi))
    return _C.from_numpy(np.ascontiguousarray(counts.astype(np.float32))).to(input.dtype).to(input.device)


def _tri_indices(row, col, offset, upper, dtype, device):
    r, c = np.triu_indices(row, offset, col) if upper else np.tril_indices(row, offset, col)
    t = _C.from_numpy(np.ascontiguousarray(np.stack([r, c]).astype(np.int64)))
    t = t.to(dtype) if dtype is not None else t
    return t.to(device) if device is not None else t


@op()
def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _tri_indices(row, col, offset, True, dtype, device)


@op()
def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _tri_indices(row, col, offset, False, dtype, device)


def _unfold(self, dimension, size, step):
    """Tensor.unfold: a view of every window of `size` elements, `step` apart, along `dimension`
    (a new last dim holds each window)."""
    d = wrap_dim(dimension, self.ndim, "unfold")
    n = self.shape[d] if self.ndim else 1
    if size > n or step <= 0:
        raise ValueError(f"unfold(): size {size} must be at most the dim's size {n}, and step positive")
    count = (n - size) // step + 1
    sizes = list(self.shape)
    strides = list(self.stride())
    sizes[d] = count
    base_stride = strides[d]
    strides[d] = base_stride * step
    return _ops.as_strided(self, sizes + [size], strides + [base_stride], self.storage_offset())


_C.Tensor.unfold = _unfold


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    from trainrun._tensor import tensor
    return tensor(data, dtype=dtype if dtype is not None else self.dtype,
                  device=device if device is not None else self.device, requires_grad=requires_grad)


_C.Tensor.new_tensor = _new_tensor
