"""Python subclasses of Tensor, made as PyTorch makes them:

- `t.as_subclass(cls)`: the same tensor (data, autograd history) as an instance of cls;
- `Tensor._make_subclass(cls, data, require_grad)`: a new tensor on data's memory, as cls, a leaf;
- `MyTensor(data, extra)` whose `__new__` calls `super().__new__(cls, data)` and whose `__init__` takes other
  arguments without calling Tensor.__init__ (the pattern of PyTorch's subclassing docs): the instance is the
  tensor `data`. pybind11, which binds Tensor, ignores the arguments of __new__ and insists that __init__ reach
  Tensor's, so subclasses are called through the metaclass here; Tensor itself and classes that opt out of
  __torch_function__ (nn.Parameter, nn.Buffer) keep pybind11's way."""
from trainrun import _C

Tensor = _C.Tensor


def _as_subclass(self, cls):
    """The same tensor (data, autograd history) as an instance of cls, a subclass of Tensor."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: expected a subclass of trainrun.Tensor, got {cls!r}")
    out = Tensor.__new__(cls)  # (not cls.__new__: a subclass's own __new__ may take other arguments)
    Tensor.__init__(out, self)
    return out


def _make_subclass(cls, data, require_grad=False, dispatch_sizes_strides_policy=None, dispatch_device=False,
                   dispatch_layout=False, _extra_dispatch_keys=None):
    """A tensor on data's memory, detached from its history, as an instance of cls (requiring grad if asked)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"_make_subclass: expected a subclass of trainrun.Tensor, got {cls!r}")
    out = Tensor.__new__(cls)
    Tensor.__init__(out, data.detach())
    out.requires_grad_(require_grad)
    return out


def _constructs_through_pybind(cls):
    return cls is Tensor or getattr(cls, "__torch_function__", None) is _C._disabled_torch_function_impl


def install():
    Tensor.as_subclass = _as_subclass
    Tensor._make_subclass = staticmethod(_make_subclass)
    meta = type(Tensor)
    pybind_call = meta.__call__

    def __call__(cls, *args, **kwargs):
        if _constructs_through_pybind(cls):
            return pybind_call(cls, *args, **kwargs)
        obj = cls.__new__(cls, *args, **kwargs)
        if not isinstance(obj, cls):
            return obj
        if type(obj).__init__ is not Tensor.__init__:
            type(obj).__init__(obj, *args, **kwargs)
        if not _C._tensor_is_initialized(obj):  # (nothing gave it a tensor: PyTorch's Tensor.__new__(cls, ...))
            if args and _C._is_cpp_tensor(args[0]):
                Tensor.__init__(obj, args[0])
            else:
                Tensor.__init__(obj, *args, **kwargs)
        return obj

    meta.__call__ = __call__
