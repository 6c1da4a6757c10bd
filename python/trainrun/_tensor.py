"""The Python face of trainrun._C.Tensor: operators, methods under
PyTorch's names, indexing, conversions, and the tensor() factory."""
import builtins
import functools
import numbers

import numpy as np

from trainrun import _C
from trainrun._op_table import int_list

Tensor = _C.Tensor


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, a NumPy
    array or a tensor), on `device` when given. Python floats become the
    default dtype (float32 unless set_default_dtype changed it) and ints
    int64, as in PyTorch; asked for float64, they keep their full precision."""
    if _C._is_cpp_tensor(data):
        t = data.detach().clone()
    else:
        array = np.array(data)
        if array.dtype.kind == "c" or getattr(dtype, "is_complex", False):
            return _complex_tensor(array, dtype, device, requires_grad, isinstance(data, (np.ndarray, np.generic)))
        if array.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
            wanted = dtype if dtype is not None and dtype.is_floating_point else _C._ops.get_default_dtype()
            if wanted != _C.dtype.float64:
                array = array.astype(np.float32)  # (the default float dtype; narrower ones from there)
        if array.dtype.kind in "iu" and array.dtype != np.uint8 and not isinstance(data, (np.ndarray, np.generic)):
            array = array.astype(np.int64)
        if array.dtype == object or array.dtype.kind not in "fiub":
            raise TypeError(f"tensor(): cannot make a tensor from {type(data).__name__} of {array.dtype}")
        t = _C.from_numpy(np.require(array, requirements="C")).clone()  # (ascontiguousarray makes 0-d 1-d)
    if dtype is not None:
        t = t.to(dtype)
    if device is None and _C._get_default_device().type != "cpu":
        device = _C._get_default_device()  # trainrun.set_default_device's
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad = True
    return t


def _complex_tensor(array, dtype, device, requires_grad, from_numpy):
    """tensor() of complex values (or of real ones with a complex dtype): a ComplexTensor (trainrun/_complex.py).
    Python numbers become complex64 (complex128 under a float64 default dtype), NumPy data keeps its width, as
    PyTorch's."""
    from trainrun import _complex
    if dtype is None:
        wide = array.dtype == np.complex128 if from_numpy else _C._ops.get_default_dtype() == _C.dtype.float64
        dtype = _complex.complex128 if wide else _complex.complex64
    if not getattr(dtype, "is_complex", False):
        raise TypeError(f"tensor(): complex values cannot become {dtype} (take .real, or ask for a complex dtype)")
    values = np.asarray(array, dtype=np.complex128)
    pairs = np.stack([values.real, values.imag], axis=-1).astype(
        np.float64 if dtype is _complex.complex128 else np.float32)
    out = _complex.view_as_complex(_C.from_numpy(np.ascontiguousarray(pairs)))
    if device is not None:
        out = out.to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _is_number(x):
    return isinstance(x, (numbers.Number, np.generic)) and not _C._is_cpp_tensor(x)


def _number(x):
    return x.item() if isinstance(x, np.generic) else x


# --- operators ---------------------------------------------------------------
# + - * / ** % & | ^ and the comparisons, with their reflections, are C++ methods (one call each); the rest
# are here.
Tensor.__matmul__ = lambda self, other: _C.matmul(self, other)
# (Extension functions are not descriptors: each method is a Python function.)
Tensor.__neg__ = lambda self: _C.neg(self)
Tensor.__abs__ = lambda self: _C.abs(self)
Tensor.__invert__ = lambda self: _C.logical_not(self) if self.dtype == _C.dtype.bool else _C.bitwise_not(self)
Tensor.__hash__ = object.__hash__  # identity, as PyTorch's (== is elementwise)


def _inplace_operand(self, *others):
    """self, or a copy of it while autograd records: the in-place forms here compute out of place and copy_ the
    result back, and the op may have saved its input for backward, which copy_ then overwrites (PyTorch's native
    in-place ops save what they overwrite the same way)."""
    if _C.is_grad_enabled() and (self.requires_grad or any(_C._is_cpp_tensor(o) and o.requires_grad
                                                           for o in others)):
        return self.clone()
    return self


def _inplace(op):
    def apply(self, other):
        return self.copy_(op(_inplace_operand(self, other), other))
    return apply


Tensor.__iadd__ = _inplace(Tensor.__add__)
Tensor.__isub__ = _inplace(Tensor.__sub__)
Tensor.__imul__ = _inplace(Tensor.__mul__)
Tensor.__itruediv__ = _inplace(Tensor.__truediv__)
Tensor.add_ = lambda self, other, alpha=1: self.copy_(_C.add(self, other, alpha=alpha))
Tensor.sub_ = lambda self, other, alpha=1: self.copy_(_C.sub(self, other, alpha=alpha))
Tensor.mul_ = _inplace(Tensor.__mul__)
Tensor.div_ = lambda self, other, *, rounding_mode=None: self.copy_(
    _inplace_operand(self, other).div(other, rounding_mode=rounding_mode))


# --- conversions --------------------------------------------------------------
def _scalar_of(self, kind):
    if self.numel() != 1:
        raise ValueError(f"only one-element tensors can be converted to Python scalars (this one has {self.numel()})")
    return kind(self.item())


Tensor.__bool__ = lambda self: _scalar_of(self, builtins.bool)
Tensor.__float__ = lambda self: _scalar_of(self, builtins.float)
Tensor.__int__ = lambda self: _scalar_of(self, builtins.int)
Tensor.__index__ = lambda self: _scalar_of(self, builtins.int)


def _tolist(self):
    t = self.detach().cpu()
    if t.dtype == _C.dtype.bfloat16:
        t = t.to(_C.dtype.float32)
    return t.contiguous().numpy().tolist()


Tensor.tolist = _tolist
Tensor.float = lambda self: self.to(_C.dtype.float32)
Tensor.double = lambda self: self.to(_C.dtype.float64)
Tensor.half = lambda self: self.to(_C.dtype.float16)
Tensor.bfloat16 = lambda self: self.to(_C.dtype.bfloat16)
Tensor.long = lambda self: self.to(_C.dtype.int64)
Tensor.int = lambda self: self.to(_C.dtype.int32)
Tensor.bool = lambda self: self.to(_C.dtype.bool)
Tensor.__iter__ = lambda self: (self.select(0, i) for i in range(len(self)))
Tensor.__array__ = lambda self, dtype=None: self.detach().cpu().contiguous().numpy() if dtype is None else \
    self.detach().cpu().contiguous().numpy().astype(dtype)


# --- devices ---------------------------------------------------------------------
_to_dtype = Tensor.to


def _to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    """to(dtype), to(device), to(device, dtype), to(other), with keywords, as
    in PyTorch. A copy between a GPU and pinned CPU memory with
    non_blocking=True returns before the data has moved. memory_format (a
    torch.memory_format): the result laid out so (preserve_format: as self)."""
    if memory_format is not None:
        from trainrun import _memory_format
        moved = _to(self, *args, dtype=dtype, device=device, non_blocking=non_blocking, copy=copy)
        return _memory_format.apply(moved, memory_format, self)
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif _C._is_cpp_tensor(a):
            dtype, device = a.dtype, a.device
        else:
            device = a
    if device is not None and not copy and (dtype is None or dtype == self.dtype):
        d = device if isinstance(device, _C.device) else _C.device(f"cuda:{device}" if isinstance(device, int)
                                                                     else device)
        if d.type == self.device.type and (d.index is None or d.index == self.device.index):
            return self  # already there: the same tensor, as in PyTorch
    if device is None:
        if dtype is None or (dtype == self.dtype and not copy):
            return self.clone() if copy else self
        return _to_dtype(self, dtype)
    return _C._cuda.to(self, device, dtype, non_blocking, copy)


Tensor.to = _to
Tensor.cuda = lambda self, device=None, non_blocking=False: _C._cuda.to(
    self, "cuda" if device is None else (device if not isinstance(device, int) else f"cuda:{device}"), None,
    non_blocking, False)
Tensor.cpu = lambda self: _C._cuda.to(self, "cpu", None, False, False)
Tensor.pin_memory = lambda self: _C._cuda.pin_memory(self)
Tensor.is_pinned = lambda self: _C._cuda.is_pinned(self)
Tensor.record_stream = lambda self, stream: _C._cuda.record_stream(self, stream)
_copy = Tensor.copy_
Tensor.copy_ = lambda self, src, non_blocking=False: _C._cuda.copy_(self, src, non_blocking) if non_blocking \
    else _copy(self, src)


# --- methods under PyTorch's names ----------------------------------------------
def _dims(dim):
    if dim is None:
        return []
    return [dim] if isinstance(dim, builtins.int) else list(dim)


# (The pointwise ops of the op list, tensor/ops.yaml, are C++ methods generated from it.)
Tensor.div = lambda self, other, *, rounding_mode=None: _C.div(self, other, rounding_mode=rounding_mode)
Tensor.matmul = Tensor.__matmul__
def _correction(unbiased, correction):
    """PyTorch 2's correction= (the divisor is N - correction) or the older unbiased= flag."""
    if correction is None:
        return 1 if unbiased else 0
    if float(correction) != int(correction):
        raise NotImplementedError(f"var/std: a fractional correction ({correction}) is not supported")
    return int(correction)


Tensor.var = lambda self, dim=None, unbiased=True, keepdim=False, *, correction=None: _C.var(
    self, _dims(dim), _correction(unbiased, correction), keepdim)
Tensor.masked_fill = lambda self, mask, value: _C.masked_fill(self, mask, _number(value))
# Methods that take the op's own arguments (softmax/log_softmax: dim=, dtype=).
for _name in ("scatter", "norm", "chunk", "split", "where", "bmm",
              "gelu", "silu", "log_softmax", "softmax"):
    if hasattr(_C, _name):
        setattr(Tensor, _name, (lambda op: lambda self, *args, **kwargs: op(self, *args, **kwargs))(getattr(_C, _name)))
Tensor.std = lambda self, dim=None, unbiased=True, keepdim=False, *, correction=None: _C.std(
    self, _dims(dim), _correction(unbiased, correction), keepdim)
Tensor.isnan = lambda self: self != self
Tensor.isinf = lambda self: (self.abs() == float("inf")) if self.is_floating_point() else self != self
Tensor.isfinite = lambda self: ~(self.isnan() | self.isinf()) if self.is_floating_point() else self == self
Tensor.dot = lambda self, other: _C.dot(self, other)
Tensor.outer = lambda self, vec2: _C.outer(self, vec2)
from trainrun._size import Size  # noqa: E402
_original_shape, _original_size, _original_expand = Tensor.shape, Tensor.size, Tensor.expand
Tensor.shape = property(lambda self: Size(_original_shape.__get__(self)))


def _size_method(self, dim=None):
    return Size(_original_shape.__get__(self)) if dim is None else _original_size(self, dim)


Tensor.size = _size_method
Tensor.expand = lambda self, *sizes, size=None: _original_expand(self, int_list(sizes, "expand", "size", size))
Tensor.expand_as = lambda self, other: _original_expand(self, list(other.shape))
Tensor.type_as = lambda self, other: self.to(other.dtype)


from trainrun import _factories  # noqa: E402


def _new(maker):
    """Tensor.new_*: a factory whose dtype and device default to the tensor's."""
    def new(self, *args, dtype=None, device=None, requires_grad=False, **size):  # size= as a keyword too
        return maker(*args, **size, dtype=dtype if dtype is not None else self.dtype,
                     device=device if device is not None else self.device, requires_grad=requires_grad)
    return new


Tensor.new_zeros, Tensor.new_ones, Tensor.new_empty, Tensor.new_full = (
    _new(_factories.zeros), _new(_factories.ones), _new(_factories.empty), _new(_factories.full))
from trainrun import _reductions  # noqa: E402
Tensor.max, Tensor.min, Tensor.sort, Tensor.topk = (_reductions.max, _reductions.min, _reductions.sort,
                                                    _reductions.topk)
def _backward(self, gradient=None, retain_graph=False, create_graph=False, inputs=None):
    """Accumulates this tensor's gradient into the leaves' .grad (with inputs=, into those only)."""
    if inputs is not None:
        from trainrun import autograd
        return autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)
    from trainrun import _anomaly_mode
    _anomaly_mode.check_roots([self], "backward")
    return _C.backward(self, gradient, retain_graph, create_graph)


Tensor.backward = _backward
Tensor.T = property(lambda self: self.permute(list(range(self.ndim))[::-1]))
Tensor.itemsize = property(lambda self: self.element_size())  # bytes per element
Tensor.nbytes = property(lambda self: self.numel() * self.element_size())  # bytes of the elements the view holds
Tensor.is_floating_point = lambda self: self.dtype.is_floating_point
_original_view, _original_reshape, _original_permute = Tensor.view, Tensor.reshape, Tensor.permute


def _view(self, *shape, size=None, dtype=None):
    """view(*shape), or view(dtype): the same memory read as another dtype (its last dim rescaled when the
    element sizes differ), as PyTorch's."""
    if dtype is None and len(shape) == 1 and isinstance(shape[0], _C.dtype):
        dtype = shape[0]
    if dtype is not None:
        return _view_as_dtype(self, dtype)
    return _original_view(self, int_list(shape, "view", "size", size))


def _view_as_dtype(self, dtype):
    if dtype == self.dtype:
        return _original_view(self, list(self.shape))
    if self.requires_grad and _C.is_grad_enabled():
        raise RuntimeError("view(dtype): a tensor that requires grad cannot be viewed as another dtype (the result "
                           "has no gradient); detach() it first")
    old, new = self.element_size(), _C.empty([0], dtype=dtype).element_size()
    if old == new:  # the same elements' bytes read as the other dtype, on any device (bfloat16 as int16, ...)
        return _C._tensor_on_storage(self.untyped_storage(), dtype, list(self.shape), list(self.stride()),
                                     self.storage_offset())
    if self.device.type != "cpu":
        raise NotImplementedError(f"view(dtype): reading a {self.device.type} tensor's memory as a dtype of another "
                                  "element size is supported on the CPU only")
    if _C.dtype.bfloat16 in (self.dtype, dtype):
        raise NotImplementedError("view(dtype): bfloat16 has no NumPy dtype to read the memory through; view it as "
                                  "int16 or float16 first, or convert with .to()")
    if old != new and (self.dim() == 0 or self.stride(-1) != 1):
        raise RuntimeError(f"view(dtype): viewing a {self.dtype} tensor as {dtype} changes the element size, so the "
                           "last dim must be contiguous (stride 1) and the tensor at least 1-D")
    if old < new and (self.shape[-1] * old) % new:
        raise RuntimeError(f"view(dtype): the last dim's size ({self.shape[-1]}) times {old} bytes is not a multiple "
                           f"of {new} bytes")
    array = self.detach().numpy().view(_numpy_dtype(dtype))
    return _C.from_numpy(array)


def _numpy_dtype(dtype):
    return np.dtype(str(dtype).split(".")[-1])


Tensor.view = _view
Tensor.reshape = lambda self, *shape_, shape=None: _original_reshape(self, int_list(shape_, "reshape", "shape",
                                                                                      shape))
Tensor.permute = lambda self, *dims_, dims=None: _original_permute(self, int_list(dims_, "permute", "dims", dims))


# --- indexing ---------------------------------------------------------------------
from trainrun import _indexing  # noqa: E402  (advanced indexing: tensors and lists in an index)

def _basic_index(self, index):
    """A view for ints, slices, None and Ellipsis (PyTorch's basic indexing; _indexing.py walks the index)."""
    view, advanced = _indexing._split(self, index)
    return view


_select = Tensor.select  # the C++ method (the op table later wraps it for keyword arguments)


def _getitem(self, index):
    if type(index) is builtins.int:  # x[i]: C++ checks the bounds (IndexError)
        if self.ndim == 0:
            raise IndexError("invalid index of a 0-dim tensor")
        return _select(self, 0, index)
    if isinstance(index, (list, np.ndarray)):
        index = tensor(index)
    if _C._is_cpp_tensor(index) and index.ndim > 0 or (_C._is_cpp_tensor(index) and index.dtype == _C.dtype.bool):
        if index.dtype == _C.dtype.bool and index.ndim == self.ndim:
            return _C.masked_select(self, index)
        if index.dtype != _C.dtype.bool:
            flat = index.reshape(-1).to(_C.dtype.int64)
            return _C.index_select(self, 0, flat).reshape(list(index.shape) + list(self.shape[1:]))
    if _indexing.is_advanced(index):  # tensors or lists inside a tuple: x[rows, cols], x[:, [0, 2]]
        return _indexing.getitem(self, index)
    return _basic_index(self, index)


def _setitem(self, index, value):
    if isinstance(index, (list, np.ndarray)):
        index = tensor(index)
    if _C.is_grad_enabled() and (self.requires_grad or (_C._is_cpp_tensor(value) and value.requires_grad)) and \
            _is_whole(self):  # (a part of a tensor is written through its view below: C++ copy_'s CopySlices)
        return _setitem_recorded(self, index, value)
    if _C._is_cpp_tensor(index) and index.dtype == _C.dtype.bool:
        # A mask over the leading dims selects whole rows: widen it to self's shape.
        mask = index.reshape(list(index.shape) + [1] * (self.ndim - index.ndim)).expand(*self.shape) \
            if index.ndim < self.ndim else index
        if _is_number(value):
            self.copy_(_C.masked_fill(self, mask, _number(value)))
            return
        value = value if _C._is_cpp_tensor(value) else tensor(value, dtype=self.dtype)
        # x[mask] = v: v broadcasts to the selection's shape (count, *trailing), as in PyTorch.
        selected = [int(index.sum().item())] + list(self.shape[index.ndim:])
        self.masked_scatter_(mask, value.to(self.dtype).expand(*selected).contiguous())
        return
    if _indexing.is_advanced(index):
        _indexing.setitem(self, index, _number(value) if _is_number(value) else value)
        return
    view = _basic_index(self, index)
    if _is_number(value):
        view.fill_(_number(value))
    else:
        view.copy_(value if _C._is_cpp_tensor(value) else tensor(value, dtype=self.dtype))


def _is_whole(t):
    """t is all of its storage (not a view into a larger tensor)."""
    return t.device.type != "meta" and t.storage_offset() == 0 and t.is_contiguous() and \
        t.numel() * t.element_size() == t.untyped_storage().nbytes()


def _setitem_recorded(self, index, value):
    """self[index] = value while autograd records (PyTorch's CopySlices): the write as a scatter into the whole
    tensor, so self's gradient is the incoming one with the written positions zeroed and value's is the incoming
    one at them (a write through a view would leave the view's base without that history)."""
    if self.requires_grad and self.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    positions = _C.arange(self.numel(), device=self.device).reshape(list(self.shape))[index]
    if _C._is_cpp_tensor(value):
        values = value.to(self.dtype).expand(*positions.shape)
    else:
        values = _C.full(list(positions.shape), _number(value), dtype=self.dtype, device=self.device)
    written = self.reshape([-1]).scatter(0, positions.reshape([-1]), values.reshape([-1]))
    if self._is_view():  # written through the view: its base's history is rebased too (C++ copy_, CopySlices)
        self.copy_(written.reshape(list(self.shape)))
        return
    _overwrite(self, written.reshape(list(self.shape)))


def _overwrite(dst, src):
    """dst takes src's values and history (dst's own history reaches src's through the scatter): written without
    copy_'s refusal of a tensor that has views, as PyTorch's setitem writes into a tensor a view was read from."""
    _copy_slices().apply(dst, src)


@functools.lru_cache(maxsize=None)
def _copy_slices():
    """The autograd.Function _overwrite applies (made once, on first use: autograd is imported after this)."""
    from trainrun.autograd import Function

    class CopySlices(Function):
        @staticmethod
        def forward(ctx, target, source):
            ctx.mark_dirty(target)
            return target.copy_(source)

        @staticmethod
        def backward(ctx, grad):
            return None, grad

    return CopySlices


Tensor.__getitem__ = _getitem
Tensor.__setitem__ = _setitem


# ---- repr: PyTorch's suffixes ------------------------------------------------------------------------------
_plain_repr = Tensor.__repr__


def _repr(self):
    """tensor([...]) with PyTorch's autograd suffix: requires_grad=True on a leaf that requires grad, or the
    node that made it (grad_fn=<MulBackward0>: the node's PyTorch name)."""
    from trainrun import _printoptions
    grad_fn = self.grad_fn
    if grad_fn is not None:
        suffixes = [f"grad_fn=<{grad_fn.name()}>"]
    else:
        suffixes = ["requires_grad=True"] if self.requires_grad else []
    text = _plain_repr(self, suffixes)
    cls = type(self)
    if cls is not Tensor and text.startswith("tensor(") and \
            cls.__dict__.get("__torch_function__") is not _C._disabled_torch_function_impl:
        text = cls.__name__ + text[len("tensor"):]  # a subclass's name, as PyTorch's (nn.Parameter excepted)
    if _printoptions.customized() and self.device.type != "meta" and self.numel():  # set_printoptions
        head = _printoptions.format_values(self)
        rest = text[text.rindex("]") + 1:] if "]" in text else text[text.index(",", len("tensor(")):] \
            if "," in text else ")"
        text = head + rest
    return text


Tensor.__repr__ = _repr


def _format(self, format_spec):
    """f"{loss:.4f}": a one-element 0-dim tensor formats as its number, as PyTorch's; others as their repr."""
    if self.dim() == 0 and self.device.type != "meta":
        return self.item().__format__(format_spec)
    return object.__format__(self, format_spec)


Tensor.__format__ = _format


# ---- tensor hooks: a handle to remove them ----------------------------------------------------------------
_register_hook = Tensor.register_hook


class _HookHandle:
    """What register_hook returns: handle.remove() stops the hook (it stays registered, doing nothing)."""

    def __init__(self):
        self.removed = False

    def remove(self):
        self.removed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _register_hook_with_handle(self, hook):
    """hook(grad) runs when the gradient for this tensor is computed; a tensor it returns replaces the
    gradient. Returns a handle whose remove() unregisters it, as PyTorch's."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    handle = _HookHandle()

    def call(grad):
        return None if handle.removed else hook(grad)
    _register_hook(self, call)
    return handle


Tensor.register_hook = _register_hook_with_handle


def _register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) after this leaf's gradient is accumulated into .grad (PyTorch's optimizer-in-backward
    idiom); returns a removable handle. The hook gets this very object (a Parameter stays one) while it lives."""
    import weakref
    handle = _HookHandle()
    try:
        owner = weakref.ref(self)  # (weakly: the hook lives in the tensor's autograd metadata)
    except TypeError:
        owner = None

    def call(leaf):
        if not handle.removed:
            hook(owner() if owner is not None and owner() is not None else leaf)
    self._register_post_accumulate_grad_hook(call)
    return handle


Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook


# ---- Tensor.type: PyTorch's legacy type names ----------------------------------------------------------------
from trainrun._legacy_tensor_types import LEGACY_TYPES as _LEGACY_TYPES  # noqa: E402


def _type(self, dtype=None, non_blocking=False):
    """No argument: the legacy type name ('torch.FloatTensor', 'torch.cuda.FloatTensor'), as PyTorch writes it.
    A dtype, such a name or such a type (torch.DoubleTensor): the tensor in that dtype."""
    if isinstance(dtype, type) and hasattr(dtype, "dtype"):  # torch.DoubleTensor
        dtype = dtype.dtype
    if dtype is None:
        name = _LEGACY_TYPES.get(str(self.dtype).rsplit(".", 1)[-1], "Tensor")
        return f"torch.cuda.{name}" if self.device.type == "cuda" else f"torch.{name}"
    if isinstance(dtype, str):
        by_name = {v: k for k, v in _LEGACY_TYPES.items()}
        short = dtype.rsplit(".", 1)[-1]
        if short not in by_name:
            raise ValueError(f"type(): invalid type: '{dtype}'")
        import trainrun
        target = getattr(trainrun, by_name[short])
        moved = self.cuda() if ".cuda." in dtype and self.device.type != "cuda" else self
        return moved.to(target)
    return self.to(dtype)


Tensor.type = _type


# ---- round(decimals=) ---------------------------------------------------------------------------------------
_round = Tensor.round


def _round_decimals(self, decimals=0):
    """Round half to even, at `decimals` places (negative: tens, hundreds, ...)."""
    if decimals == 0:
        return _round(self)
    scale = 10.0 ** decimals
    return _round(self * scale) / scale


Tensor.round = _round_decimals


from trainrun import _tensor_subclass  # noqa: E402
_tensor_subclass.install()  # (as_subclass, _make_subclass, and constructing subclasses as PyTorch's)
