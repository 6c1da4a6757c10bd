"""Tensor.storage(): PyTorch's (deprecated) TypedStorage view of a tensor's memory: its elements in the tensor's
dtype from the start of the storage, whatever the tensor's offset and strides (x.storage().data_ptr(),
len(x.storage()), x.storage().tolist()). Over Tensor.untyped_storage(), which it shares."""
import warnings

from trainrun import _C


class TypedStorage:
    is_sparse = False

    def __init__(self, tensor):
        self._tensor = tensor
        self._untyped_storage = tensor.untyped_storage()

    @property
    def dtype(self):
        return self._tensor.dtype

    @property
    def device(self):
        return self._tensor.device

    def element_size(self):
        return self._tensor.element_size()

    def nbytes(self):
        return self._untyped_storage.nbytes()

    def size(self):
        return self.nbytes() // self.element_size()

    def __len__(self):
        return self.size()

    def data_ptr(self):
        return self._untyped_storage.data_ptr()

    def untyped(self):
        return self._untyped_storage

    def is_shared(self):
        return self._untyped_storage.is_shared()

    def _elements(self):
        """The whole storage as a 1-D tensor of this dtype (sharing it)."""
        return self._tensor.as_strided([self.size()], [1], 0)

    def tolist(self):
        return self._elements().tolist()

    def __getitem__(self, index):
        value = self._elements()[index]
        return value.item() if isinstance(index, int) else TypedStorage(value.clone())

    def __setitem__(self, index, value):
        self._elements()[index] = value

    def __iter__(self):
        return iter(self.tolist())

    def __repr__(self):
        values = "\n".join(f" {v}" for v in self.tolist())
        return f"{values}\n[{type(self).__module__.split('.')[0]}.storage.TypedStorage(dtype={self.dtype}, " \
               f"device={self.device}) of size {self.size()}]"


def _storage(self):
    warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only "
                  "storage class. This should only matter to you if you are using storages directly.  To access "
                  "UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()", UserWarning,
                  stacklevel=2)
    return TypedStorage(self)


def install(namespace):
    _C.Tensor.storage = _storage
    namespace.setdefault("TypedStorage", TypedStorage)
    namespace.setdefault("UntypedStorage", _C.UntypedStorage)
    namespace.setdefault("is_storage", lambda obj: isinstance(obj, (TypedStorage, _C.UntypedStorage)))
