"""torch.memory_format: contiguous_format, channels_last (NHWC strides for a 4-d tensor), channels_last_3d (NDHWC
for 5-d) and preserve_format, and the `memory_format=` arguments of Tensor.contiguous, is_contiguous, clone, to and
the *_like factories. A tensor's layout is its strides, as in PyTorch: channels_last is the NCHW tensor whose
channels are adjacent in memory. Kernels read any strides, so results are the same in every format."""
from trainrun import _C

Tensor = _C.Tensor


class memory_format:  # noqa: N801  (PyTorch's name)
    def __init__(self, name, dims):
        self._name, self._dims = name, dims

    def __repr__(self):
        return f"torch.{self._name}"

    def __reduce__(self):
        return self._name  # (pickles as the module-level instance)


contiguous_format = memory_format("contiguous_format", None)
preserve_format = memory_format("preserve_format", None)
channels_last = memory_format("channels_last", 4)
channels_last_3d = memory_format("channels_last_3d", 5)
FORMATS = (contiguous_format, preserve_format, channels_last, channels_last_3d)


def _check(fmt, t, what):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{what}(): memory_format must be a torch.memory_format, got {type(fmt).__name__}")
    if fmt._dims is not None and t.dim() != fmt._dims:
        raise RuntimeError(f"required rank {fmt._dims} tensor to use {fmt._name} format, got a tensor of shape "
                           f"{list(t.shape)}")


def _last_order(dims):
    """The dims from outermost to innermost in memory for channels_last(_3d): N, spatial..., C."""
    return [0] + list(range(2, dims)) + [1]


def _is_in(t, fmt):
    """Whether t's strides are fmt's dense strides (dims of size 1 may have any stride, as in PyTorch)."""
    if fmt._dims is None:
        return _cpp_is_contiguous(t)
    expected = 1
    for d in reversed(_last_order(fmt._dims)):
        size = t.shape[d]
        if size != 1 and t.stride(d) != expected:
            return False
        expected *= size
    return True


def _to_last(t, fmt):
    """t with fmt's strides (a copy unless it has them): the permuted tensor made contiguous, permuted back, so
    autograd sees views and one contiguous()."""
    order = _last_order(fmt._dims)
    back = [order.index(d) for d in range(fmt._dims)]
    return _cpp_contiguous(t.permute(order)).permute(back)


def _suggested(t):
    """preserve_format's choice for t: channels_last(_3d) when t is laid out so and not plainly contiguous."""
    for fmt in (channels_last, channels_last_3d):
        if t.dim() == fmt._dims and _is_in(t, fmt) and not _cpp_is_contiguous(t):
            return fmt
    return contiguous_format


_cpp_contiguous, _cpp_is_contiguous, _cpp_clone = Tensor.contiguous, Tensor.is_contiguous, Tensor.clone


def contiguous(self, memory_format=contiguous_format):
    if memory_format is contiguous_format:
        return _cpp_contiguous(self)
    _check(memory_format, self, "contiguous")
    if memory_format is preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return self if _is_in(self, memory_format) else _to_last(self, memory_format)


def is_contiguous(self, memory_format=contiguous_format):
    if memory_format is contiguous_format:
        return _cpp_is_contiguous(self)
    _check(memory_format, self, "is_contiguous")
    if memory_format is preserve_format:
        raise RuntimeError("is_contiguous(): preserve_format is not a layout to check against")
    return _is_in(self, memory_format)


def clone(self, *, memory_format=preserve_format):
    _check(memory_format, self, "clone")
    fmt = _suggested(self) if memory_format is preserve_format else memory_format
    if fmt is contiguous_format:
        return _cpp_clone(self)
    order = _last_order(fmt._dims)
    back = [order.index(d) for d in range(fmt._dims)]
    return _cpp_clone(self.permute(order)).permute(back)


def apply(t, memory_format, source=None):
    """t (a new tensor) laid out as memory_format says; preserve_format follows `source` (the *_like
    factories' input, to()'s self)."""
    if memory_format is None:
        return t
    _check(memory_format, t, "memory_format")
    if memory_format is preserve_format:
        memory_format = _suggested(source) if source is not None else contiguous_format
    if memory_format is contiguous_format:
        return t if _cpp_is_contiguous(t) else _cpp_contiguous(t)
    return contiguous(t, memory_format)


Tensor.contiguous, Tensor.is_contiguous, Tensor.clone = contiguous, is_contiguous, clone
