"""torch.distributed.distributed_c10d: the module torch.distributed's functions live in; scripts import
names from it directly (`from torch.distributed.distributed_c10d import ReduceOp, _get_default_group`)."""
from trainrun.distributed import *  # noqa: F401,F403
from trainrun.distributed import Backend, GroupMember, ProcessGroup, ReduceOp, Work, group  # noqa: F401
from trainrun.distributed import get_world_size as _get_world_size
from trainrun.distributed import is_initialized as _is_initialized


def _get_default_group():
    """The default group. trainrun's functions take None for it; so does this handle."""
    if not _is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return group.WORLD


def _get_default_store():
    """The store the default group rendezvoused through: a key-value store every rank of the job shares."""
    if not _is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    from trainrun import _C
    return _C.distributed._default_store()


def _get_group_size(g):
    return _get_world_size(g)
