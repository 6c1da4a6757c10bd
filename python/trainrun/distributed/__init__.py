"""trainrun.distributed: process groups and collectives with
torch.distributed's names. Blocking calls release the GIL; async_op=True
returns a Work to wait on."""
from trainrun import _C
from trainrun.distributed import elastic  # noqa: F401

_d = _C.distributed
ReduceOp, Work, ProcessGroup = _d.ReduceOp, _d.Work, _d.ProcessGroup
init_process_group, is_initialized, destroy_process_group = _d.init_process_group, _d.is_initialized, \
    _d.destroy_process_group
get_rank, get_world_size, new_group = _d.get_rank, _d.get_world_size, _d.new_group
all_reduce, broadcast, barrier = _d.all_reduce, _d.broadcast, _d.barrier
all_gather_into_tensor, reduce_scatter_tensor, send, recv = _d.all_gather_into_tensor, _d.reduce_scatter_tensor, \
    _d.send, _d.recv
def is_nccl_available():
    return "nccl" in _d.available_backends()


def is_gloo_available():
    return True


Store, TCPStore, FileStore, HashStore, PrefixStore = _d.Store, _d.TCPStore, _d.FileStore, _d.HashStore, \
    _d.PrefixStore
