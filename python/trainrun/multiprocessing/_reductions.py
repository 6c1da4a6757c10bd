"""How tensors cross process boundaries: by reference to shared memory, never
by value. Registered with multiprocessing's ForkingPickler, so they apply to
trainrun's Queue and to everything of the standard library that pickles for
another process (Process arguments under spawn, mp.Queue, Pipe, Pool).

Pickling a CPU tensor moves its storage into shared memory (in place, as
PyTorch does) and sends the segment's descriptor with the offset of the
block. Inside trainrun's Queue the descriptor rides in the same message
(SCM_RIGHTS, see _fd_queue.py), one per segment however many tensors use it;
elsewhere it goes through multiprocessing's DupFd.

A CUDA tensor goes as a CUDA IPC handle of its block with a lease at the
node's broker (_broker.py): the sender may drop its tensor at once; the
block returns to its pool when every receiver's tensor is gone, or the
receiver is."""
import os
import threading
from multiprocessing import reduction

from trainrun import _C

_local = threading.local()
MAX_FDS_PER_MESSAGE = 250  # the kernel's SCM_MAX_FD is 253; one more may carry a large payload


class _Outgoing:
    """The descriptors of one message being pickled for a trainrun Queue:
    one per segment, with the storages that keep them open until sent."""

    def __init__(self):
        self.slots = {}      # inode -> index into fds
        self.fds = []
        self.keep_alive = []

    def add(self, storage, fd, inode):
        """The descriptor's index in the message, or None when the message has no room (the kernel
        passes at most 253 descriptors per message): that segment then goes by DupFd."""
        if inode not in self.slots:
            if len(self.fds) >= MAX_FDS_PER_MESSAGE:
                return None
            self.slots[inode] = len(self.fds)
            self.fds.append(fd)
        self.keep_alive.append(storage)
        return self.slots[inode]


class pickling_for_queue:
    """with pickling_for_queue() as out: ... ForkingPickler.dumps(obj) ...; then send out.fds with the bytes."""

    def __enter__(self):
        self.out = _local.outgoing = _Outgoing()
        return self.out

    def __exit__(self, *exc):
        _local.outgoing = None


class unpickling_from_queue:
    """with unpickling_from_queue(fds): ... loads ...; storages from one message are built once per block."""

    def __init__(self, fds):
        self.fds = fds

    def __enter__(self):
        _local.incoming = (self.fds, {})

    def __exit__(self, *exc):
        _local.incoming = None


def _storage_handle(storage):
    storage.share_memory_()
    fd, inode, offset, nbytes = storage._shared_handle()
    outgoing = getattr(_local, "outgoing", None)
    slot = outgoing.add(storage, fd, inode) if outgoing is not None else None
    if slot is not None:
        return ("slot", slot, inode, offset, nbytes)
    return ("dupfd", _dup_fd(fd), inode, offset, nbytes)


def _dup_fd(fd):
    """reduction.DupFd(fd), once per descriptor for a spawned child: a spawn passes each descriptor to the new
    process by number, and several storages of one shared segment must not list it twice (fork_exec refuses
    repeated descriptors)."""
    from multiprocessing import context
    spawning = context.get_spawning_popen()
    if spawning is not None and getattr(spawning, "method", None) == "spawn" and fd in spawning._fds:
        return spawning.DupFd(fd)
    return reduction.DupFd(fd)


_cuda_exports = set()  # export ids this process registered with its broker


def _cuda_storage_handle(storage):
    """A CUDA storage by reference (tensor/cuda/ipc.h): the producer's block stays out of its pool until the
    lease taken here is released, by the receiver's tensor dying or by the receiver dying."""
    from trainrun.multiprocessing import _broker
    broker = _broker.client_for_export()
    memory, event, device, segment_bytes, offset, nbytes, block = _C._cuda._ipc_export(storage)  # one hold
    try:
        # A block freed and made again can come back at the same address with another size: the size is part
        # of the id, so the broker's record (what its leak report prints) is the block as it is now.
        export_id = f"{os.getpid()}:cuda:{device}:{block:#x}:{nbytes}"
        if export_id not in _cuda_exports:
            broker.export(export_id, nbytes, f"cuda:{device}",
                          lambda lease, device=device, block=block: _C._cuda._ipc_release_export(device, block))
            _cuda_exports.add(export_id)
        lease = broker.lease(export_id)
    except BaseException:
        _C._cuda._ipc_release_export(device, block)
        raise
    return ("cuda", broker.path, lease, memory, event, device, segment_bytes, offset, nbytes, block)


def _storage_from_cuda_handle(handle):
    from trainrun.multiprocessing import _broker
    _, path, lease, memory, event, device, segment_bytes, offset, nbytes, block = handle
    if lease.split(":", 1)[0] == str(os.getpid()):
        raise RuntimeError("a CUDA tensor came back to the process that sent it; CUDA IPC cannot open a process's "
                           "own memory: keep the tensor itself instead of its pickled form")
    broker = _broker.client_at(path)
    broker.claim(lease)
    try:
        return _C._cuda._storage_from_ipc(memory, event, device, segment_bytes, offset, nbytes, block,
                                          lambda: broker.release(lease))
    except BaseException:
        broker.release(lease)
        raise


def _storage_from_handle(handle):
    if handle[0] == "cuda":
        return _storage_from_cuda_handle(handle)
    kind, ref, inode, offset, nbytes = handle
    incoming = getattr(_local, "incoming", None)
    if kind == "slot":
        if incoming is None:
            raise RuntimeError("a tensor handle made for a trainrun Queue was unpickled outside of one")
        fds, built = incoming
        key = (inode, offset, nbytes)
        if key not in built:
            built[key] = _C._storage_from_shared_fd(fds[ref], offset, nbytes)
        return built[key]
    fd = ref.detach()
    inherited = type(ref).__module__ == "multiprocessing.popen_spawn_posix"  # (the child's own: others share it)
    try:
        return _C._storage_from_shared_fd(fd, offset, nbytes)
    finally:
        if not inherited:
            os.close(fd)


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def reduce_tensor(t):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")
    if t.device.type not in ("cpu", "cuda"):
        raise NotImplementedError(f"sending a {t.device.type} tensor to another process is not supported; send "
                                  "t.cpu() instead")
    storage = t.untyped_storage()
    handle = _cuda_storage_handle(storage) if t.device.type == "cuda" else _storage_handle(storage)
    return (rebuild_tensor, (type(t), handle, _dtype_name(t.dtype), tuple(t.shape),
                             tuple(t.stride()), t.storage_offset(), t.requires_grad))


def rebuild_tensor(cls, handle, dtype_name, size, stride, storage_offset, requires_grad):
    import trainrun
    storage = _storage_from_handle(handle)
    t = _C._tensor_on_storage(storage, getattr(trainrun, dtype_name), list(size), list(stride), storage_offset)
    if cls is not _C.Tensor:
        t = t.as_subclass(cls)
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_storage(storage):
    if storage.device.type == "cuda":
        return (_storage_from_handle, (_cuda_storage_handle(storage),))
    return (_storage_from_handle, (_storage_handle(storage),))


def init_reductions():
    from trainrun.nn.parameter import Parameter
    for cls in (_C.Tensor, Parameter):
        reduction.ForkingPickler.register(cls, reduce_tensor)
    reduction.ForkingPickler.register(_C.UntypedStorage, reduce_storage)
