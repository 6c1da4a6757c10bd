"""Complex tensors for elementwise use, as rotary position embeddings need them (`torch.polar`,
`view_as_complex`, a complex product, `view_as_real`): trainrun's core has no complex dtype, so a
ComplexTensor holds its values as real pairs, a real tensor with a last dim of 2 (what view_as_real shows),
and its arithmetic is real arithmetic on the pairs, which autograd differentiates. It supports the shape
operations (view/reshape, unsqueeze, flatten, transpose, indexing of the complex dims), products, sums and
quotients with complex or real operands, conj/abs/angle and real/imag, and moves with .to(device). Matrix
products and reductions over complex values are not there. A module keeps one as a plain attribute
(register_buffer accepts it; it is not in state_dict)."""
import builtins
import math

import trainrun
from trainrun import _C


class ComplexDtype:
    """trainrun.complex64 / complex128: the dtype a ComplexTensor reports (pairs of float32 / float64)."""

    def __init__(self, name, real):
        self.name, self.real = name, real
        self.is_floating_point, self.is_complex, self.itemsize = False, True, 8 if name == "complex64" else 16

    def __repr__(self):
        return f"trainrun.{self.name}"


complex64 = ComplexDtype("complex64", _C.dtype.float32)
complex128 = ComplexDtype("complex128", _C.dtype.float64)


class ComplexTensor:
    __slots__ = ("_pairs", "__weakref__")

    def __init__(self, pairs):
        if pairs.dim() < 1 or pairs.shape[-1] != 2:
            raise ValueError(f"ComplexTensor: expected real pairs (a last dim of 2), got shape {list(pairs.shape)}")
        self._pairs = pairs

    # ---- what it is ----
    shape = property(lambda self: trainrun.Size(self._pairs.shape[:-1]))
    ndim = property(lambda self: self._pairs.dim() - 1)
    dtype = property(lambda self: complex128 if self._pairs.dtype == _C.dtype.float64 else complex64)
    device = property(lambda self: self._pairs.device)
    requires_grad = property(lambda self: self._pairs.requires_grad)
    real = property(lambda self: self._pairs[..., 0])
    imag = property(lambda self: self._pairs[..., 1])

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.ndim

    def numel(self):
        return self._pairs.numel() // 2

    def is_complex(self):
        return True

    def is_floating_point(self):
        return False

    # ---- arithmetic ----
    @staticmethod
    def _parts(value):
        if isinstance(value, ComplexTensor):
            return value.real, value.imag
        if isinstance(value, builtins.complex):
            return value.real, value.imag
        return value, 0.0  # a real tensor or number

    def _combine(self, re, im):
        return ComplexTensor(trainrun.stack([re, im], -1))

    def __mul__(self, other):
        a, b = self.real, self.imag
        if not isinstance(other, (ComplexTensor, builtins.complex)):
            return ComplexTensor(self._pairs * (other.unsqueeze(-1) if _C._is_cpp_tensor(other) else other))
        c, d = self._parts(other)
        return self._combine(a * c - b * d, a * d + b * c)

    __rmul__ = __mul__

    def __add__(self, other):
        c, d = self._parts(other)
        return self._combine(self.real + c, self.imag + d)

    __radd__ = __add__

    def __sub__(self, other):
        c, d = self._parts(other)
        return self._combine(self.real - c, self.imag - d)

    def __rsub__(self, other):
        return (-self) + other

    def __neg__(self):
        return ComplexTensor(-self._pairs)

    def __truediv__(self, other):
        if not isinstance(other, (ComplexTensor, builtins.complex)):
            return ComplexTensor(self._pairs / (other.unsqueeze(-1) if _C._is_cpp_tensor(other) else other))
        c, d = self._parts(other)
        denominator = c * c + d * d
        return self._combine((self.real * c + self.imag * d) / denominator,
                             (self.imag * c - self.real * d) / denominator)

    def conj(self):
        return self._combine(self.real, -self.imag)

    def abs(self):
        return trainrun.sqrt(self.real * self.real + self.imag * self.imag)

    def angle(self):
        return _atan2(self.imag, self.real)

    # ---- shapes (of the complex dims; the pair dim stays last) ----
    @staticmethod
    def _sizes(shape):
        return list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list, trainrun.Size)) else \
            list(shape)

    def view(self, *shape):
        return ComplexTensor(self._pairs.reshape(self._sizes(shape) + [2]))

    reshape = view

    def unsqueeze(self, dim):
        return ComplexTensor(self._pairs.unsqueeze(dim if dim >= 0 else dim - 1))

    def squeeze(self, dim=None):
        if dim is None:
            return self.view([s for s in self.shape if s != 1])
        return ComplexTensor(self._pairs.squeeze(dim % self.ndim))

    def flatten(self, start_dim=0, end_dim=-1):
        return ComplexTensor(self._pairs.flatten(start_dim % self.ndim, end_dim % self.ndim))

    def transpose(self, dim0, dim1):
        return ComplexTensor(self._pairs.transpose(dim0 % self.ndim, dim1 % self.ndim))

    def permute(self, *dims):
        dims = self._sizes(dims)
        return ComplexTensor(self._pairs.permute([d % self.ndim for d in dims] + [self.ndim]))

    def expand(self, *shape):
        return ComplexTensor(self._pairs.expand(self._sizes(shape) + [2]))

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            key = key + (slice(None),)  # (the pair dim stays whole)
        return ComplexTensor(self._pairs[key])

    def __len__(self):
        return self.shape[0]

    # ---- moving, copying ----
    def to(self, *args, **kwargs):
        target = [a for a in args if isinstance(a, ComplexDtype)] + ([kwargs.pop("dtype")] if isinstance(
            kwargs.get("dtype"), ComplexDtype) else [])
        args = tuple(a for a in args if not isinstance(a, ComplexDtype))
        pairs = self._pairs.to(*args, **kwargs) if args or kwargs else self._pairs
        return ComplexTensor(pairs.to(target[0].real) if target else pairs)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to(device or "cuda")

    def detach(self):
        return ComplexTensor(self._pairs.detach())

    def clone(self):
        return ComplexTensor(self._pairs.clone())

    def contiguous(self):
        return ComplexTensor(self._pairs.contiguous())

    def type_as(self, other):
        return self if isinstance(other, ComplexTensor) else self.real.type_as(other)

    def tolist(self):
        def build(values):
            if values and isinstance(values[0], list) and values[0] and isinstance(values[0][0], list):
                return [build(v) for v in values]
            return [builtins.complex(re, im) for re, im in values] if values and isinstance(values[0], list) \
                else builtins.complex(*values)
        return build(self._pairs.tolist())

    def item(self):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        re, im = self._pairs.reshape([2]).tolist()
        return builtins.complex(re, im)

    def __repr__(self):
        return f"tensor({self.tolist()}, dtype={self.dtype!r})"

    # ---- reductions and powers ----
    def sum(self, dim=None, keepdim=False):
        if dim is None:
            return ComplexTensor(self._pairs.reshape([-1, 2]).sum(0))
        dims = [d % self.ndim for d in ([dim] if isinstance(dim, int) else dim)]
        return ComplexTensor(self._pairs.sum(dims, keepdim=keepdim))

    def mean(self, dim=None, keepdim=False):
        count = self.numel() if dim is None else math.prod(self.shape[d] for d in ([dim] if isinstance(dim, int)
                                                                                      else dim))
        return self.sum(dim, keepdim) / float(count)

    def __pow__(self, exponent):
        """z ** p for a real p, in polar form: |z|^p at p times the angle."""
        if isinstance(exponent, (ComplexTensor, builtins.complex)):
            raise NotImplementedError("ComplexTensor ** complex is not supported")
        if exponent == 2:
            return self * self
        radius, angle = self.abs() ** exponent, self.angle() * exponent
        return self._combine(radius * trainrun.cos(angle), radius * trainrun.sin(angle))


def _atan2(y, x):
    """atan2(y, x) from the real ops trainrun has: 2 atan(y / (r + x)) with r = |(x, y)|, and atan(u) by three
    half-angle steps (atan(u) = 2 atan(u / (1 + sqrt(1 + u^2))), leaving |u| < 0.2) and its Taylor series
    (error under 1e-11). On the negative real axis the angle is pi; at the origin, 0. Both are first divided by
    the larger magnitude (the angle is the same), so x * x + y * y cannot overflow."""
    scale = trainrun.maximum(x.abs(), y.abs()).detach()
    scale = trainrun.where((scale == 0) | ~trainrun.isfinite(scale), trainrun.ones_like(scale), scale)
    x, y = x / scale, y / scale
    r = trainrun.sqrt(x * x + y * y)
    behind = (r + x) == 0
    u = y / trainrun.where(behind, trainrun.ones_like(r), r + x)
    for _ in range(3):
        u = u / (1 + trainrun.sqrt(1 + u * u))
    u2 = u * u
    series = u * (1 - u2 * (1 / 3 - u2 * (1 / 5 - u2 * (1 / 7 - u2 * (1 / 9 - u2 * (1 / 11 - u2 / 13))))))
    angle = 16 * series
    half_turn = trainrun.where(y < 0, trainrun.full_like(angle, -math.pi), trainrun.full_like(angle, math.pi))
    angle = trainrun.where(behind, half_turn, angle)
    return trainrun.where(r == 0, trainrun.zeros_like(angle), angle)


def view_as_complex(input):  # noqa: A002
    """A real tensor whose last dim has size 2 as complex values (real, imaginary); shares its memory."""
    if isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_complex is only supported for floating point tensors")
    if input.dim() < 1 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if not input.is_floating_point():
        raise RuntimeError("view_as_complex is only supported for float and double tensors")
    return ComplexTensor(input)


def view_as_real(input):  # noqa: A002
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return input._pairs


def polar(abs, angle):  # noqa: A002
    """abs * (cos(angle) + i sin(angle))."""
    return ComplexTensor(trainrun.stack([abs * trainrun.cos(angle), abs * trainrun.sin(angle)], -1))


def complex_from_parts(real, imag):
    """torch.complex(real, imag)."""
    if real.dtype != imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {real.dtype} but got scalar type {imag.dtype} for "
                           "second argument")
    return ComplexTensor(trainrun.stack([real, imag], -1))


def is_complex(input):  # noqa: A002
    return isinstance(input, ComplexTensor)


def _install():
    namespace = vars(trainrun)
    for name, value in (("complex64", complex64), ("complex128", complex128), ("cfloat", complex64),
                        ("cdouble", complex128), ("view_as_complex", view_as_complex),
                        ("view_as_real", view_as_real), ("polar", polar), ("complex", complex_from_parts),
                        ("is_complex", is_complex), ("ComplexTensor", ComplexTensor)):
        namespace[name] = value
    namespace["real"] = lambda input: input.real if isinstance(input, ComplexTensor) else input  # noqa: A002
    namespace["imag"] = lambda input: input.imag  # noqa: A002
    real_abs = namespace["abs"]

    def abs(input, *, out=None):  # noqa: A001,A002  (|z| of a ComplexTensor; the core's abs otherwise)
        if isinstance(input, ComplexTensor):
            return input.abs()
        return real_abs(input) if out is None else real_abs(input, out=out)

    def angle(input):  # noqa: A002  (a real number's: 0, or pi where it is negative)
        if isinstance(input, ComplexTensor):
            return input.angle()
        return trainrun.where(input < 0, trainrun.full_like(input, math.pi, dtype=_float_of(input)),
                              trainrun.zeros_like(input, dtype=_float_of(input)))

    def conj(input):  # noqa: A002  (a real tensor is its own conjugate)
        return input.conj() if isinstance(input, ComplexTensor) else input
    namespace.update(abs=abs, absolute=abs, angle=angle, conj=conj, conj_physical=conj)


def _float_of(t):
    return t.dtype if t.is_floating_point() else _C._ops.get_default_dtype()


_install()
