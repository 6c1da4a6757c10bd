"""PyTorch's legacy tensor types, torch.FloatTensor, torch.LongTensor, ...: calling one makes a CPU tensor of its
dtype (`FloatTensor(2, 3)`: uninitialized of that size; `LongTensor([1, 2])`: from data; `FloatTensor()`: empty),
isinstance(t, torch.FloatTensor) asks for a CPU float32 tensor, and `t.type(torch.DoubleTensor)` converts."""
from trainrun import _C

# dtype name -> legacy type name (Tensor.type() writes these)
LEGACY_TYPES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
                "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor"}


class _LegacyTensorType(type):
    def __instancecheck__(cls, obj):
        return _C._is_cpp_tensor(obj) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __repr__(cls):
        return f"<class 'torch.{cls.__name__}'>"


def make_default(*args, device=None):
    """torch.Tensor(...) called as a constructor, PyTorch's legacy form: a CPU tensor of the default dtype
    (`torch.Tensor(2, 3)` uninitialized, `torch.Tensor([1, 2])` from data, `torch.Tensor()` empty)."""
    from trainrun import get_default_dtype

    class _Default:  # (the default dtype at the time of the call)
        dtype = get_default_dtype()
        __name__ = "Tensor"
    return _make(_Default, *args, device=device)


def _make(cls, *args, device=None):
    from trainrun import Size, empty, tensor
    if device is not None and _C.device(device).type != "cpu":
        raise RuntimeError(f"legacy constructor expects device type: cpu but device type: {_C.device(device).type} "
                           "was passed")
    if not args:
        return empty(0, dtype=cls.dtype)
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args) or (len(args) == 1 and
                                                                             isinstance(args[0], Size)):
        sizes = list(args[0]) if isinstance(args[0], Size) else list(args)
        return empty(*sizes, dtype=cls.dtype)
    if len(args) == 1:
        data = args[0]
        if _C._is_cpp_tensor(data):
            return data.to(cls.dtype)
        return tensor(data, dtype=cls.dtype)
    raise TypeError(f"new(): invalid arguments to torch.{cls.__name__}: {', '.join(type(a).__name__ for a in args)}"
                    " (expected sizes as ints, a torch.Size, or data)")


def _define():
    types = {}
    for dtype_name, type_name in LEGACY_TYPES.items():
        if not hasattr(_C.dtype, dtype_name):  # (a dtype the core does not have)
            continue
        cls = _LegacyTensorType(type_name, (), {"dtype": getattr(_C.dtype, dtype_name), "__new__": _make,
                                                "__module__": "trainrun"})
        types[type_name] = cls
    return types


TYPES = _define()
