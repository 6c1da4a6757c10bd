"""Reading a checkpoint folder PyTorch's torch.distributed.checkpoint wrote.

Its `.metadata` is a pickle of DCP's dataclasses. It is read here with a
restricted unpickler that knows only those classes (and the few torch names
they hold: dtypes, torch.Size, the layout), each as a plain record, so
reading runs no code; any other global is refused by name. Its `.distcp` data
files hold, at the offsets the metadata gives, one torch.save archive per
tensor piece or non-tensor value, read with trainrun.load's restricted
reader."""
import io
import os
import pickle

from trainrun import _C

_DCP = "torch.distributed.checkpoint.metadata"
_RECORDS = {
    (_DCP, "Metadata"), (_DCP, "TensorStorageMetadata"), (_DCP, "BytesStorageMetadata"),
    (_DCP, "ChunkStorageMetadata"), (_DCP, "TensorProperties"), (_DCP, "MetadataIndex"), (_DCP, "StorageMeta"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
}
_DTYPES = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}


class _Record:
    """One of DCP's metadata dataclasses: whatever state the pickle builds it with, as attributes."""

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)
        elif isinstance(state, tuple) and len(state) == 2 and all(s is None or isinstance(s, dict) for s in state):
            for part in state:  # (instance dict, slots dict)
                self.__dict__.update(part or {})
        else:
            self.state = state  # TensorProperties: (dtype, layout, requires_grad, memory_format, pin_memory)


class _Dtype:
    def __init__(self, name):
        self.name = name


# One stand-in class per allowed record (NEWOBJ makes the object without calling __init__; BUILD fills it).
_RECORD_CLASSES = {key: type(key[1], (_Record,), {"__new__": lambda cls, *args: object.__new__(cls)})
                   for key in _RECORDS}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _RECORD_CLASSES:
            return _RECORD_CLASSES[(module, name)]
        if module == "torch" and name in _DTYPES:
            return _Dtype(name)
        if (module, name) == ("torch", "Size"):
            return tuple
        if (module, name) == ("torch.serialization", "_get_layout"):
            return str
        if (module, name) == (_DCP, "_MEM_FORMAT_ENCODING"):
            return int
        if module in ("pathlib", "pathlib._local") and name in ("PosixPath", "Path"):
            return lambda *parts: os.path.join(*parts)
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        raise pickle.UnpicklingError(f"a PyTorch checkpoint's metadata may only hold DCP's metadata classes; it "
                                     f"names {module}.{name}, which is not read (it could run code)")


def is_pytorch_dcp(folder):
    """Whether folder holds PyTorch DCP's metadata (a pickle) rather than trainrun's (Protobuf)."""
    path = os.path.join(str(folder), ".metadata")
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return f.read(1) == b"\x80"  # pickle's PROTO opcode; trainrun's metadata starts with a field tag


def read_metadata(folder):
    path = os.path.join(str(folder), ".metadata")
    try:
        return _MetadataUnpickler(io.BytesIO(open(path, "rb").read())).load()
    except pickle.UnpicklingError:
        raise
    except Exception as e:  # noqa: B902 - a truncated or foreign pickle
        raise ValueError(f"checkpoint '{folder}': .metadata is not PyTorch DCP metadata ({e})") from None


def _blob(folder, info):
    """The torch.save archive at info's place in its data file, loaded."""
    from trainrun._torch_checkpoint import load_torch_checkpoint
    path = os.path.join(str(folder), info.relative_path)
    with open(path, "rb") as f:
        f.seek(info.offset)
        data = f.read(info.length)
    if len(data) != info.length:
        raise ValueError(f"checkpoint '{folder}': {info.relative_path} ends before the {info.length} bytes at "
                         f"offset {info.offset} the metadata gives")
    return load_torch_checkpoint(io.BytesIO(data))


def read_all(folder):
    """{fully-qualified name: full tensor or value}, and {name: path of keys} (PyTorch's planner_data)."""
    meta = read_metadata(folder)
    storage = {}
    for index, info in meta.storage_data.items():
        offset = getattr(index, "offset", None)
        storage[(index.fqn, tuple(offset) if offset is not None else None)] = info
    out = {}
    for fqn, item in meta.state_dict_metadata.items():
        if type(item).__name__ != "TensorStorageMetadata":
            out[fqn] = _blob(folder, storage[(fqn, None)])
            continue
        import trainrun
        dtype = getattr(trainrun, item.properties.state[0].name)
        full = _C.empty(list(item.size), dtype=dtype)
        for chunk in item.chunks:
            piece = _blob(folder, storage[(fqn, tuple(chunk.offsets))])
            target = full
            for dim, (start, size) in enumerate(zip(chunk.offsets, chunk.sizes)):
                target = target.narrow(dim, start, size)
            target.copy_(piece.reshape(list(chunk.sizes)))
        out[fqn] = full
    paths = dict(getattr(meta, "planner_data", None) or {})
    return out, paths


MISSING = object()


def lookup(full, fqn):
    """full[fqn], or a part of a value PyTorch saved whole: it keeps a list or dict of plain values as one
    item ("meta.lrs"), where trainrun's flattening names each element ("meta.lrs.0")."""
    if fqn in full:
        return full[fqn]
    parts = fqn.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in full and not _C._is_cpp_tensor(full[prefix]):
            value = full[prefix]
            for key in parts[cut:]:
                if isinstance(value, list) and key.isdigit() and int(key) < len(value):
                    value = value[int(key)]
                elif isinstance(value, dict) and key in value:
                    value = value[key]
                else:
                    return MISSING
            return value
    return MISSING
