"""trainrun.multiprocessing.Queue and SimpleQueue: multiprocessing's queues,
with tensors passed by shared memory and their descriptors carried in the
message itself.

The transport is a Unix SOCK_SEQPACKET socket pair. A message is one
datagram, the pickled payload, and the segments' descriptors travel with it
as SCM_RIGHTS ancillary data, so nothing waits in a side channel: the
receiver maps each segment (once per process) and closes the descriptor at
once. No descriptor stays open per tensor on either side, however many
tensors are in flight or kept.

Queue.put pickles at the call (an unpicklable object fails there, not in a
thread) and a feeder thread writes the frames, so put never blocks on a
reader, as multiprocessing.Queue. Once a frame is written the kernel holds
it: the message survives its sender's death."""
import collections
import errno
import fcntl
import multiprocessing
import os
import queue
import select
import socket
import struct
import threading
import time
import weakref
from multiprocessing import context, reduction, util

from trainrun.multiprocessing._reductions import MAX_FDS_PER_MESSAGE, pickling_for_queue, unpickling_from_queue

_MAX_FDS = MAX_FDS_PER_MESSAGE
_INLINE_MAX = 64 << 10       # bigger pickles travel in a memory file of their own
_RECV_BYTES = _INLINE_MAX + 4096
_INLINE, _IN_FILE = b"I", b"F"


def _dumps(obj):
    with pickling_for_queue() as out:
        payload = reduction.ForkingPickler.dumps(obj)
    return bytes(payload), out.fds, out.keep_alive


def _send_message(sock, payload, fds):
    """One datagram: either [I][pickle] or [F] with the pickle in a sealed
    memory file whose descriptor comes last. A datagram is delivered whole
    or not at all, so a sender killed mid-send leaves nothing half-written."""
    if len(payload) <= _INLINE_MAX:
        data, extra = [_INLINE, payload], []
    else:
        data, extra = [_IN_FILE], [_payload_file(payload)]
    try:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds) + len(extra)}i", *fds, *extra))]
        sock.sendmsg(data, ancillary if fds or extra else [])
    finally:
        for fd in extra:
            os.close(fd)


def _payload_file(payload):
    fd = os.memfd_create("trainrun-queue-message", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _receive_message(sock):
    """One datagram (the caller knows one is ready; None if another reader took it first)."""
    try:
        data, ancdata, flags, _ = sock.recvmsg(_RECV_BYTES, socket.CMSG_SPACE((_MAX_FDS + 1) * 4),
                                               socket.MSG_CMSG_CLOEXEC | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return None
    fds = []
    for level, kind, raw in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(struct.unpack(f"{len(raw) // 4}i", raw[:len(raw) - len(raw) % 4]))
    try:
        if flags & socket.MSG_CTRUNC:
            raise OSError(errno.EMFILE, "a queue message's descriptors were dropped by the kernel: this process is "
                                        "at its open-file limit (ulimit -n)")
        if not data:
            raise EOFError("the queue's socket was closed")
        if data[:1] == _IN_FILE:
            # The writer's file offset is at the end (it is shared): read from 0.
            payload = os.pread(fds[-1], os.fstat(fds[-1]).st_size, 0)
            segment_fds = fds[:-1]
        else:
            payload, segment_fds = data[1:], fds
        with unpickling_from_queue(segment_fds):
            return (reduction.ForkingPickler.loads(payload),)
    finally:
        for fd in fds:  # every segment this message named is mapped (or was already): none stays open
            os.close(fd)


def _acquire(lock, block, timeout):
    if not block:
        return lock.acquire(False)
    return lock.acquire(True, timeout) if timeout is not None else lock.acquire()


class SimpleQueue:
    """multiprocessing.SimpleQueue: put writes the message before returning.

    Messages are datagrams of a Unix SOCK_SEQPACKET pair: each is read and
    written whole, so any number of processes may put and get without locks
    (nothing to share between fork and spawn contexts)."""

    def __init__(self, *, ctx=None):
        self._reader, self._writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def __getstate__(self):
        context.assert_spawning(self)
        return (reduction.DupFd(self._reader.fileno()), reduction.DupFd(self._writer.fileno()))

    def __setstate__(self, state):
        reader, writer = state[:2]
        self._reader = socket.socket(fileno=reader.detach())
        self._writer = socket.socket(fileno=writer.detach())

    def _write(self, payload, fds):
        _send_message(self._writer, payload, fds)

    def put(self, obj):
        payload, fds, keep_alive = _dumps(obj)
        self._write(payload, fds)
        del keep_alive

    def _get(self, block=True, timeout=None):
        deadline = None if not block or timeout is None else time.monotonic() + max(timeout, 0)
        while True:
            wait = 0 if not block else (None if deadline is None else max(deadline - time.monotonic(), 0))
            if not select.select([self._reader], [], [], wait)[0]:
                raise queue.Empty
            got = _receive_message(self._reader)
            if got is not None:
                return got[0]

    def get(self):
        return self._get()

    def empty(self):
        return not select.select([self._reader], [], [], 0)[0]

    def close(self):
        self._reader.close()
        self._writer.close()

    def fileno(self):
        """Readable when a message waits (for select/poll with other queues)."""
        return self._reader.fileno()


class Queue(SimpleQueue):
    """multiprocessing.Queue: put(obj, block, timeout) returns at once (a
    feeder thread writes), maxsize bounds the messages not yet taken, get
    takes block= and timeout= and raises queue.Empty."""

    def __init__(self, maxsize=0, *, ctx=None):
        ctx = ctx or multiprocessing.get_context()
        super().__init__(ctx=ctx)
        self._maxsize = maxsize
        self._sem = ctx.BoundedSemaphore(maxsize) if maxsize > 0 else None
        self._reset()
        util.register_after_fork(self, Queue._reset)

    def __getstate__(self):
        return super().__getstate__() + (self._maxsize, self._sem)

    def __setstate__(self, state):
        super().__setstate__(state[:2])
        self._maxsize, self._sem = state[2:]
        self._reset()
        util.register_after_fork(self, Queue._reset)

    def _reset(self, *_):
        self._pending = collections.deque()
        self._cond = threading.Condition()
        self._thread = None
        self._closed = False
        self._joincancelled = False

    def put(self, obj, block=True, timeout=None):
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        if self._sem is not None and not _acquire(self._sem, block, timeout):
            raise queue.Full
        try:
            item = _dumps(obj)
        except BaseException:
            if self._sem is not None:
                self._sem.release()
            raise
        with self._cond:
            if self._thread is None:
                self._start_thread()
            self._pending.append(item)
            self._cond.notify()

    def put_nowait(self, obj):
        return self.put(obj, False)

    def get(self, block=True, timeout=None):
        obj = self._get(block, timeout)
        if self._sem is not None:
            self._sem.release()
        return obj

    def get_nowait(self):
        return self.get(False)

    def qsize(self):
        if self._sem is None:
            raise NotImplementedError("qsize() of an unbounded Queue (as multiprocessing's on macOS): give maxsize")
        return self._maxsize - self._sem.get_value()

    def full(self):
        return self._sem is not None and self._sem.get_value() == 0

    def _start_thread(self):
        self._thread = threading.Thread(target=Queue._feed, args=(self._pending, self._cond, self._write),
                                        name="trainrun.Queue feeder", daemon=True)
        self._thread.start()
        # Like multiprocessing.Queue: a process flushes what it put before it exits.
        if not self._joincancelled:
            self._jointhread = util.Finalize(self._thread, Queue._finalize_join, [weakref.ref(self._thread)],
                                             exitpriority=-5)
        self._close_finalizer = util.Finalize(self, Queue._finalize_close, [self._pending, self._cond],
                                              exitpriority=10)

    @staticmethod
    def _feed(pending, cond, write):
        while True:
            with cond:
                while not pending:
                    cond.wait()
                item = pending.popleft()
            if item is None:
                return
            payload, fds, keep_alive = item
            try:
                write(payload, fds)
            except OSError as e:  # the queue was closed under us
                util.debug(f"trainrun.Queue feeder: {e}")
                return
            del item, keep_alive

    @staticmethod
    def _finalize_close(pending, cond):
        with cond:
            pending.append(None)
            cond.notify()

    @staticmethod
    def _finalize_join(ref):
        thread = ref()
        if thread is not None:
            thread.join()

    def close(self):
        """No more puts from this process; the feeder flushes what is pending and stops."""
        self._closed = True
        finalizer = getattr(self, "_close_finalizer", None)
        if finalizer is not None:
            finalizer()

    def join_thread(self):
        if getattr(self, "_jointhread", None) is not None:
            self._jointhread()

    def cancel_join_thread(self):
        self._joincancelled = True
        if getattr(self, "_jointhread", None) is not None:
            self._jointhread.cancel()
