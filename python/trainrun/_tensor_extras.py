"""The rest of the Tensor surface PyTorch code leans on: .data, .grad_fn,
in-place forms of the unary ops, the random fills, sum/mean with dtype=,
default dtype, finfo/iinfo, and the small module-level helpers (is_tensor,
numel, as_tensor, inference_mode)."""
import builtins
import contextlib

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


def _refuse_generator(where, generator):
    if generator is not None:
        raise NotImplementedError(f"{where}(generator=...): random fills draw from trainrun's default generator "
                                  "(seed it with trainrun.manual_seed)")


def _uniform_(self, from_=0.0, to=1.0, *, generator=None):
    _refuse_generator("uniform_", generator)
    with no_grad():
        _ops.uniform_(self, from_, to)
    return self


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    _refuse_generator("normal_", generator)
    with no_grad():
        _ops.normal_(self, mean, std)
    return self


def _bernoulli_(self, p=0.5, *, generator=None):
    _refuse_generator("bernoulli_", generator)
    with no_grad():
        _ops.bernoulli_(self, float(p))
    return self


def _random_(self, from_=0, to=None, *, generator=None):
    _refuse_generator("random_", generator)
    low, high = (0, from_) if to is None else (from_, to)
    with no_grad():
        return self.copy_(_C.randint(low, high, list(self.shape), dtype=self.dtype, device=self.device))


def _exponential_(self, lambd=1.0, *, generator=None):
    _refuse_generator("exponential_", generator)
    with no_grad():
        u = _ops.uniform_(_C.empty(list(self.shape), dtype=self.dtype, device=self.device), 0.0, 1.0)
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
    return isinstance(obj, Tensor) or getattr(type(obj), "_is_tensor_like", False)


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
    if isinstance(data, Tensor):
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
        if isinstance(x, Tensor):
            return x.dtype
        if isinstance(x, builtins.bool):
            return _C.dtype.bool
        if isinstance(x, builtins.int):
            return _C.dtype.int64
        return get_default_dtype()
    a, b = kind(tensor1), kind(tensor2)
    # A Python number does not widen a tensor of the same kind (PyTorch's rule for wrapped numbers).
    if isinstance(tensor1, Tensor) and not isinstance(tensor2, Tensor):
        return a if (a.is_floating_point or not b.is_floating_point) and not (a == _C.dtype.bool and b != a) \
            else promote_types(a, b)
    if isinstance(tensor2, Tensor) and not isinstance(tensor1, Tensor):
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
        info = np.iinfo({"uint8": np.uint8, "int8": np.int8, "int32": np.int32, "int64": np.int64}[type.name])
        self.bits, self.max, self.min, self.dtype = info.bits, int(info.max), int(info.min), type.name


_inference = {"on": False}


class inference_mode(contextlib.ContextDecorator):  # noqa: N801
    """No graph is recorded inside (trainrun's inference mode is no_grad)."""

    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self._guard = no_grad() if self.mode else contextlib.nullcontext()
        self._saved = _inference["on"]
        _inference["on"] = self.mode
        self._guard.__enter__()

    def __exit__(self, *exc):
        _inference["on"] = self._saved
        return self._guard.__exit__(*exc)


def is_inference_mode_enabled():
    return _inference["on"]
