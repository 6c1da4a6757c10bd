"""The rest of torch's top level that scripts reach for, over what trainrun has: the constants (torch.inf, nan,
pi, e), the in-place functions (torch.relu_(x) is x.relu_()), the *_scatter functions (a copy of the input with
a view of it replaced, differentiable in both), randint_like, scalar_tensor, rsub, gradient,
cumulative_trapezoid, gcd/lcm, poisson/binomial, frombuffer, chain_matmul, adjoint, frobenius_norm,
nuclear_norm, and the deprecated or global switches (set_default_tensor_type, set_warn_always, ...). install()
runs once every Tensor method exists."""
import math
import warnings

import numpy as np

import trainrun
from trainrun import _C

inf, nan, pi, e = math.inf, math.nan, math.pi, math.e

# torch.<name>_(input, ...) is input.<name>_(...) for these (PyTorch's top-level in-place functions).
_IN_PLACE = ("abs", "acos", "acosh", "addmv", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh",
             "asin", "asinh", "atan", "atanh", "ceil", "clamp", "clamp_max", "clamp_min", "clip", "cos", "cosh",
             "deg2rad", "erf", "erfc", "exp", "exp2", "expm1", "fill", "fix", "floor", "frac", "gcd", "index_put",
             "lcm", "ldexp", "log", "log10", "log1p", "log2", "logit", "nan_to_num", "neg", "negative", "rad2deg",
             "reciprocal", "relu", "round", "rsqrt", "sigmoid", "sin", "sinc", "sinh", "sqrt", "square", "tan",
             "tanh", "trunc", "xlogy", "zero", "conj_physical", "resize_as", "as_strided")
# ... and these through torch.nn.functional's inplace=True.
_FUNCTIONAL_IN_PLACE = {"celu_": "celu", "selu_": "selu", "rrelu_": "rrelu", "threshold_": "threshold"}
_DROPOUTS_IN_PLACE = {"dropout_": "dropout", "alpha_dropout_": "alpha_dropout",
                      "feature_alpha_dropout_": "feature_alpha_dropout", "feature_dropout_": "dropout2d"}


# ---- the *_scatter functions: input with one view of it replaced by src ------------------------------------
def _scatter_into(input, src, view):  # noqa: A002
    """input with view(input)'s elements replaced by src's: the view taken of the elements' flat positions says
    where they go, and one scatter (differentiable in input and src) puts them there."""
    positions = view(trainrun.arange(input.numel()).reshape(tuple(input.shape)))
    if tuple(positions.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(positions.shape)}")
    flat = input.reshape(-1).scatter(0, positions.reshape(-1), src.reshape(-1).to(input.dtype))
    return flat.reshape(tuple(input.shape))


def select_scatter(input, src, dim, index):  # noqa: A002
    return _scatter_into(input, src, lambda t: t.select(dim, index))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    def view(t):
        d = dim % t.ndim
        return t[(slice(None),) * d + (slice(start, end, step),)]
    return _scatter_into(input, src, view)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    return _scatter_into(input, src, lambda t: t.diagonal(offset, dim1, dim2))


def as_strided_scatter(input, src, size, stride, storage_offset=None):  # noqa: A002
    return _scatter_into(input, src, lambda t: t.as_strided(size, stride, storage_offset or 0))


# ---- factories and small functions ---------------------------------------------------------------------------
def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False,  # noqa: A002
                 memory_format=None, generator=None):
    """Random integers in [low, high) shaped as input (randint_like(x, high) or randint_like(x, low, high))."""
    if high is None:
        low, high = 0, low
    out = trainrun.randint(int(low), int(high), tuple(input.shape), generator=generator,
                           dtype=dtype if dtype is not None else input.dtype,
                           device=device if device is not None else input.device)
    return out.requires_grad_(True) if requires_grad else out


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    out = trainrun.tensor(s, dtype=dtype if dtype is not None else trainrun.get_default_dtype(), device=device)
    return out.requires_grad_(True) if requires_grad else out


def rsub(input, other, *, alpha=1):  # noqa: A002
    """other - alpha * input."""
    return trainrun.sub(other, input, alpha=alpha) if _C._is_cpp_tensor(other) else \
        (-alpha) * input + other


def fill(input, value):  # noqa: A002
    return trainrun.full_like(input, value.item() if _C._is_cpp_tensor(value) else value)


def chain_matmul(*matrices, out=None):
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=2)
    if len(matrices) == 1:
        return matrices[0].clone()
    return trainrun.linalg.multi_dot(list(matrices))


def adjoint(input):  # noqa: A002
    return input.mH


def frobenius_norm(input, dim=(-2, -1), keepdim=False):  # noqa: A002
    return trainrun.linalg.norm(input, "fro", dim=tuple(dim) if not isinstance(dim, int) else dim,
                                keepdim=keepdim)


def nuclear_norm(input, dim=(-2, -1), keepdim=False):  # noqa: A002
    return trainrun.linalg.matrix_norm(input, "nuc", dim=tuple(dim), keepdim=keepdim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    return trainrun.split(input, list(split_sizes), dim)


# ---- integer functions -------------------------------------------------------------------------------------
def gcd(input, other):  # noqa: A002
    """The greatest common divisor, elementwise (integers; gcd(0, 0) = 0)."""
    if input.is_floating_point() or (_C._is_cpp_tensor(other) and other.is_floating_point()):
        raise RuntimeError(f"\"gcd_cpu\" not implemented for '{str(input.dtype).replace('trainrun.', '')}'")
    a, b = trainrun.broadcast_tensors(input.abs(), other.abs() if _C._is_cpp_tensor(other) else
                                      trainrun.tensor(abs(other), dtype=input.dtype))
    a, b = a.clone(), b.clone()
    while bool((b != 0).any()):  # Euclid, on every element at once until each remainder is 0
        nonzero = b != 0
        remainder = trainrun.where(nonzero, a % trainrun.where(nonzero, b, trainrun.ones_like(b)), b)
        a, b = trainrun.where(nonzero, b, a), remainder
    return a


def lcm(input, other):  # noqa: A002
    divisor = gcd(input, other)
    product = (input * other).abs()
    return trainrun.where(divisor == 0, trainrun.zeros_like(divisor), product // trainrun.where(
        divisor == 0, trainrun.ones_like(divisor), divisor))


# ---- numerical calculus ----------------------------------------------------------------------------------------
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid-rule integral of y along dim (one element shorter than y there)."""
    d = dim % y.ndim
    n = y.shape[d]
    left, right = y.narrow(d, 0, n - 1), y.narrow(d, 1, n - 1)
    if x is not None:
        if x.ndim == 1:
            spacing = (x[1:] - x[:-1]).reshape([-1] + [1] * (y.ndim - 1 - d))
        else:
            spacing = x.narrow(d, 1, n - 1) - x.narrow(d, 0, n - 1)
        areas = (left + right) * spacing / 2
    else:
        areas = (left + right) * ((1.0 if dx is None else dx) / 2)
    return areas.cumsum(d)


def _gradient_along(f, d, spacing, edge_order):
    n = f.shape[d]
    if n < edge_order + 1:
        raise RuntimeError(f"torch.gradient expected each dimension size to be at least edge_order+1")

    def at(start, length):
        return f.narrow(d, start, length)
    if _C._is_cpp_tensor(spacing):  # coordinates along d (1-D, n of them)
        if edge_order != 1:
            raise NotImplementedError("torch.gradient: edge_order=2 with coordinate tensors is not supported")
        shape = [-1] + [1] * (f.ndim - 1 - d)
        hl = (spacing[1:-1] - spacing[:-2]).reshape(shape)
        hr = (spacing[2:] - spacing[1:-1]).reshape(shape)
        interior = (hl ** 2 * at(2, n - 2) - hr ** 2 * at(0, n - 2) + (hr ** 2 - hl ** 2) * at(1, n - 2)) / \
            (hl * hr * (hl + hr))
        first = (at(1, 1) - at(0, 1)) / (spacing[1] - spacing[0])
        last = (at(n - 1, 1) - at(n - 2, 1)) / (spacing[-1] - spacing[-2])
        return trainrun.cat([first, interior, last], d)
    h = float(spacing)
    interior = (at(2, n - 2) - at(0, n - 2)) / (2 * h)
    if edge_order == 1:
        first, last = (at(1, 1) - at(0, 1)) / h, (at(n - 1, 1) - at(n - 2, 1)) / h
    else:
        first = (-1.5 * at(0, 1) + 2 * at(1, 1) - 0.5 * at(2, 1)) / h
        last = (0.5 * at(n - 3, 1) - 2 * at(n - 2, 1) + 1.5 * at(n - 1, 1)) / h
    return trainrun.cat([first, interior, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """torch.gradient: central differences inside, one-sided (edge_order 1 or 2) at the ends; a tuple with one
    tensor per dim. spacing: one number, one per dim, or one coordinate tensor per dim."""
    if edge_order not in (1, 2):
        raise ValueError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    dims = list(range(input.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    dims = [d % input.ndim for d in dims]
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    f = input if input.is_floating_point() else input.to(trainrun.get_default_dtype())
    return tuple(_gradient_along(f, d, s, edge_order) for d, s in zip(dims, spacings))


# ---- random counts ---------------------------------------------------------------------------------------------
def _numpy_draws(draw, like, generator):
    seed = int(trainrun.randint(0, 2 ** 31 - 1, (1,), generator=generator).item())
    values = draw(np.random.default_rng(seed))
    return trainrun.tensor(np.asarray(values, dtype=np.float64).tolist(), dtype=like.dtype).reshape(
        tuple(like.shape))


def poisson(input, generator=None):  # noqa: A002
    """Counts drawn from Poisson distributions with the rates in input (same shape and dtype); the stream follows
    trainrun's seed (manual_seed or the generator)."""
    rates = input.detach().double().numpy()
    if (rates < 0).any():
        raise RuntimeError("poisson: the rates must be non-negative")
    return _numpy_draws(lambda rng: rng.poisson(rates), input, generator)


def binomial(count, prob, generator=None):
    n = np.broadcast_to(count.detach().double().numpy(), np.broadcast_shapes(tuple(count.shape), tuple(prob.shape)))
    p = np.broadcast_to(prob.detach().double().numpy(), n.shape)
    if ((p < 0) | (p > 1)).any():
        raise RuntimeError("binomial: the probabilities must be in [0, 1]")
    like = trainrun.empty(n.shape, dtype=count.dtype)
    return _numpy_draws(lambda rng: rng.binomial(n.astype(np.int64), p), like, generator)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over an object exposing the buffer protocol (sharing its memory, as PyTorch's)."""
    array = np.frombuffer(buffer, dtype=trainrun.empty([0], dtype=dtype).numpy().dtype, count=count, offset=offset)
    out = trainrun.from_numpy(array)
    return out.requires_grad_(True) if requires_grad else out


# ---- global switches -----------------------------------------------------------------------------------------
_WARN_ALWAYS = [False]


def set_warn_always(b):
    """Whether PyTorch-style warnings meant to be shown once are shown every time."""
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled():
    return _WARN_ALWAYS[0]


def set_flush_denormal(mode):
    """PyTorch's switch for flushing denormal floats to zero: not offered by trainrun's kernels, so it returns
    False (what PyTorch returns where the CPU does not support it) and changes nothing."""
    return False


def set_default_tensor_type(t):
    """Deprecated in PyTorch (use set_default_dtype): the default floating dtype from a tensor type or its
    name ("torch.DoubleTensor")."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    kinds = {"FloatTensor": trainrun.float32, "DoubleTensor": trainrun.float64, "HalfTensor": trainrun.float16,
             "BFloat16Tensor": trainrun.bfloat16}
    kind = name.rsplit(".", 1)[-1]
    if kind not in kinds:
        raise TypeError(f"only floating-point types are supported as the default type, got {name}")
    trainrun.set_default_dtype(kinds[kind])


def compiled_with_cxx11_abi():
    return True


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """input with source's slices (along dim) reduced into the slices index names: reduce is "prod", "mean",
    "amax" or "amin" (scatter_reduce with the index spread over the other dims)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d = dim % input.ndim
    shape = [1] * source.ndim
    shape[d] = index.numel()
    spread = index.reshape(shape).expand(tuple(source.shape))
    return input.scatter_reduce(d, spread, source, reduce, include_self=include_self)


# ---- linear algebra at the top level (PyTorch's older names) ----------------------------------------------------
def cholesky_solve(B, L, upper=False):  # noqa: N803
    """X with (L L^T) X = B (or U^T U with upper); differentiable."""
    A = L.transpose(-2, -1) @ L if upper else L @ L.transpose(-2, -1)  # noqa: N806
    return trainrun.linalg.solve(A, B)


def cholesky_inverse(L, upper=False):  # noqa: N803
    A = L.transpose(-2, -1) @ L if upper else L @ L.transpose(-2, -1)  # noqa: N806
    return trainrun.linalg.inv(A)


def _linear_algebra():
    from trainrun import _linalg_decompositions as decompositions
    linalg = trainrun.linalg
    return {"lu": decompositions.torch_lu, "lu_unpack": decompositions.lu_unpack,
            "lu_solve": decompositions.torch_lu_solve, "cholesky": lambda A, upper=False: linalg.cholesky(
                A, upper=upper), "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse,
            "qr": lambda A, some=True: linalg.qr(A, "reduced" if some else "complete"),
            "matrix_exp": linalg.matrix_exp, "i0": trainrun.special.i0}


# ---- Tensor methods that go with them -------------------------------------------------------------------------
def _new(self, *args, **kwargs):
    """The legacy constructor: x.new(2, 3) (uninitialised, x's dtype), x.new([1, 2]) (data), x.new() (empty)."""
    if len(args) == 1 and not isinstance(args[0], int) and not isinstance(args[0], (tuple, trainrun.Size)):
        return trainrun.tensor(args[0], dtype=self.dtype, device=self.device)
    sizes = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, trainrun.Size)) else list(args)
    return trainrun.empty(sizes or [0], dtype=kwargs.get("dtype", self.dtype), device=self.device)


def _is_set_to(self, other):
    return (self.untyped_storage().data_ptr() == other.untyped_storage().data_ptr() and
            self.storage_offset() == other.storage_offset() and tuple(self.shape) == tuple(other.shape) and
            tuple(self.stride()) == tuple(other.stride()))


def _nextafter(input, other):  # noqa: A002
    """The next representable float after input towards other (no gradient, as PyTorch's)."""
    a = input.detach().numpy()
    b = other.detach().numpy() if _C._is_cpp_tensor(other) else np.asarray(other, dtype=a.dtype)
    return trainrun.from_numpy(np.nextafter(a, b.astype(a.dtype)).copy())


_METHODS = {"select_scatter": select_scatter, "slice_scatter": slice_scatter, "diagonal_scatter": diagonal_scatter,
            "as_strided_scatter": as_strided_scatter, "gcd": gcd, "lcm": lcm, "adjoint": adjoint, "new": _new,
            "index_reduce": index_reduce,
            "index_reduce_": lambda self, dim, index, source, reduce, *, include_self=True: self.copy_(index_reduce(
                self, dim, index, source, reduce, include_self=include_self)),
            "is_set_to": _is_set_to, "nextafter": _nextafter, "unsafe_split_with_sizes": unsafe_split_with_sizes,
            "hardshrink": lambda self, lambd=0.5: trainrun.nn.functional.hardshrink(self, lambd),
            "prelu": lambda self, weight: trainrun.nn.functional.prelu(self, weight),
            "to_dense": lambda self, dtype=None, *, masked_grad=None: self if dtype is None else self.to(dtype),
            "cholesky": lambda self, upper=False: trainrun.linalg.cholesky(self, upper=upper),
            "angle": lambda self: trainrun.angle(self),
            "cfloat": lambda self: trainrun.complex(self.float(), trainrun.zeros_like(self, dtype=trainrun.float32)),
            "cdouble": lambda self: trainrun.complex(self.double(),
                                                     trainrun.zeros_like(self, dtype=trainrun.float64))}


def _returning_input(function):
    def in_place(input, *args, **kwargs):  # noqa: A002
        function(input, *args, **kwargs)
        return input
    return in_place


def install(namespace):
    """Puts the functions above into torch's namespace, and the methods on Tensor, where missing."""
    Tensor = _C.Tensor
    for name, method in _METHODS.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, method)
    for name in ("gcd", "lcm", "nextafter", "i0"):  # (in place: the function's result copied in; i0 takes no other)
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", lambda self, *other, _n=name: self.copy_(getattr(Tensor, _n)(self, *other)))
    Tensor.volatile = property(lambda self: False)
    for name, function in _linear_algebra().items():
        namespace.setdefault(name, function)
        if name not in ("lu_unpack",) and not hasattr(Tensor, name):
            setattr(Tensor, name, function if name != "lu_solve" else
                    lambda self, LU_data, LU_pivots: function(self, LU_data, LU_pivots))
    own = {name: value for name, value in globals().items() if not name.startswith("_") and callable(value) and
           getattr(value, "__module__", None) == __name__ and name != "install"}
    from trainrun.special._bessel_and_error import kaiser_window
    own.update(inf=inf, nan=nan, pi=pi, e=e, unsafe_chunk=trainrun.chunk, unsafe_split=trainrun.split,
               nextafter=_nextafter, kaiser_window=kaiser_window)
    for name, value in own.items():
        namespace.setdefault(name, value)
    for name in _IN_PLACE:
        if hasattr(Tensor, name + "_") and name + "_" not in namespace:
            namespace[name + "_"] = _returning_input(lambda input, *args, _n=name + "_", **kwargs: getattr(
                input, _n)(*args, **kwargs))
    F = trainrun.nn.functional
    for name, functional in _FUNCTIONAL_IN_PLACE.items():
        namespace.setdefault(name, _returning_input(lambda input, *args, _f=getattr(F, functional), **kwargs: _f(
            input, *args, inplace=True, **kwargs)))
    for name, functional in _DROPOUTS_IN_PLACE.items():
        namespace.setdefault(name, _returning_input(lambda input, p, train, _f=getattr(F, functional): _f(
            input, p, train, inplace=True)))
