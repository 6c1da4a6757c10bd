"""This process's connection to the node's broker of shared device memory
(launcher/ipc_broker.h): the trainrun agent hosts it and names it in
TRAINRUN_IPC_BROKER; without an agent, trainrun.multiprocessing hosts one in
the parent before its first child starts (host_for_children).

An owner exports a block and takes a lease for each message that carries
its handle (waiting for the broker's answer, so the block is held before
any receiver can see it); the receiver claims the lease when it opens the
handle and releases it when its tensor dies. The broker tells the owner of
each release (also when the holder dies), and the owner gives back that
lease's hold on the block. A reader thread takes those notices as they come,
so a block returns to its owner's pool as soon as the last lease is gone.
A handle names the broker its owner uses, so the receiver reaches the same
one whoever hosts it."""
import atexit
import itertools
import json
import os
import socket
import tempfile
import threading

ENV = "TRAINRUN_IPC_BROKER"
_MAX_MESSAGE = 64 * 1024


class BrokerError(RuntimeError):
    pass


class BrokerClient:
    def __init__(self, path, timeout=30.0):
        self.path, self.timeout, self.pid = path, timeout, os.getpid()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            raise BrokerError(f"cannot reach the shared-memory broker at {path} ({ENV}): {e}") from None
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._waiting = {}      # key -> [threading.Event, reply]
        self._on_released = {}  # export id -> callable(lease), one call per released lease
        self._ids = itertools.count()
        self._send({"op": "hello", "rank": int(os.environ.get("RANK", "-1")), "pid": self.pid})
        self._reader = threading.Thread(target=self._read, name="trainrun-ipc-broker-client", daemon=True)
        self._reader.start()

    def _send(self, message):
        data = json.dumps(message).encode()
        with self._send_lock:
            self._sock.send(data)

    def _request(self, message, key):
        waiter = [threading.Event(), None]
        with self._lock:
            self._waiting[key] = waiter
        self._send(message)
        if not waiter[0].wait(self.timeout):
            with self._lock:
                self._waiting.pop(key, None)
            raise BrokerError(f"the shared-memory broker at {self.path} did not answer {message['op']!r} within "
                              f"{self.timeout:g} s")
        reply = waiter[1]
        if reply is None:
            raise BrokerError(f"the shared-memory broker at {self.path} went away")
        if reply.get("op") == "error":
            raise BrokerError(f"the shared-memory broker refused {message['op']!r}: {reply.get('message')}")
        return reply

    def _read(self):
        while True:
            try:
                data = self._sock.recv(_MAX_MESSAGE)
            except socket.timeout:
                continue
            except OSError:
                data = b""
            if not data:  # the broker is gone: wake every waiter
                with self._lock:
                    waiters, self._waiting = list(self._waiting.values()), {}
                for w in waiters:
                    w[0].set()
                return
            reply = json.loads(data)
            op = reply.get("op")
            if op == "released":
                callback = self._on_released.get(reply.get("id"))
                if callback is not None:
                    callback(reply.get("lease"))
                continue
            # Answers: to a lease (by its name) or a report; an error about a message nobody waits for (a claim
            # of a lease whose owner died before it was opened) has no one to tell.
            key = reply.get("lease", op)
            with self._lock:
                waiter = self._waiting.pop(key, None)
            if waiter is not None:
                waiter[1] = reply
                waiter[0].set()

    def export(self, export_id, nbytes, device, on_released):
        """Registers a block this process shares; on_released(lease) runs (on the reader thread) once per lease
        released."""
        self._on_released[export_id] = on_released
        self._send({"op": "export", "id": export_id, "bytes": int(nbytes), "device": str(device)})

    def lease(self, export_id):
        """A new lease on one of this process's exports, held once this returns."""
        lease = f"{self.pid}:{next(self._ids)}"
        self._request({"op": "lease", "id": export_id, "lease": lease}, lease)
        return lease

    def claim(self, lease):
        self._send({"op": "claim", "lease": lease})

    def release(self, lease):
        try:
            self._send({"op": "release", "lease": lease})
        except OSError:
            pass  # the broker is gone (the job is ending): nothing is left to give back to

    def unexport(self, export_id):
        self._on_released.pop(export_id, None)
        self._send({"op": "unexport", "id": export_id})

    def report(self):
        """The broker's books: {"exports": [...], "leases": [...]}. Notices sent before it have been handled
        when it returns (one socket, in order)."""
        return self._request({"op": "report"}, "report")

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


_state = {"clients": {}, "hosted": None}
_state_lock = threading.RLock()


def client_at(path):
    """This process's connection to the broker at `path` (made on first use; anew in a forked child)."""
    with _state_lock:
        c = _state["clients"].get(path)
        if c is None or c.pid != os.getpid():
            _state["clients"][path] = c = BrokerClient(path)
        return c


def connected_clients():
    """This process's live connections to brokers."""
    with _state_lock:
        return [c for c in _state["clients"].values() if c.pid == os.getpid()]


def client_for_export():
    """The connection an owner exports through: to the node's broker ($TRAINRUN_IPC_BROKER, set by the agent or a
    parent that hosts one), or to one this process starts hosting now. Handles name the broker, so a receiver
    always reaches the one its sender used."""
    with _state_lock:
        return client_at(os.environ.get(ENV) or host_for_children())


def host_for_children():
    """Hosts a broker in this process for itself and the children it starts, unless one is set already (under
    the agent, or hosted before). Returns the broker's socket path."""
    with _state_lock:
        if os.environ.get(ENV):
            return os.environ[ENV]
        from trainrun import _C
        folder = tempfile.mkdtemp(prefix="trainrun-ipc-")
        broker = _C._IpcBroker(os.path.join(folder, "broker.sock"))
        _state["hosted"] = (broker, folder, os.getpid())
        os.environ[ENV] = broker.socket_path
        atexit.register(_close_hosted)
        return broker.socket_path


def hosted_broker():
    """The broker this process hosts, or None."""
    hosted = _state["hosted"]
    return hosted[0] if hosted is not None and hosted[2] == os.getpid() else None


def _close_hosted():
    for c in list(_state["clients"].values()):
        if c.pid == os.getpid():
            c.close()
    _state["clients"].clear()
    hosted = _state["hosted"]
    if hosted is None or hosted[2] != os.getpid():
        return
    broker, folder, _ = hosted
    report = broker.leak_report()
    if report:
        import sys
        print("trainrun.multiprocessing: shared device memory the processes left behind:\n" + report.rstrip("\n"),
              file=sys.stderr)
    _state["hosted"] = None
    os.environ.pop(ENV, None)
    hosted = broker = None  # its destructor removes the socket
    try:
        os.rmdir(folder)
    except OSError:
        pass
