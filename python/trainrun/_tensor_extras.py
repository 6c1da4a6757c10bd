"""The rest of the Tensor surface PyTorch code leans on: .data, .grad_fn,
in-place forms of the unary ops, the random fills, sum/mean with dtype=,
default dtype, finfo/iinfo, and the small module-level helpers (is_tensor,
numel, as_tensor, inference_mode)."""
import builtins
import contextlib
import weakref

import numpy as np

from trainrun import _C
from trainrun._autograd import no_grad

Tensor = _C.Tensor
_ops = _C._ops


# ---- .data and .grad_fn ---------------------------------------------------------------------------
def _get_data(self):
    """The same memory, detached from autograd (writes show in the tensor; no gradient flows)."""
    return self.detach()


def _set_data(self, value):
    if list(value.shape) != list(self.shape) or value.dtype != self.dtype:
        raise NotImplementedError(f"tensor.data = ...: trainrun copies into the existing memory, so the new value "
                                  f"must have the same shape and dtype ({list(self.shape)}, {self.dtype}); got "
                                  f"{list(value.shape)}, {value.dtype}")
    with no_grad():
        self.detach().copy_(value)


Tensor.data = property(_get_data, _set_data)


GradFn = _C.Node  # torch.autograd.graph.Node: name(), next_functions, register_hook, register_prehook


def _node_register_hook(self, fn):
    """fn(grad_inputs, grad_outputs) after this node computed its input gradients (what it returns is not used
    here: a C++ node's results are final); returns a handle whose remove() turns the hook off."""
    flag = _C._HookFlag()
    self._register_hook(fn, flag)
    return flag


def _node_register_prehook(self, fn):
    """fn(grad_outputs) before this node runs: it may return replacement gradients (a tuple), or None."""
    flag = _C._HookFlag()
    self._register_prehook(fn, flag)
    return flag


GradFn.register_hook = _node_register_hook
GradFn.register_prehook = _node_register_prehook
GradFn.metadata = property(lambda self: self.__dict__.setdefault("_metadata", {}))


def _grad_fn(self):
    return _C._grad_fn_node(self)


Tensor.grad_fn = property(_grad_fn)


# ---- .grad: one Python object per gradient, as PyTorch's (p.grad is p.grad) --------------------------------
_cpp_grad = Tensor.grad
# The tensor (by its C++ address) -> the Python object last handed out for its gradient, held weakly: never
# keeping a gradient's memory, and keyed by the tensor so that every Python handle of it agrees.
_grad_objects = weakref.WeakValueDictionary()


def _get_grad(self):
    """The gradient, as the same Python object for as long as it is the same tensor and someone holds it."""
    g = _cpp_grad.fget(self)
    if g is None:
        return None
    held = _grad_objects.get(self._cdata)
    if held is not None and held._cdata == g._cdata:
        return held
    _grad_objects[self._cdata] = g
    return g


def _set_grad(self, value):
    _cpp_grad.fset(self, value)
    if value is None:
        _grad_objects.pop(self._cdata, None)
    elif _C._is_cpp_tensor(value):
        _grad_objects[self._cdata] = value  # (p.grad = g; p.grad is g)


Tensor.grad = property(_get_grad, _set_grad, doc=_cpp_grad.__doc__)


def _module_load(self, other, assign=False):
    """What load_state_dict puts in a parameter's place (PyTorch 2.3's hook for subclasses): other itself with
    assign=True, else self holding other's values."""
    with no_grad():
        return other.detach() if assign else self.copy_(other).detach()


Tensor.module_load = _module_load
Tensor.nelement = lambda self: self.numel()
Tensor.ndimension = lambda self: self.ndim


# ---- in-place forms and random fills ------------------------------------------------------------------
def _in_place(op):
    def method(self, *args, **kwargs):
        from trainrun._tensor import _inplace_operand
        self.copy_(op(_inplace_operand(self, *args, *kwargs.values()), *args, **kwargs))
        return self
    return method


for _name in ("abs", "sqrt", "rsqrt", "exp", "log", "log1p", "sigmoid", "tanh", "relu", "sin", "cos", "floor",
              "round", "sign", "erf", "silu", "pow", "remainder", "maximum", "minimum", "lerp", "addcmul", "addcdiv"):
    if hasattr(Tensor, _name) and not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _in_place(getattr(Tensor, _name)))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Tensor, _name + "_", (lambda op: lambda self, other: self.copy_(op(self, other).to(self.dtype)))(
        getattr(Tensor, _name)))


def _generator(where, generator):
    from trainrun._generator import _cpp_of
    return _cpp_of(generator, where)


def _uniform_(self, from_=0.0, to=1.0, *, generator=None):
    with no_grad():
        _ops.uniform_(self, from_, to, _generator("uniform_", generator))
    return self


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    with no_grad():
        _ops.normal_(self, mean, std, _generator("normal_", generator))
    return self


def _bernoulli_(self, p=0.5, *, generator=None):
    """1 with probability p per element: a number p as PyTorch's scalar kernel draws (53-bit uniforms), a tensor
    p as its tensor kernel (24-bit uniforms, one per element)."""
    with no_grad():
        if _C._is_cpp_tensor(p):
            u = _ops.uniform_(_C.empty(list(self.shape), dtype=_C.dtype.float32, device=self.device), 0.0, 1.0,
                              _generator("bernoulli_", generator))
            return self.copy_((u < p.to(_C.dtype.float32)).to(self.dtype))
        _ops.bernoulli_(self, float(p), _generator("bernoulli_", generator))
    return self


def _random_(self, from_=0, to=None, *, generator=None):
    """Integers in [from_, to), or [0, from_) with one bound; with none, PyTorch's full range for the dtype
    (int64: [0, 2^63), others up to 2^mantissa or their largest value)."""
    if to is None and from_ == 0:
        if self.dtype.name == "int64":  # a 64-bit draw modulo 2^63 each (the range does not fit an int64)
            from trainrun._generator import default_generator
            draws = [(generator or default_generator)._random63() for _ in range(self.numel())]
            with no_grad():
                return self.copy_(_C.from_numpy(np.asarray(draws, dtype=np.int64).reshape(list(self.shape))))
        full = {"int32": 1 << 31, "int16": 1 << 15, "int8": 1 << 7, "uint8": 1 << 8, "bool": 2,
                "float64": (1 << 53) + 1, "float32": (1 << 24) + 1, "float16": (1 << 11) + 1,
                "bfloat16": (1 << 8) + 1}
        low, high = 0, full[self.dtype.name]
    else:
        low, high = (0, from_) if to is None else (from_, to)
    with no_grad():
        if self.dtype.name == "int64":
            _ops.random_(self, int(low), int(high), _generator("random_", generator))
        else:
            target = _C.empty(list(self.shape), dtype=_C.dtype.int64, device=self.device)
            _ops.random_(target, int(low), int(high), _generator("random_", generator))
            self.copy_(target.to(self.dtype))
    return self


def _exponential_(self, lambd=1.0, *, generator=None):
    """-log(1 - u) / lambd from PyTorch's serial double uniforms (one 64-bit draw per element)."""
    with no_grad():
        u = _ops.uniform_(_C.empty(list(self.shape), dtype=_C.dtype.float64, device=self.device), 0.0, 1.0,
                          _generator("exponential_", generator))
        return self.copy_(-_C.log1p(-u) / lambd)


Tensor.uniform_, Tensor.normal_, Tensor.bernoulli_ = _uniform_, _normal_, _bernoulli_
Tensor.random_, Tensor.exponential_ = _random_, _exponential_


# ---- sum/mean with dtype= -----------------------------------------------------------------------------
def _dims(dim):
    if dim is None:
        return []
    return [dim] if isinstance(dim, builtins.int) else list(dim)


Tensor.nansum = lambda self, dim=None, keepdim=False, *, dtype=None: _C.sum(
    _C.where(self != self, _C.zeros([], dtype=self.dtype, device=self.device), self), dim, keepdim, dtype=dtype)


# ---- module-level helpers -------------------------------------------------------------------------------
def is_tensor(obj):
    """True for tensors and tensor subclasses written in Python over one (DTensor), as PyTorch's."""
    return _C._is_cpp_tensor(obj) or getattr(type(obj), "_is_tensor_like", False)


def is_floating_point(input):  # noqa: A002
    return input.is_floating_point()


def typename(obj):
    """PyTorch's: a tensor's type() ("torch.FloatTensor"), else the object's module-qualified name."""
    if is_tensor(obj):
        return obj.type()
    if hasattr(obj, "__qualname__") or hasattr(obj, "__name__"):
        module, name = getattr(obj, "__module__", "") or "", getattr(obj, "__qualname__", None) or obj.__name__
    else:
        module, name = type(obj).__module__ or "", type(obj).__qualname__
    return name if module in ("", "builtins") else f"{module}.{name}"


def numel(input):  # noqa: A002
    return input.numel()


def clone(input, *, memory_format=None):  # noqa: A002
    return input.clone() if memory_format is None else input.clone(memory_format=memory_format)


def detach(input):  # noqa: A002
    return input.detach()


def as_tensor(data, dtype=None, device=None):
    """data as a tensor, sharing memory when it already is one (or a NumPy array) of that dtype and device."""
    from trainrun._tensor import tensor
    if _C._is_cpp_tensor(data):
        out = data if dtype is None else data.to(dtype)
        return out if device is None else out.to(device)
    if isinstance(data, np.ndarray) and data.dtype.kind in "fiub" and data.dtype != np.float64 or \
            isinstance(data, np.ndarray) and dtype is None and data.dtype == np.float64:
        out = _C.from_numpy(data) if data.flags.c_contiguous else tensor(data)
        out = out if dtype is None else out.to(dtype)
        return out if device is None else out.to(device)
    return tensor(data, dtype=dtype, device=device)


def get_default_dtype():
    return _ops.get_default_dtype()


def set_default_dtype(d):
    _ops.set_default_dtype(d)


def promote_types(type1, type2):
    return _ops.promote_types(type1, type2)


def can_cast(from_, to):
    return _ops.can_cast(from_, to)


def result_type(tensor1, tensor2):
    def kind(x):
        if _C._is_cpp_tensor(x):
            return x.dtype
        if isinstance(x, builtins.bool):
            return _C.dtype.bool
        if isinstance(x, builtins.int):
            return _C.dtype.int64
        return get_default_dtype()
    a, b = kind(tensor1), kind(tensor2)
    # A Python number does not widen a tensor of the same kind (PyTorch's rule for wrapped numbers).
    if _C._is_cpp_tensor(tensor1) and not _C._is_cpp_tensor(tensor2):
        return a if (a.is_floating_point or not b.is_floating_point) and not (a == _C.dtype.bool and b != a) \
            else promote_types(a, b)
    if _C._is_cpp_tensor(tensor2) and not _C._is_cpp_tensor(tensor1):
        return result_type(tensor2, tensor1)
    return promote_types(a, b)


class finfo:  # noqa: N801  (PyTorch's name)
    """Limits of a floating dtype: bits, eps, max, min, tiny (smallest_normal), resolution."""

    def __init__(self, type=None):  # noqa: A002
        d = get_default_dtype() if type is None else type
        if d == _C.dtype.bfloat16:
            self.bits, self.eps, self.max, self.tiny, self.resolution = 16, 0.0078125, 3.3895313892515355e38, \
                1.1754943508222875e-38, 0.01
        else:
            info = np.finfo({"float16": np.float16, "float32": np.float32, "float64": np.float64}[d.name])
            self.bits, self.eps, self.max = info.bits, float(info.eps), float(info.max)
            self.tiny, self.resolution = float(info.tiny), float(info.resolution)
        self.min, self.smallest_normal, self.dtype = -self.max, self.tiny, d.name


class iinfo:  # noqa: N801
    def __init__(self, type):  # noqa: A002
        info = np.iinfo({"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
                         "int64": np.int64}[type.name])
        self.bits, self.max, self.min, self.dtype = info.bits, int(info.max), int(info.min), type.name


class inference_mode(contextlib.ContextDecorator):  # noqa: N801
    """No graph is recorded inside, and tensors allocated inside are inference tensors (is_inference()), per
    thread, as PyTorch's. inference_mode(False) turns the mode off inside an enclosing one."""

    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self._guard = no_grad() if self.mode else contextlib.nullcontext()
        self._saved = _C._is_inference_mode_enabled()
        _C._set_inference_mode(bool(self.mode))
        self._guard.__enter__()

    def __exit__(self, *exc):
        _C._set_inference_mode(self._saved)
        return self._guard.__exit__(*exc)

    def clone(self):
        return self.__class__(self.mode)


def is_inference_mode_enabled():
    return _C._is_inference_mode_enabled()


# ---- what a real, dense, strided CPU or CUDA tensor says about itself (PyTorch's attributes) --------------
class layout:  # noqa: N801  (torch.layout: the class of torch.strided)
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


strided = layout("strided")
sparse_coo = layout("sparse_coo")
Tensor.layout = property(lambda self: strided)
Tensor.is_cpu = property(lambda self: self.device.type == "cpu")
for _flag in ("is_sparse", "is_sparse_csr", "is_quantized", "is_nested", "is_mkldnn", "is_mps", "is_xpu",
              "is_vulkan", "is_ipu"):
    setattr(Tensor, _flag, property(lambda self: False))
Tensor.is_inference = lambda self: _C._is_inference(self)
Tensor.real = property(lambda self: self)  # (a real tensor is its own real part, as PyTorch's)


def _imag(self):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


Tensor.imag = property(_imag)
Tensor.absolute = lambda self: self.abs()
Tensor.absolute_ = lambda self: self.abs_()
Tensor.conj_physical = lambda self: self
Tensor.conj_physical_ = lambda self: self


def _short(self, memory_format=None):
    return self.to(_C.dtype.int16) if memory_format is None else self.to(_C.dtype.int16, memory_format=memory_format)


Tensor.short = _short
Tensor.adjoint = lambda self: self.transpose(-2, -1)
Tensor.narrow_copy = lambda self, dim, start, length: self.narrow(dim, start, length).clone()
Tensor.unsafe_chunk = lambda self, chunks, dim=0: self.chunk(chunks, dim)
Tensor.unsafe_split = lambda self, split_size, dim=0: self.split(split_size, dim)


def isposinf(input):  # noqa: A002
    return input == float("inf")


def isneginf(input):  # noqa: A002
    return input == float("-inf")


def isreal(input):  # noqa: A002
    """True everywhere for a real tensor (a complex value is real when its imaginary part is 0)."""
    if not _C._is_cpp_tensor(input) and input.is_complex():  # (a ComplexTensor)
        return input.imag == 0
    return _C.full(list(input.shape), True, dtype=_C.dtype.bool, device=input.device)


Tensor.isposinf, Tensor.isneginf, Tensor.isreal = isposinf, isneginf, isreal


def sum_to_size(self, *size):
    """self summed down to `size` (the shape it was broadcast from)."""
    target = list(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else list(size)
    lead = self.dim() - len(target)
    out = self.sum(dim=list(range(lead))) if lead > 0 else self
    dims = [i for i, n in enumerate(target) if n == 1 and out.shape[i] != 1]
    return out.sum(dim=dims, keepdim=True) if dims else out


Tensor.sum_to_size = sum_to_size


def resize_as_(self, other, memory_format=None):
    return self.resize_(other.shape)


Tensor.resize_as_ = resize_as_


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False, **_):
    from trainrun import empty_strided
    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)


Tensor.new_empty_strided = new_empty_strided


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """PyTorch's: a tensor shares obj's memory when it can (a tensor, or a NumPy array with dtype and device
    matching), copies when it must or copy=True; copy=False refuses a copy."""
    import numpy as np

    from trainrun import as_tensor, tensor
    if _C._is_cpp_tensor(obj):
        out = obj
        if (dtype is not None and dtype != obj.dtype) or (device is not None and str(device) != str(obj.device)):
            if copy is False:
                raise ValueError("asarray(): can't alias the tensor: a different dtype or device needs a copy")
            out = obj.to(dtype=dtype or obj.dtype, device=device or obj.device)
        elif copy:
            out = obj.clone()
    elif isinstance(obj, np.ndarray) and copy is not True:
        out = as_tensor(obj, dtype=dtype, device=device)
    else:
        if copy is False and not isinstance(obj, np.ndarray):
            raise ValueError(f"asarray(): a {type(obj).__name__} can't be aliased; pass copy=None or True")
        out = tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        out.requires_grad_(True)
    return out


# PyTorch's other in-place methods whose out-of-place form trainrun has (a comparison's bools are cast back into
# self's dtype by copy_, as PyTorch's in-place comparisons do). Installed once every method exists (trainrun's
# __init__ calls this last).
_MORE_IN_PLACE = ("acosh", "addbmm", "addmm", "addmv", "addr", "arccosh", "arcsinh", "arctan2", "arctanh", "asinh",
                  "atan2", "atanh", "baddbmm", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "copysign",
                  "cumprod", "cumsum", "deg2rad", "digamma", "divide", "erfc", "float_power", "floor_divide",
                  "greater", "greater_equal", "heaviside", "hypot", "ldexp", "less", "less_equal", "lgamma",
                  "logical_and", "logical_not", "logical_or", "logical_xor", "logit", "multiply", "mvlgamma",
                  "not_equal", "polygamma", "rad2deg", "renorm", "sgn", "sinc", "subtract", "true_divide", "xlogy")


def install_more_in_place():
    for name in _MORE_IN_PLACE:
        if hasattr(Tensor, name) and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _in_place(getattr(Tensor, name)))
