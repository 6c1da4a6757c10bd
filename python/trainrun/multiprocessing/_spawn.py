"""trainrun.multiprocessing.spawn / start_processes: run fn(i, *args) in
nprocs processes, as torch.multiprocessing does. When one fails, the others
are stopped and its error is raised here with its traceback
(ProcessRaisedException) or its exit code or signal (ProcessExitedException)."""
import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
import traceback


class ProcessException(Exception):
    __slots__ = ["error_index", "pid"]

    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A process raised: the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A process exited with a nonzero code or was killed by a signal."""

    __slots__ = ["exit_code", "signal_name"]

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_queue):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # SIGINT: the parent is stopping us
    except Exception:
        error_queue.put(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    def __init__(self, processes, error_queues):
        self.error_queues = error_queues
        self.processes = processes
        self.sentinels = {process.sentinel: index for index, process in enumerate(processes)}

    def pids(self):
        return [int(process.pid) for process in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Waits for the processes (at most `timeout` seconds). Returns True when all exited cleanly, False
        if some still run; on the first failure stops the others and raises its error."""
        if len(self.sentinels) == 0:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return len(self.sentinels) == 0
        self._stop_others(grace_period)
        failed = self.processes[error_index]
        if self.error_queues[error_index].empty():
            exitcode = failed.exitcode
            if exitcode < 0:
                name = signal.Signals(-exitcode).name
                raise ProcessExitedException(f"process {error_index} terminated with signal {name}", error_index,
                                             failed.pid, exitcode, name)
            raise ProcessExitedException(f"process {error_index} terminated with exit code {exitcode}", error_index,
                                         failed.pid, exitcode)
        original = self.error_queues[error_index].get()
        raise ProcessRaisedException(f"\n\n-- Process {error_index} terminated with the following error:\n"
                                     + original, error_index, failed.pid)

    def _stop_others(self, grace_period):
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + (grace_period if grace_period is not None else 30)
        for process in self.processes:
            process.join(max(deadline - time.monotonic(), 0))
            if process.is_alive():
                process.kill()
                process.join()


class SpawnContext(ProcessContext):
    pass


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    ctx = multiprocessing.get_context(start_method)
    from trainrun import _C
    if _C._cuda.is_available():  # the children's CUDA tensors are leased through a broker this process hosts
        from trainrun.multiprocessing._broker import host_for_children
        host_for_children()
    error_queues = []
    processes = []
    for i in range(nprocs):
        error_queue = ctx.SimpleQueue()
        process = ctx.Process(target=_wrap, args=(fn, i, args, error_queue), daemon=daemon)
        process.start()
        error_queues.append(error_queue)
        processes.append(process)
    context = ProcessContext(processes, error_queues)
    if not join:
        return context
    while not context.join():
        pass


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """fn(i, *args) for i in range(nprocs), each in a new process started with `start_method`."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
