"""The worker side of the launcher agent's DumpStacks and GetFlightRecord:
when the agent asks for it (TRAINRUN_STACKS_DIR, set under `trainrun
--agent-port`), a daemon thread listens on `<dir>/rank<RANK>.sock`. Each
connection sends one request line and gets one answer, then the handler
closes it:
  stacks  every Python thread's stack, innermost call last
  flight  this process's flight record (JSON; c10d/flight_recorder.h)
No signal is involved, so USR1/USR2 stay the user's (preemption warnings)
and a worker blocked in C++ still answers (the thread needs only the GIL,
which blocking calls release)."""
import os
import socket
import sys
import threading
import traceback


def format_stacks():
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue  # this handler's own thread
        parts.append(f'Thread {ident} "{names.get(ident, "?")}" (pid {os.getpid()}):\n'
                     + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)


def _flight_record():
    from trainrun import _C
    return _C.distributed._flight_record_json("the launcher's agent asked (GetFlightRecord)")


_ANSWERS = {"stacks": format_stacks, "flight": _flight_record}


def _read_request(conn):
    conn.settimeout(2.0)  # a client that connects and says nothing does not block the next one
    data = b""
    while b"\n" not in data and len(data) < 64:
        chunk = conn.recv(64)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace").strip()


def _serve(listener):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            try:
                request = _read_request(conn)
                answer = _ANSWERS.get(request)
                text = answer() if answer else f"unknown request {request!r} (expected one of {sorted(_ANSWERS)})"
                conn.settimeout(10.0)
                conn.sendall(text.encode())
            except OSError:
                pass  # the agent went away: answer the next one


def _answers(path):
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def start():
    """Starts the handler once per worker process; a child process of the worker (a DataLoader worker, a
    multiprocessing child) finds the socket taken and stays out of the way."""
    directory, rank = os.environ.get("TRAINRUN_STACKS_DIR"), os.environ.get("RANK")
    if not directory or rank is None:
        return
    path = os.path.join(directory, f"rank{rank}.sock")
    if os.path.exists(path) and not _answers(path):
        os.unlink(path)  # left by this rank's worker of an earlier attempt
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
    except OSError:
        listener.close()  # a live process of this rank (our parent) has it
        return
    listener.listen(4)
    threading.Thread(target=_serve, args=(listener,), name="trainrun-stack-handler", daemon=True).start()
