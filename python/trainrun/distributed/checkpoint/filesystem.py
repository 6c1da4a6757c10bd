"""FileSystemWriter and FileSystemReader: PyTorch's storage objects for a
checkpoint folder, for scripts that pass storage_writer= / storage_reader=
(PyTorch 2.0's spelling) instead of checkpoint_id=. trainrun's checkpoints
are always folders on a file system, so these name the folder and carry
PyTorch's options; the layout is trainrun's (see _data_files.py)."""
import os

from trainrun.distributed.checkpoint.storage import StorageReader, StorageWriter


class FileSystemWriter(StorageWriter):
    def __init__(self, path, single_file_per_rank=True, sync_files=True, thread_count=1,
                 per_thread_copy_ahead=10_000_000, cache_staged_state_dict=False, overwrite=True):
        if not overwrite and os.path.exists(os.path.join(str(path), ".metadata")):
            raise RuntimeError(f"FileSystemWriter: a checkpoint exists at {path} and overwrite=False")
        self.path = os.fspath(path)
        self.single_file_per_rank, self.sync_files, self.thread_count = single_file_per_rank, sync_files, thread_count

    def __repr__(self):
        return f"FileSystemWriter({self.path!r})"


class FileSystemReader(StorageReader):
    def __init__(self, path, _extension_registry=None):
        self.path = os.fspath(path)

    def read_metadata(self):
        """What the checkpoint holds (metadata.Metadata: per item its dtype, size and saved chunks)."""
        from trainrun.distributed.checkpoint import _metadata
        from trainrun.distributed.checkpoint.metadata import from_proto
        return from_proto(_metadata.read(_metadata.committed_folder(self.path)))

    def __repr__(self):
        return f"FileSystemReader({self.path!r})"


def folder_of(checkpoint_id, storage, kind, what):
    """The checkpoint folder from checkpoint_id and/or a storage object (which must agree)."""
    if storage is not None:
        if not isinstance(storage, kind):
            raise NotImplementedError(f"{what}: only {kind.__name__} storage is supported, got "
                                      f"{type(storage).__name__}")
        if checkpoint_id is not None and os.path.abspath(str(checkpoint_id)) != os.path.abspath(storage.path):
            raise ValueError(f"{what}: checkpoint_id {checkpoint_id} and {storage!r} name different folders")
        return storage.path
    if checkpoint_id is None:
        raise ValueError(f"{what}: give checkpoint_id (the checkpoint's folder)")
    return checkpoint_id
