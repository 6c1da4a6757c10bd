"""Reading PyTorch checkpoints (torch.save's zip format) without running
foreign code. The pickle inside is read by an unpickler that resolves only
what torch.load(weights_only=True) allows for tensors: the tensor and
parameter rebuild functions, the typed storages, OrderedDict, and plain
containers and numbers; any other global is refused, naming it. Storages are
read from the archive's data/ records (little-endian, as torch writes them)."""
import collections
import io
import pickle
import zipfile

import numpy as np

from trainrun import _C

_STORAGE_DTYPES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
    "ByteStorage": np.uint8, "BoolStorage": np.bool_, "BFloat16Storage": "bfloat16",
}


class _StorageType:
    def __init__(self, name):
        self.name = name


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    array, is_bfloat16 = storage
    itemsize = 2 if is_bfloat16 else array.itemsize
    view = np.lib.stride_tricks.as_strided(array[storage_offset:], shape=tuple(size),
                                           strides=tuple(s * itemsize for s in stride))
    data = np.array(view)  # a writable copy: the tensor owns its memory
    if is_bfloat16:  # raw bits: widen to float32 (bfloat16 is float32's top half), then narrow exactly
        t = _C.from_numpy((data.astype(np.uint32) << 16).view(np.float32)).to(_C.dtype.bfloat16)
    else:
        t = _C.from_numpy(data)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks):
    if requires_grad:
        data.requires_grad_(True)
    return data


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "slice"): slice,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data, archive, prefix):
        super().__init__(io.BytesIO(data))
        self._archive, self._prefix = archive, prefix
        self._storages = {}

    def find_class(self, module, name):
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        raise pickle.UnpicklingError(
            f"trainrun.load: the checkpoint refers to '{module}.{name}', which is not a tensor, storage or plain "
            "container; only weights are loaded (as torch.load(weights_only=True)), so it is refused")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"trainrun.load: unknown persistent id {pid!r} in the checkpoint")
        _, storage_type, key, _location, numel = pid[:5]
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"trainrun.load: {storage_type!r} is not a storage type")
        if key not in self._storages:
            raw = self._archive.read(f"{self._prefix}data/{key}")
            dtype = _STORAGE_DTYPES[storage_type.name]
            if dtype == "bfloat16":
                self._storages[key] = (np.frombuffer(raw, dtype="<u2")[:numel], True)
            else:
                self._storages[key] = (np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))[:numel], False)
        return self._storages[key]


def is_torch_checkpoint(path):
    return zipfile.is_zipfile(path)


def load_torch_checkpoint(path):
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pickles) != 1:
            raise ValueError(f"trainrun.load: {path} is a zip file but not a torch.save checkpoint "
                             f"(found {len(pickles)} data.pkl records)")
        prefix = pickles[0][:-len("data.pkl")]
        return _RestrictedUnpickler(archive.read(pickles[0]), archive, prefix).load()
