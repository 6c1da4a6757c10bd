"""How tensors are copied, pickled and shared, as in PyTorch:

- `copy.deepcopy(tensor)` and `deepcopy(module)`: new memory, the same values,
  requires_grad and .grad; views that shared a storage share the new one.
- `pickle.dumps(tensor)`: the storage's bytes travel in the pickle (so a
  tensor, a Parameter, a device and a dtype pickle and unpickle anywhere).
- `tensor.share_memory_()` / `is_shared()`: the storage moves into shared
  memory (tensor/shared_memory.h); trainrun.multiprocessing then passes it
  to other processes as a descriptor instead of bytes."""
import copy

import numpy as np

import trainrun
from trainrun import _C

Tensor = _C.Tensor
UntypedStorage = _C.UntypedStorage


def _storage_bytes_tensor(storage):
    """The storage's bytes as a flat uint8 tensor (a view, no copy)."""
    return _C._tensor_on_storage(storage, trainrun.uint8, [storage.nbytes()], [1], 0)


def _copy_storage(storage):
    return _storage_bytes_tensor(storage).clone().untyped_storage()


def _refuse_non_leaf(t, what):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(f"Only Tensors created explicitly by the user (graph leaves) support the {what} protocol "
                           "at the moment. If you were attempting to deepcopy a module, this may be because of a "
                           "torch.nn.utils.weight_norm usage" if what == "deepcopy" else
                           "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")


def _deepcopy(self, memo):
    # Keyed by the tensor itself, not the Python handle: C++ modules hand out
    # a new handle per access, and tied weights must stay one tensor.
    key_self = ("trainrun.tensor", self._cdata)
    if key_self in memo:
        return memo[key_self]
    _refuse_non_leaf(self, "deepcopy")
    storage = self.untyped_storage()
    key = ("trainrun.storage", storage.data_ptr(), storage.nbytes())
    new_storage = memo.get(key)
    if new_storage is None:
        new_storage = memo[key] = _copy_storage(storage) if storage.nbytes() else storage
    # A 0-byte storage is shared as is: nothing to copy, and an empty block has no address to key on.
    values = _C._tensor_on_storage(new_storage, self.dtype, list(self.shape), list(self.stride()),
                                   self.storage_offset()) if storage.nbytes() else self.detach().clone()
    if type(self) is not Tensor:  # Parameter and other subclasses keep their class
        out = values.as_subclass(type(self))
        out.__dict__.update(copy.deepcopy(self.__dict__, memo))
    else:
        out = values
    out.requires_grad_(self.requires_grad)
    memo[key_self] = out
    if self.grad is not None:
        out.grad = _deepcopy(self.grad, memo)
    return out


def _rebuild_tensor(data, dtype_name, size, stride, storage_offset, requires_grad, device, cls=None):
    storage = data if isinstance(data, UntypedStorage) else _rebuild_storage(data)
    t = _C._tensor_on_storage(storage, getattr(trainrun, dtype_name), list(size), list(stride), storage_offset)
    if device != "cpu":
        t = t.to(device)
    if cls is not None and cls is not Tensor:
        t = t.as_subclass(cls)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_storage(data):
    return _C.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()).untyped_storage()


def _reduce_ex(self, protocol):
    # Plain pickling takes a non-leaf too (it arrives as a leaf, as in PyTorch);
    # only sending to another process refuses it (multiprocessing/_reductions.py).
    host = self.detach() if self.device.type == "cpu" else self.detach().cpu()
    storage = host.untyped_storage()
    data = _storage_bytes_tensor(storage).numpy().tobytes() if storage.nbytes() else b""
    return (_rebuild_tensor, (data, str(self.dtype).rsplit(".", 1)[-1], tuple(host.shape), tuple(host.stride()),
                              host.storage_offset(), self.requires_grad, str(self.device), type(self)))


def _share_memory_(self):
    self.untyped_storage().share_memory_()
    return self


def _is_shared(self):
    return self.untyped_storage().is_shared()


Tensor.__deepcopy__ = _deepcopy
Tensor.__reduce_ex__ = _reduce_ex
Tensor.share_memory_ = _share_memory_
Tensor.is_shared = _is_shared
UntypedStorage.__reduce__ = lambda self: (_rebuild_storage, (_storage_bytes_tensor(self).numpy().tobytes(),))
_C.device.__reduce__ = lambda self: (_C.device, (str(self),))


def _dtype_by_name(name):
    return getattr(trainrun, name)


# A dtype unpickles as the very object (trainrun.float16 is trainrun.float16), as in PyTorch.
_C.dtype.__reduce__ = lambda self: (_dtype_by_name, (str(self).rsplit(".", 1)[-1],))
