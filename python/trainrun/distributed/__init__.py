"""trainrun.distributed: process groups and collectives with
torch.distributed's names, argument names and defaults. Blocking calls
release the GIL; async_op=True returns a Work to wait on; timeouts are
datetime.timedelta (seconds are taken too)."""
import datetime as _datetime
import pickle as _pickle

import numpy as _np

from trainrun import _C
from trainrun.distributed import elastic  # noqa: F401
from trainrun.futures import Future as _Future

_d = _C.distributed
ReduceOp, Work, ProcessGroup = _d.ReduceOp, _d.Work, _d.ProcessGroup
is_initialized = _d.is_initialized
all_reduce, broadcast, barrier, reduce = _d.all_reduce, _d.broadcast, _d.barrier, _d.reduce
all_gather, all_gather_into_tensor = _d.all_gather, _d.all_gather_into_tensor
reduce_scatter, reduce_scatter_tensor = _d.reduce_scatter, _d.reduce_scatter_tensor
# trainrun: several of each as one collective (what FSDP2 does per parameter group).
all_gather_into_tensor_coalesced = _d.all_gather_into_tensor_coalesced
reduce_scatter_tensor_coalesced = _d.reduce_scatter_tensor_coalesced
all_to_all, all_to_all_single, gather, scatter = _d.all_to_all, _d.all_to_all_single, _d.gather, _d.scatter
send, recv, isend, irecv = _d.send, _d.recv, _d.isend, _d.irecv
Store, TCPStore, FileStore, HashStore, PrefixStore = _d.Store, _d.TCPStore, _d.FileStore, _d.HashStore, \
    _d.PrefixStore
# torch.distributed's errors: DistError is a RuntimeError. A store's timeout is a DistStoreError and a collective's
# a DistBackendError; both are also TimeoutError.
DistError, DistBackendError, DistStoreError, DistNetworkError = _C.DistError, _C.DistBackendError, \
    _C.DistStoreError, _C.DistNetworkError



def _local_piece(x):
    """A DTensor (not a Tensor, has to_local) as this rank's piece; lists of them piece by piece."""
    if isinstance(x, (list, tuple)):
        return type(x)(_local_piece(v) for v in x)
    return x.to_local() if not _C._is_cpp_tensor(x) and hasattr(x, "to_local") else x


def _on_local_pieces(collective):
    """The collective, taking DTensors too: it works on their local pieces, in place where it writes (what
    `dist.all_reduce(p.grad, group=dp_group)` means for a sharded parameter's gradient). An async one's Work
    keeps what it writes, for work.get_future().value() (PyTorch's: [the tensor, or the output list])."""
    def call(*args, **kwargs):
        args = [_local_piece(a) for a in args]
        work = collective(*args, **{k: _local_piece(v) for k, v in kwargs.items()})
        if isinstance(work, Work) and args:
            work._result = [args[0]]
        return work
    call.__name__, call.__doc__, call.__wrapped__ = collective.__name__, collective.__doc__, collective
    return call


def _get_future(self):
    """A trainrun.futures.Future that completes with this work; its value: what the collective wrote."""
    return _Future._of_work(self, self.__dict__.get("_result", []))


Work.get_future = _get_future
all_reduce, broadcast, reduce, all_gather, all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, \
    all_to_all, all_to_all_single, gather, scatter, send, recv, isend, irecv = (
        _on_local_pieces(f) for f in (all_reduce, broadcast, reduce, all_gather, all_gather_into_tensor,
                                      reduce_scatter, reduce_scatter_tensor, all_to_all, all_to_all_single,
                                      gather, scatter, send, recv, isend, irecv))
from trainrun.distributed.constants import default_pg_timeout  # noqa: E402


# ---- src/dst are default-group ranks, as PyTorch's ---------------------------
# The C++ collectives take ranks within their group; these wrappers take PyTorch's arguments: `src`/`dst` a
# global (default-group) rank, or `group_src`/`group_dst` a rank within `group` (PyTorch 2.6's spelling).

def _group_rank_of(group, global_rank, group_rank, what, where):
    """The rank within `group` that `global_rank` (or `group_rank`, given instead) names."""
    if group_rank is not None:
        if global_rank is not None:
            raise ValueError(f"{where}: give {what} or group_{what}, not both")
        return group_rank
    if global_rank is None:
        raise ValueError(f"{where}: {what} (a global rank) or group_{what} (a rank in the group) is required")
    if group is None:
        return global_rank
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"{where}: {what}={global_rank} is not a member of the group (its global ranks are "
                         f"{ranks}); give the global rank, or group_{what}= for a rank within the group")
    return ranks.index(global_rank)


def _wrap_rooted(broadcast_, reduce_, gather_, scatter_, send_, isend_, recv_, irecv_):
    """The rooted collectives and point-to-point calls with PyTorch's signatures over the C++ ones."""
    def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
        """tensor becomes src's on every rank of group."""
        return broadcast_(tensor, _group_rank_of(group, src, group_src, "src", "broadcast"), group=group,
                          async_op=async_op)

    def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
        """dst's tensor becomes the reduction of every rank's."""
        return reduce_(tensor, _group_rank_of(group, dst, group_dst, "dst", "reduce"), op=op, group=group,
                       async_op=async_op)

    def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
        """dst's gather_list[r] becomes group rank r's tensor."""
        dst = 0 if dst is None and group_dst is None else dst
        return gather_(tensor, gather_list, _group_rank_of(group, dst, group_dst, "dst", "gather"), group=group,
                       async_op=async_op)

    def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
        """tensor becomes src's scatter_list[group rank]."""
        src = 0 if src is None and group_src is None else src
        return scatter_(tensor, scatter_list, _group_rank_of(group, src, group_src, "src", "scatter"), group=group,
                        async_op=async_op)

    def send(tensor, dst=None, group=None, tag=0, group_dst=None):
        """Sends tensor to dst (blocking until it is handed over)."""
        return send_(tensor, _group_rank_of(group, dst, group_dst, "dst", "send"), group=group, tag=tag)

    def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
        """Posts a send of tensor to dst; returns its Work."""
        return isend_(tensor, _group_rank_of(group, dst, group_dst, "dst", "isend"), group=group, tag=tag)

    def recv(tensor, src=None, group=None, tag=0, group_src=None):
        """Receives into tensor from src (None: whichever rank sends first); returns the sender's global rank."""
        rank = None if src is None and group_src is None else _group_rank_of(group, src, group_src, "src", "recv")
        sender = recv_(tensor, rank, group=group, tag=tag)
        return sender if group is None else get_global_rank(group, sender)

    def irecv(tensor, src=None, group=None, tag=0, group_src=None):
        """Posts a receive into tensor from src (None: any rank); returns its Work."""
        rank = None if src is None and group_src is None else _group_rank_of(group, src, group_src, "src", "irecv")
        return irecv_(tensor, rank, group=group, tag=tag)

    return broadcast, reduce, gather, scatter, send, isend, recv, irecv


broadcast, reduce, gather, scatter, send, isend, recv, irecv = _wrap_rooted(
    broadcast, reduce, gather, scatter, send, isend, recv, irecv)


from trainrun.distributed._backend import Backend, get_default_backend_for_device  # noqa: E402,F401
from trainrun.distributed._backend import bound_device as _bound_device  # noqa: E402


class _WorldOfTheDefaultGroup(type):
    _held = [None]  # the default group's Python object, kept: `group.WORLD is group.WORLD`, a stable id()

    @property
    def WORLD(cls):  # noqa: N802  (PyTorch's name)
        world = _d._default_group()
        cls._held[0] = world
        return world


class group(metaclass=_WorldOfTheDefaultGroup):  # noqa: N801  (PyTorch's name)
    """group.WORLD: the default group's ProcessGroup (None before init_process_group), as PyTorch's; every function
    taking group= takes it, or None, for the default group."""


GroupMember = group
_state = {"backend": None, "groups_created": 0, "bound_device_id": None}


def _seconds(timeout, where):
    if timeout is None:
        return None
    if isinstance(timeout, _datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"{where}: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    if seconds <= 0:
        raise ValueError(f"{where}: timeout must be positive, got {timeout}")
    return seconds


def is_available():
    return True


def is_nccl_available():
    return "nccl" in _d.available_backends()


def is_gloo_available():
    return True


def is_mpi_available():
    return False


def is_ucc_available():
    return False


def is_xccl_available():
    return False


def is_backend_available(backend):
    """Whether `backend` ("gloo", "nccl", ...) can be used by init_process_group here."""
    return str(backend).lower() in _d.available_backends()


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Starts the default group, as torch.distributed.init_process_group:
    env:// (the launcher's variables), tcp://, file:// or a given store. device_id binds this process to a
    device: with no backend given, the backend is that device's default (gloo for cpu, nccl for cuda)."""
    if store is not None and init_method is not None:
        raise ValueError("init_process_group: cannot specify both init_method and store")
    if pg_options is not None:
        raise NotImplementedError("init_process_group(pg_options=...): backend options are not supported")
    bound = _bound_device(device_id) if device_id is not None else None
    if backend is None and bound is not None:
        backend = get_default_backend_for_device(bound)
    name = Backend(backend if backend is not None else "gloo")
    seconds = _seconds(timeout, "init_process_group")
    _d.init_process_group(backend=str(name), init_method=init_method if init_method is not None else "env://",
                          rank=rank, world_size=world_size,
                          timeout=seconds if seconds is not None else default_pg_timeout.total_seconds(), store=store)
    _state["backend"] = str(name)
    _state["groups_created"] = 1
    _state["bound_device_id"] = bound


def destroy_process_group(group=None):
    """Destroys `group`, or (None) every group and the default one."""
    if group is None:
        _state["groups_created"] = 0
        return _d.destroy_process_group()
    return _d.destroy_process_group(group)


def get_pg_count():
    """How many process groups this process has created since init_process_group (the default one included)."""
    return _state["groups_created"]


def get_backend_config(group=None):
    """The backend configuration string, "cpu:gloo" or "cuda:nccl", as PyTorch's."""
    backend = get_backend(group)
    if ":" in backend:
        return backend
    return f"{'cuda' if backend == 'nccl' else 'cpu'}:{backend}"


def get_backend(group=None):
    if not is_initialized():
        raise RuntimeError("get_backend: the default process group has not been initialized "
                           "(call init_process_group first)")
    return _state["backend"]


def supports_complex(reduceOp):  # noqa: N803  (PyTorch's name)
    """Whether reduceOp is defined on complex numbers (sums and averages are; orderings and bitwise ops not)."""
    return reduceOp not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT, ReduceOp.BAND, ReduceOp.BOR,
                            ReduceOp.BXOR)


def get_rank(group=None):
    return _d.get_rank() if group is None else group.rank()


def get_world_size(group=None):
    return _d.get_world_size() if group is None else group.size()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of the given default-group ranks (all of them when None). Every rank of the default group
    calls it, in the same order; a rank outside `ranks` gets None. timeout: the group's own (default: the
    default group's). group_desc (a description for logs) and device_id (the device the group binds to, as
    init_process_group's) are accepted as PyTorch's."""
    if device_id is not None:
        _bound_device(device_id)  # (checked as init_process_group checks it)
    if use_local_synchronization:
        raise NotImplementedError("new_group(use_local_synchronization=True) is not supported: every rank calls "
                                  "new_group")
    if pg_options is not None:
        raise NotImplementedError("new_group(pg_options=...): backend options are not supported")
    if backend is not None and str(Backend(backend)) != _state["backend"]:
        raise NotImplementedError(f"new_group(backend={backend!r}): a new group uses the default group's backend "
                                  f"({_state['backend']})")
    created = _d.new_group(list(ranks) if ranks is not None else [], _seconds(timeout, "new_group"))
    _state["groups_created"] += 1
    return created


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None):
    """Splits the parent group (the default group) into the disjoint groups of split_ranks (lists of global
    ranks); returns this rank's group, or None when it is in none of them. Every rank calls it."""
    if parent_pg is not None and parent_pg is not group.WORLD:
        raise NotImplementedError("split_group: only the default group can be split here (parent_pg=None)")
    if not split_ranks:
        raise ValueError("split_group: split_ranks must be a non-empty list of rank lists")
    mine, _ = new_subgroups_by_enumeration([list(r) for r in split_ranks], timeout=timeout, pg_options=pg_options)
    return mine


def get_process_group_ranks(group):
    """The default-group ranks of the members of `group`, in group-rank order."""
    if group is None:
        return list(range(get_world_size()))
    return list(group.global_ranks())


def get_global_rank(group, group_rank):
    """The default-group rank of `group`'s member `group_rank`."""
    ranks = get_process_group_ranks(group)
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in a group of size {len(ranks)}")
    return ranks[group_rank]


def get_group_rank(group, global_rank):
    """`group`'s rank of the default-group rank `global_rank`."""
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"get_group_rank: global rank {global_rank} is not a member of the group (ranks {ranks})")
    return ranks.index(global_rank)


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Splits the default group into consecutive subgroups of group_size ranks (default: the ranks of one
    node, LOCAL_WORLD_SIZE); returns (this rank's subgroup, all subgroups)."""
    import os
    if group is not None:
        raise NotImplementedError("new_subgroups(group=...): only the default group is split")
    world = get_world_size()
    if group_size is None:
        group_size = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if group_size <= 0 or world % group_size:
        raise ValueError(f"new_subgroups: group_size {group_size} must be positive and divide the world size {world}")
    return new_subgroups_by_enumeration([list(range(start, start + group_size)) for start in range(0, world, group_size)],
                                        timeout, backend, pg_options)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                 group_desc=None):
    """One group per list of ranks (disjoint); returns (this rank's subgroup or None, all subgroups)."""
    seen, mine, subgroups = set(), None, []
    for ranks in ranks_per_subgroup_list:
        overlap = seen.intersection(ranks)
        if overlap:
            raise ValueError(f"new_subgroups_by_enumeration: rank(s) {sorted(overlap)} are in more than one subgroup")
        seen.update(ranks)
        g = new_group(ranks, timeout, backend, pg_options)
        subgroups.append(g)
        if g is not None:
            mine = g
    return mine, subgroups


_work_wait = Work.wait


def _wait(self, timeout=None):
    """Blocks until the work is done (or the timeout passes: RuntimeError naming it)."""
    return _work_wait(self, _seconds(timeout, "Work.wait"))


Work.wait = _wait


_cpp_barrier = barrier


def barrier(group=None, async_op=False, device_ids=None):
    """Waits for every rank of the group. device_ids (PyTorch's NCCL hint of this rank's GPU) is accepted: each
    process here drives the one device it set."""
    return _cpp_barrier(group=group, async_op=async_op)


def is_torchelastic_launched():
    """Whether this process was started by an elastic launcher (trainrun's or torchrun: TORCHELASTIC_RUN_ID)."""
    import os
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank=None):
    """LOCAL_RANK, as the launcher sets it; fallback_rank when it is not set (else an error naming it)."""
    import os
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                       "`get_node_local_rank` to work, assuming you are not running in a multi-device context "
                       "and want the code to run locally instead.")


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that fails after `timeout` (default: the group's) instead of waiting on."""
    work = barrier(group=group, async_op=True)
    work.wait(timeout)


def breakpoint(rank=0, skip=0):  # noqa: A001  (PyTorch's name)
    """Stops rank `rank` in pdb (reading this terminal) while the other ranks wait at a barrier; `skip` calls
    are let through first."""
    _state["breakpoints"] = _state.get("breakpoints", 0) + 1
    if _state["breakpoints"] <= skip:
        return
    if get_rank() == rank:
        import pdb
        import sys
        debugger = pdb.Pdb()
        try:  # the launcher gives workers no terminal: read the controlling one when there is one
            debugger.stdin = sys.stdin if sys.stdin.isatty() else open("/dev/tty")
        except OSError:
            pass
        debugger.set_trace(sys._getframe().f_back)
    barrier()


def flight_record():
    """This process's flight record: the last TRAINRUN_FR_BUFFER_SIZE collectives and point-to-point operations
    of every group (op, sequence number, state, times), as a dict (format: docs/flight_recorder.md). A trainrun
    extension: PyTorch's NCCL-only recorder is read with torch._C._distributed_c10d._dump_nccl_trace()."""
    import json
    return json.loads(_d._flight_record_json())


# ---- point to point in batches ---------------------------------------------

class P2POp:
    """One send or receive of batch_isend_irecv: op is isend or irecv; peer a global rank (or group_peer a rank
    within group)."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("P2POp: op must be trainrun.distributed.isend or irecv")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag
        self.group_peer = _group_rank_of(group, peer, group_peer, "peer", "P2POp")


def batch_isend_irecv(p2p_op_list):
    """Posts every send and receive before waiting on any; returns their Works."""
    if not p2p_op_list:
        raise ValueError("batch_isend_irecv: p2p_op_list is empty")
    groups = {id(op.group) for op in p2p_op_list}
    if len(groups) != 1:
        raise ValueError("batch_isend_irecv: every P2POp must use the same group")
    return _d._batch_isend_irecv([(op.op is isend, op.tensor, op.group_peer, op.tag) for op in p2p_op_list],
                                 p2p_op_list[0].group)


# ---- object collectives: pickled bytes in uint8 tensors ---------------------
# As in PyTorch, these unpickle what other ranks send: use them only among
# ranks you trust.

def _collective_device(group, device=None):
    """Where a collective's own buffers go (object collectives' bytes, flags): `device` when given, else the
    current CUDA device for a group over NCCL (which moves device memory only), else the CPU, as PyTorch's."""
    if device is not None:
        return _C.device(device) if isinstance(device, str) else device
    if "nccl" in str(get_backend(group)) and "gloo" not in str(get_backend(group)):
        from trainrun import cuda
        return _C.device("cuda", cuda.current_device())
    return _C.device("cpu")


def _to_bytes_tensor(obj, device):
    return _C.from_numpy(_np.frombuffer(_pickle.dumps(obj), dtype=_np.uint8).copy()).to(device)


def _from_bytes_tensor(t, size):
    return _pickle.loads(t.cpu().numpy()[:size].tobytes())


def _int64(value, device):
    return _C.from_numpy(_np.array([value], dtype=_np.int64)).to(device)


def _zero_bytes(n, device):
    return _C.zeros([n], dtype=_C.dtype.uint8, device=device)


def all_gather_object(object_list, obj, group=None):
    """object_list[r] becomes rank r's obj, on every rank."""
    n = get_world_size(group)
    if len(object_list) != n:
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries for a group of {n}")
    device = _collective_device(group)
    mine = _to_bytes_tensor(obj, device)
    sizes = [_int64(0, device) for _ in range(n)]
    all_gather(sizes, _int64(mine.shape[0], device), group=group)
    sizes = [int(s.item()) for s in sizes]
    padded = _zero_bytes(max(sizes), device)
    padded[:mine.shape[0]] = mine
    slots = [_zero_bytes(max(sizes), device) for _ in range(n)]
    all_gather(slots, padded, group=group)
    for r in range(n):
        object_list[r] = _from_bytes_tensor(slots[r], sizes[r])


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """On dst (a global rank; default 0), object_gather_list[r] becomes group rank r's obj."""
    dst = 0 if dst is None and group_dst is None else dst
    root = _group_rank_of(group, dst, group_dst, "dst", "gather_object")
    gathered = [None] * get_world_size(group)
    all_gather_object(gathered, obj, group=group)
    if get_rank(group) == root:
        if object_gather_list is None or len(object_gather_list) != len(gathered):
            raise ValueError("gather_object: dst needs an object_gather_list with one entry per rank")
        object_gather_list[:] = gathered


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's object_list becomes src's (a global rank; default 0), the same length on every rank."""
    src = 0 if src is None and group_src is None else src
    root = _group_rank_of(group, src, group_src, "src", "broadcast_object_list")
    device = _collective_device(group, device)
    payload = _to_bytes_tensor(list(object_list), device) if get_rank(group) == root else None
    size = _int64(payload.shape[0] if payload is not None else 0, device)
    broadcast(size, group=group, group_src=root)
    buffer = payload if payload is not None else _zero_bytes(int(size.item()), device)
    broadcast(buffer, group=group, group_src=root)
    received = _from_bytes_tensor(buffer, int(size.item()))
    if len(received) != len(object_list):
        raise ValueError(f"broadcast_object_list: src sent {len(received)} objects, this rank's list holds "
                         f"{len(object_list)}")
    object_list[:] = received


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
    """Sends the picklable objects of object_list to dst (a global rank), which receives them with
    recv_object_list into a list of the same length."""
    root = _group_rank_of(group, dst, group_dst, "dst", "send_object_list")
    if root == get_rank(group):
        raise ValueError("send_object_list: dst is this rank")
    device = _collective_device(group, device)
    pieces = [_pickle.dumps(obj) for obj in object_list]
    sizes = _C.from_numpy(_np.array([len(p) for p in pieces], dtype=_np.int64)).to(device)
    send(sizes, group=group, group_dst=root)
    payload = _C.from_numpy(_np.frombuffer(b"".join(pieces) or b"\0", dtype=_np.uint8).copy()).to(device)
    send(payload, group=group, group_dst=root)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Fills object_list with the objects src sent with send_object_list (None: from whichever rank sends
    first); returns the sender's global rank."""
    device = _collective_device(group, device)
    sizes = _C.zeros([len(object_list)], dtype=_C.dtype.int64, device=device)
    if src is None and group_src is None:
        sender = recv(sizes, group=group)
    else:
        sender = recv(sizes, src=src, group=group, group_src=group_src)
    lengths = [int(v) for v in sizes.cpu().numpy()]
    payload = _zero_bytes(max(1, sum(lengths)), device)
    recv(payload, src=sender, group=group)
    data, start = payload.cpu().numpy().tobytes(), 0
    for i, length in enumerate(lengths):
        object_list[i] = _pickle.loads(data[start:start + length])
        start += length
    return sender


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    """scatter_object_output_list[0] becomes src's (a global rank; default 0) scatter_object_input_list[group
    rank]."""
    src = 0 if src is None and group_src is None else src
    root = _group_rank_of(group, src, group_src, "src", "scatter_object_list")
    n = get_world_size(group)
    objects = [None] * n
    if get_rank(group) == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != n:
            raise ValueError(f"scatter_object_list: src needs scatter_object_input_list with {n} entries")
        objects = list(scatter_object_input_list)
    broadcast_object_list(objects, group=group, group_src=root)
    if not scatter_object_output_list:
        raise ValueError("scatter_object_list: scatter_object_output_list needs at least one entry")
    scatter_object_output_list[0] = objects[get_rank(group)]


from trainrun.distributed import distributed_c10d  # noqa: E402,F401  (torch.distributed.distributed_c10d)


reduce_op = ReduceOp  # (PyTorch's deprecated name)


def __getattr__(name):
    if name == "GradBucket":  # (defined with DDP, above the distributed layer's import of nn)
        from trainrun.nn.parallel import GradBucket
        return GradBucket
    if name in ("DeviceMesh", "init_device_mesh"):  # (torch.distributed re-exports them since 2.4)
        return getattr(__getattr__("device_mesh"), name)
    # The submodules (device_mesh, tensor, fsdp, checkpoint, pipelining, algorithms, ...), reachable as
    # attributes once trainrun is imported, as PyTorch's are (torch.distributed.tensor.DTensor), imported
    # when first asked for.
    return _submodule(name)


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
_submodule = _submodule_getattr(__name__)
