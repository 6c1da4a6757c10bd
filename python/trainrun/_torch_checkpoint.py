"""PyTorch's checkpoint format (torch.save's zip of a pickle and raw storage
records), both ways. Writing: any picklable object with tensors inside
(a training checkpoint: epoch, model and optimizer state dicts) becomes a
file torch.load reads. Reading, without running foreign code: The pickle inside is read by an unpickler that resolves only
what torch.load(weights_only=True) allows for tensors: the tensor and
parameter rebuild functions, the typed storages, OrderedDict, and plain
containers and numbers; any other global is refused, naming it. Storages are
read from the archive's data/ records (little-endian, as torch writes them).
As torch.save, a storage is written once however many tensors view it, whole,
and loaded tensors that shared it share one storage again (views stay views,
with their strides and offsets)."""
import _compat_pickle
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


_STORAGE_DTYPE_NAMES = {name: "bfloat16" if d == "bfloat16" else np.dtype(d).name
                        for name, d in _STORAGE_DTYPES.items()}


class _StorageType:
    def __init__(self, name):
        self.name = name


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    """A tensor on a loaded storage ((untyped storage, dtype) from persistent_load), as torch's
    _rebuild_tensor_v2: its offset and strides count elements of the dtype."""
    untyped, dtype = storage
    needed = storage_offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1 if all(size) else 0
    if needed * dtype.itemsize > untyped.nbytes():
        raise pickle.UnpicklingError(f"trainrun.load: a tensor of size {list(size)}, stride {list(stride)} and offset "
                                     f"{storage_offset} reaches past its storage of {untyped.nbytes()} bytes")
    t = _C._tensor_on_storage(untyped, dtype, list(size), list(stride), storage_offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks):
    from trainrun.nn import Parameter
    return Parameter(data, requires_grad=requires_grad)


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "slice"): slice,
}


# (module, name) -> object: what serialization.add_safe_globals allowed for weights_only loads.
SAFE_GLOBALS = {}


def _resolve(module, name):
    """A global of a checkpoint unpickled with weights_only=False: PyTorch's names (torch.*) are looked up in
    trainrun's namespace."""
    import importlib
    if module == "torch" or module.startswith("torch."):
        module = "trainrun" + module[len("torch"):]
    target = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data, archive, prefix, weights_only=True):
        super().__init__(io.BytesIO(data))
        self._archive, self._prefix, self._weights_only = archive, prefix, weights_only
        self._storages = {}

    def find_class(self, module, name):
        # Protocol 2 (torch.save's) writes Python 2's names for builtins (__builtin__.set): read them as Python 3's,
        # as the default unpickler does.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if (module, name) in SAFE_GLOBALS:
            return SAFE_GLOBALS[(module, name)]
        if (module, name) == ("trainrun.nn._module_copy", "_rebuild_module"):
            # How trainrun pickles a whole module: the class it rebuilds and every value of its state come
            # through this unpickler too, so a weights_only load takes a module exactly when its class was allowed
            # (serialization.add_safe_globals / safe_globals), as PyTorch's does.
            from trainrun.nn._module_copy import _rebuild_module
            return _rebuild_module
        if not self._weights_only:
            return _resolve(module, name)
        raise pickle.UnpicklingError(
            f"trainrun.load: the checkpoint refers to '{module}.{name}', which is not a tensor, storage or plain "
            "container; only weights are loaded (as torch.load(weights_only=True)), so it is refused. Load it with "
            f"weights_only=False if you trust its source, or allow it with "
            f"trainrun.serialization.add_safe_globals([{module}.{name}])")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"trainrun.load: unknown persistent id {pid!r} in the checkpoint")
        _, storage_type, key, _location, numel = pid[:5]
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"trainrun.load: {storage_type!r} is not a storage type")
        dtype = getattr(_C.dtype, _STORAGE_DTYPE_NAMES[storage_type.name])
        if key not in self._storages:  # one storage per record, shared by every tensor that views it
            raw = self._archive.read(f"{self._prefix}data/{key}")[:numel * dtype.itemsize]
            self._storages[key] = _C.from_numpy(np.frombuffer(raw, dtype=np.uint8).copy()).untyped_storage()
        return self._storages[key], dtype


def is_torch_checkpoint(f):
    if hasattr(f, "seek"):
        position = f.tell()
        try:
            return zipfile.is_zipfile(f)
        finally:
            f.seek(position)
    return zipfile.is_zipfile(f)


def load_torch_checkpoint(path, weights_only=True):
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pickles) != 1:
            raise ValueError(f"trainrun.load: {path} is a zip file but not a torch.save checkpoint "
                             f"(found {len(pickles)} data.pkl records)")
        prefix = pickles[0][:-len("data.pkl")]
        return _RestrictedUnpickler(archive.read(pickles[0]), archive, prefix, weights_only).load()


# ---- writing ---------------------------------------------------------------------------------------------
_STORAGE_NAMES = {"float64": "DoubleStorage", "float32": "FloatStorage", "float16": "HalfStorage",
                  "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage", "int8": "CharStorage",
                  "uint8": "ByteStorage",
                  "bool": "BoolStorage", "bfloat16": "BFloat16Storage"}


class _TorchGlobal:
    """Stands for a global of PyTorch's namespace (torch._utils._rebuild_tensor_v2, torch.FloatStorage) in the
    pickle; written by name, never resolved here."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce wants a callable
        raise TypeError(f"{self.module}.{self.name} is only a name in a checkpoint")


_REBUILD_TENSOR = _TorchGlobal("torch._utils", "_rebuild_tensor_v2")


class _StorageRecord:
    def __init__(self, key, storage_name, numel):
        self.key, self.storage_name, self.numel = key, storage_name, numel


_REBUILD_PARAMETER = _TorchGlobal("torch._utils", "_rebuild_parameter")


class _TorchPickler(pickle._Pickler):  # the Python pickler: its dispatch table and save_global can be extended
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.records = []  # (key, bytes) of each storage, once
        self._storage_records = {}  # (storage address, bytes, dtype) -> its _StorageRecord

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRecord):
            return ("storage", _TorchGlobal("torch", obj.storage_name), obj.key, "cpu", obj.numel)
        return None

    def reducer_override(self, obj):
        if not _C._is_cpp_tensor(obj):
            return NotImplemented
        from trainrun.nn import Parameter
        if isinstance(obj, Parameter):  # as torch pickles a Parameter: its data, rebuilt as a Parameter
            return (_REBUILD_PARAMETER, (obj.detach(), bool(obj.requires_grad), collections.OrderedDict()))
        t = obj.detach()
        if t.dtype.name not in _STORAGE_NAMES:
            raise TypeError(f"trainrun.save: tensors of {t.dtype} cannot be written in PyTorch's format")
        storage = self._storage_record(t)
        return (_REBUILD_TENSOR, (storage, t.storage_offset(), tuple(t.shape), tuple(t.stride()),
                                  bool(obj.requires_grad), collections.OrderedDict()))

    def _storage_record(self, t):
        """The record of t's whole storage (its raw little-endian bytes, as torch writes them), written once for
        every tensor of that dtype on it."""
        untyped = t.untyped_storage()
        address = untyped.data_ptr()
        cache_key = (address, untyped.nbytes(), t.dtype.name) if address else None
        if cache_key in self._storage_records:
            return self._storage_records[cache_key]
        raw = _C._tensor_on_storage(untyped, _C.dtype.uint8, [untyped.nbytes()], [1], 0).cpu().numpy().tobytes()
        key = str(len(self.records))
        self.records.append((key, raw))
        record = _StorageRecord(key, _STORAGE_NAMES[t.dtype.name], untyped.nbytes() // t.dtype.itemsize)
        if cache_key is not None:
            self._storage_records[cache_key] = record
        return record

    def _save_torch_global(self, obj):
        self.write(pickle.GLOBAL + obj.module.encode() + b"\n" + obj.name.encode() + b"\n")
        self.memoize(obj)

    dispatch[_TorchGlobal] = _save_torch_global


def save_torch_checkpoint(obj, f):
    """obj in torch.save's zip format at `f` (a path or a binary file object)."""
    buffer = io.BytesIO()
    pickler = _TorchPickler(buffer)
    pickler.dump(obj)
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        for key, raw in pickler.records:
            archive.writestr(f"archive/data/{key}", raw)
        archive.writestr("archive/version", "3\n")
