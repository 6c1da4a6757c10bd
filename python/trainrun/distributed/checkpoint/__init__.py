"""trainrun.distributed.checkpoint: PyTorch's distributed checkpoint (DCP)
API. `save` writes a folder: one data file per writing rank (safetensors
layout) and Protobuf metadata (proto/checkpoint.proto; no pickle, so loading
runs no code), committed atomically; `load` reads it back into any sharding.

    import trainrun.distributed.checkpoint as dcp
    dcp.save({"model": model.state_dict(), "step": step}, checkpoint_id="ckpt/step_100")
    state = {"model": model.state_dict(), "step": 0}
    dcp.load(state, checkpoint_id="ckpt/step_100")      # in place, whatever the model's sharding now
    future = dcp.async_save(state, checkpoint_id="ckpt/step_200")   # blocks only for the staging copy
"""
from trainrun.distributed.checkpoint._load import load
from trainrun.distributed.checkpoint._save import async_save, save
from trainrun.distributed.checkpoint.default_planner import (DefaultLoadPlanner, DefaultSavePlanner, LoadPlanner,
                                                              SavePlanner)
from trainrun.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter
from trainrun.distributed.checkpoint.stateful import Stateful
from trainrun.distributed.checkpoint import metadata  # noqa: E402,F401
from trainrun.distributed.checkpoint.metadata import (BytesStorageMetadata, ChunkStorageMetadata,  # noqa: E402,F401
                                                       Metadata, TensorStorageMetadata)
from trainrun.distributed.checkpoint.storage import StorageReader, StorageWriter  # noqa: E402,F401
from trainrun.distributed.checkpoint.api import CheckpointException  # noqa: E402,F401


def _warn_renamed(old_name, new_name):
    import warnings
    warnings.warn(f"'{old_name}' is deprecated and will be removed in future versions. Please use '{new_name}' "
                  "instead.", FutureWarning, stacklevel=3)


def save_state_dict(state_dict, storage_writer, process_group=None, coordinator_rank=0, no_dist=False,
                    planner=None):
    """PyTorch 2.0's name for save (deprecated there since 2.2)."""
    _warn_renamed("save_state_dict", "save")
    return save(state_dict, storage_writer=storage_writer, process_group=process_group, no_dist=no_dist,
                planner=planner)


def load_state_dict(state_dict, storage_reader, process_group=None, coordinator_rank=0, no_dist=False,
                    planner=None):
    """PyTorch 2.0's name for load (deprecated there since 2.2)."""
    _warn_renamed("load_state_dict", "load")
    return load(state_dict, storage_reader=storage_reader, process_group=process_group, no_dist=no_dist,
                planner=planner)


# torch.distributed.checkpoint.state_dict_saver.save / state_dict_loader.load: the same functions
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402
state_dict_saver = _types.ModuleType(__name__ + ".state_dict_saver", "dcp.save and dcp.async_save")
state_dict_saver.save, state_dict_saver.async_save = save, async_save
state_dict_saver.save_state_dict = save_state_dict
state_dict_loader = _types.ModuleType(__name__ + ".state_dict_loader", "dcp.load")
state_dict_loader.load, state_dict_loader.load_state_dict = load, load_state_dict
_sys.modules[state_dict_saver.__name__] = state_dict_saver
_sys.modules[state_dict_loader.__name__] = state_dict_loader

__all__ = ["DefaultLoadPlanner", "DefaultSavePlanner", "FileSystemReader", "FileSystemWriter", "LoadPlanner",
           "Metadata", "SavePlanner", "Stateful", "async_save", "load", "save", "save_state_dict", "load_state_dict",
           "StorageReader", "StorageWriter", "CheckpointException", "BytesStorageMetadata",
           "ChunkStorageMetadata", "TensorStorageMetadata"]


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
