"""PyTorch's in-place view ops (unsqueeze_, squeeze_, t_, transpose_, swapdims_, as_strided_, resize_): the
tensor itself takes the view's geometry over the same storage. A tensor that requires grad is refused (autograd
would have to rebase its history), as the error says."""
from trainrun import _C

Tensor = _C.Tensor


def _taking(name, make_view):
    def method(self, *args, **kwargs):
        if self.requires_grad and _C.is_grad_enabled():
            raise RuntimeError(f"{name}: an in-place view op on a tensor that requires grad is not supported; "
                               f"use the out-of-place {name[:-1]} (or call it under no_grad())")
        view = make_view(self, *args, **kwargs)
        self._set_geometry(list(view.shape), list(view.stride()), view.storage_offset())
        return self
    method.__name__ = name
    return method


def _resized(self, *sizes, memory_format=None):
    sizes = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else list(sizes)
    numel = 1
    for s in sizes:
        numel *= s
    available = self.untyped_storage().nbytes() // self.element_size() - self.storage_offset()
    if numel > available:
        raise RuntimeError(f"resize_: {sizes} needs {numel} elements, the storage has {available} past the "
                           "tensor's offset (trainrun does not grow a storage in place)")
    strides, step = [], 1
    for s in reversed(sizes):
        strides.insert(0, step)
        step *= max(s, 1)
    return _C._ops.as_strided(self, sizes, strides, self.storage_offset())


for _name, _view in (("unsqueeze_", lambda t, dim: t.unsqueeze(dim)),
                     ("squeeze_", lambda t, dim=None: t.squeeze() if dim is None else t.squeeze(dim)),
                     ("t_", lambda t: t.t()), ("transpose_", lambda t, d0, d1: t.transpose(d0, d1)),
                     ("swapdims_", lambda t, d0, d1: t.transpose(d0, d1)),
                     ("swapaxes_", lambda t, d0, d1: t.transpose(d0, d1)),
                     ("as_strided_", lambda t, size, stride, storage_offset=None: _C._ops.as_strided(
                         t, list(size), list(stride), t.storage_offset() if storage_offset is None
                         else storage_offset)),
                     ("resize_", _resized)):
    setattr(Tensor, _name, _taking(_name, _view))
