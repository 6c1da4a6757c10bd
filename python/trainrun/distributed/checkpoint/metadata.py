"""torch.distributed.checkpoint.metadata: what a checkpoint holds, as PyTorch's classes describe it
(FileSystemReader(path).read_metadata()): per item, a TensorStorageMetadata (dtype, global size and the chunks it
was saved in) or a BytesStorageMetadata (a non-tensor value). Read from trainrun's Protobuf metadata."""
import dataclasses
import json

import trainrun

__all__ = ["Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "TensorProperties", "ChunkStorageMetadata",
           "MetadataIndex"]


@dataclasses.dataclass
class ChunkStorageMetadata:
    offsets: trainrun.Size
    sizes: trainrun.Size


@dataclasses.dataclass
class TensorProperties:
    dtype: object = None
    requires_grad: bool = False


@dataclasses.dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: trainrun.Size
    chunks: list


@dataclasses.dataclass
class BytesStorageMetadata:
    pass


@dataclasses.dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: object = None
    index: object = None


@dataclasses.dataclass
class Metadata:
    state_dict_metadata: dict
    planner_data: object = None
    storage_data: object = None
    storage_meta: object = None
    version: object = None


def from_proto(proto):
    """Metadata from a checkpoint's Protobuf metadata (its items in the order they were saved)."""
    items, planner_data = {}, {}
    for fqn, item in proto.items.items():
        if item.WhichOneof("kind") == "tensor":
            t = item.tensor
            chunks = [ChunkStorageMetadata(trainrun.Size(list(c.offsets)), trainrun.Size(list(c.sizes)))
                      for c in t.chunks]
            items[fqn] = TensorStorageMetadata(TensorProperties(getattr(trainrun, t.dtype)),
                                               trainrun.Size(list(t.global_shape)), chunks)
        else:
            items[fqn] = BytesStorageMetadata()
        if item.path_json:
            planner_data[fqn] = tuple(json.loads(item.path_json))
    return Metadata(items, planner_data, version=str(proto.format_version))
