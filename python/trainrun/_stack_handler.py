"""The worker side of the launcher agent's DumpStacks: when the agent asks
for it (TRAINRUN_STACKS_DIR, set under `trainrun --agent-port`), a daemon
thread listens on `<dir>/rank<RANK>.sock` and answers each connection with
the stacks of every Python thread of this process, innermost call last, then
closes. No signal is involved, so USR1/USR2 stay the user's (preemption
warnings) and a worker blocked in C++ still answers (the thread needs only
the GIL, which blocking calls release)."""
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


def _serve(listener):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            try:
                conn.sendall(format_stacks().encode())
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
