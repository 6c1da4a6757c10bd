"""PyTorch's checkpoint format (torch.save's zip of a pickle and raw storage
records), both ways. Writing: any picklable object with tensors inside
(a training checkpoint: epoch, model and optimizer state dicts) becomes a
file torch.load reads. Reading, without running foreign code: The pickle inside is read by an unpickler that resolves only
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
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if (module, name) in SAFE_GLOBALS:
            return SAFE_GLOBALS[(module, name)]
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
        if key not in self._storages:
            raw = self._archive.read(f"{self._prefix}data/{key}")
            dtype = _STORAGE_DTYPES[storage_type.name]
            if dtype == "bfloat16":
                self._storages[key] = (np.frombuffer(raw, dtype="<u2")[:numel], True)
            else:
                self._storages[key] = (np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))[:numel], False)
        return self._storages[key]


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


class _TorchPickler(pickle._Pickler):  # the Python pickler: its dispatch table and save_global can be extended
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.records = []  # (key, bytes) of each tensor's storage

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRecord):
            return ("storage", _TorchGlobal("torch", obj.storage_name), obj.key, "cpu", obj.numel)
        return None

    def reducer_override(self, obj):
        if not _C._is_cpp_tensor(obj):
            return NotImplemented
        t = obj.detach().cpu().contiguous()
        name = t.dtype.name
        if name not in _STORAGE_NAMES:
            raise TypeError(f"trainrun.save: tensors of {t.dtype} cannot be written in PyTorch's format")
        if name == "bfloat16":  # the top half of each float32's bits
            raw = (t.float().numpy().view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            raw = t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
        key = str(len(self.records))
        self.records.append((key, raw))
        strides, step = [], 1
        for size in reversed(list(t.shape)):
            strides.insert(0, step)
            step *= max(size, 1)
        storage = _StorageRecord(key, _STORAGE_NAMES[name], t.numel())
        return (_REBUILD_TENSOR, (storage, 0, tuple(t.shape), tuple(strides), bool(obj.requires_grad),
                                  collections.OrderedDict()))

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
