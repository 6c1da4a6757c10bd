"""torch.distributed.checkpoint.storage: the StorageWriter / StorageReader base classes. trainrun's checkpoints
are folders written by its own writer (filesystem.py's FileSystemWriter / FileSystemReader derive from these);
a user's subclass names a folder through its `path`."""
import abc


class StorageWriter(abc.ABC):
    """Where a checkpoint is written (PyTorch's interface name; trainrun writes folders, at self.path)."""


class StorageReader(abc.ABC):
    """Where a checkpoint is read from (PyTorch's interface name; trainrun reads folders, at self.path)."""
