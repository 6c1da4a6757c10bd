"""trainrun.multiprocessing: Python's multiprocessing, with tensors shared
instead of copied (torch.multiprocessing's API).

Every name of the standard module is here. Pickling a tensor for another
process (Queue, Process arguments under spawn, Pipe, Pool) moves its storage
into shared memory and sends a handle; the receiver maps the same memory, so
a write on either side is seen on the other. `Queue` and `SimpleQueue` carry
the segments' descriptors inside their messages (see _fd_queue.py);
`spawn(fn, args, nprocs)` runs fn(i, *args) in nprocs processes and raises
the first failure with its traceback."""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from trainrun.multiprocessing._fd_queue import Queue, SimpleQueue  # noqa: F401
from trainrun.multiprocessing._reductions import init_reductions
from trainrun.multiprocessing._spawn import (ProcessContext, ProcessExitedException, ProcessRaisedException,  # noqa
                                              SpawnContext, spawn, start_processes)

__all__ = multiprocessing.__all__ + ["spawn", "start_processes", "ProcessContext", "SpawnContext",
                                     "ProcessRaisedException", "ProcessExitedException", "get_sharing_strategy",
                                     "set_sharing_strategy", "get_all_sharing_strategies"]

# PyTorch's two strategies differ in how a storage is named between processes
# (a descriptor, or a file in /dev/shm). Here both are anonymous memory files
# passed as descriptors: nothing in /dev/shm to leak, and no descriptor kept
# open per tensor, so the names are accepted and mean the same.
_all_sharing_strategies = {"file_descriptor", "file_system"}
_sharing_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy):
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise ValueError(f"set_sharing_strategy: unknown strategy {new_strategy!r}; expected one of "
                         f"{sorted(_all_sharing_strategies)}")
    _sharing_strategy = new_strategy


def get_sharing_strategy():
    return _sharing_strategy


def get_all_sharing_strategies():
    return set(_all_sharing_strategies)


init_reductions()
