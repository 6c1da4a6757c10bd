"""nn.Parameter: a tensor that a Module registers as a parameter.

nn.Parameter(dtensor) gives a DTensor whose local piece is a Parameter, as PyTorch's does; the class of what
it wraps decides (its `_as_parameter`), so nn knows nothing of the distributed layer. isinstance(x,
nn.Parameter) holds for such a parameter too (it is marked `_is_param`)."""
from trainrun import _C


class _ParameterMeta(type(_C.Tensor)):
    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or getattr(obj, "_is_param", False) is True


class Parameter(_C.Tensor, metaclass=_ParameterMeta):
    """Shares `data`'s memory; requires grad unless told otherwise."""

    __torch_function__ = _C._disabled_torch_function_impl  # (ops on parameters give plain tensors, as PyTorch's)

    def __new__(cls, data=None, requires_grad=True):
        as_parameter = getattr(type(data), "_as_parameter", None)
        if as_parameter is not None:  # a tensor of another kind (a DTensor) that makes its own parameter
            return as_parameter(data, requires_grad)
        return super().__new__(cls)

    def __init__(self, data=None, requires_grad=True):
        super().__init__((data if data is not None else _C.empty([0])).detach())
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class _BufferMeta(type(_C.Tensor)):
    def __instancecheck__(cls, obj):
        return getattr(obj, "_is_buffer", False) is True


class Buffer(_C.Tensor, metaclass=_BufferMeta):
    """nn.Buffer(data, persistent=True): `self.mask = nn.Buffer(t)` registers t's tensor as a buffer, as
    register_buffer("mask", t, persistent) does (PyTorch 2.5's). It is the tensor itself (sharing data's memory,
    marked), not a subclass instance."""

    __torch_function__ = _C._disabled_torch_function_impl

    def __new__(cls, data=None, *, persistent=True):
        tensor = (data if data is not None else _C.empty([0])).detach()
        if data is not None and data.requires_grad:
            tensor.requires_grad_(True)
        tensor.persistent = persistent
        tensor._is_buffer = True
        return tensor
