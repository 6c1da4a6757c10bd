"""trainrun.distributed.elastic.record: writes why a worker failed to the
error file the launcher reads (TRAINRUN_ERROR_FILE), then re-raises, so
`trainrun` can print the root cause, as torch.distributed.elastic's does."""
import functools
import traceback

from trainrun import _C


class ErrorHandler:
    """What record() calls, as PyTorch's: initialize() before the function runs, record_exception(e) when it
    raises (writes the error file the launcher reads). Subclass it to record elsewhere as well."""

    def initialize(self):
        pass

    def record_exception(self, e):
        _C.distributed.record_error(f"{type(e).__name__}: {e}",
                                    "".join(traceback.format_exception(type(e), e, e.__traceback__)))


def get_error_handler():
    return ErrorHandler()


def record(fn, error_handler=None):
    """@record on a worker's main: its exception is written to the error file before it propagates, so the
    launcher names the root cause (error_handler: an ErrorHandler to record with)."""
    handler = error_handler or get_error_handler()

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        handler.initialize()
        try:
            return fn(*args, **kwargs)
        except SystemExit:
            raise
        except BaseException as e:
            handler.record_exception(e)
            raise
    return wrapper


class ProcessFailure:
    """One worker's failure: its ranks, pid, exit code, and what its error file says (message, traceback,
    timestamp), as torch.distributed.elastic's."""

    def __init__(self, local_rank, pid, exitcode, error_file, rank=None):
        import json
        import os
        import time
        self.local_rank, self.pid, self.exitcode, self.error_file = local_rank, pid, exitcode, error_file
        self.rank = rank if rank is not None else local_rank
        self.error_file_data = {}
        self.message, when = f"exit code {exitcode}", time.time()
        if error_file and os.path.isfile(error_file):
            with open(error_file) as f:
                self.error_file_data = json.load(f)
            self.message = self.error_file_data.get("message", self.message)
            when = float(self.error_file_data.get("timestamp", when))
        self.timestamp, self._when = int(when), when  # (seconds since the epoch; _when orders failures finely)

    def signal_name(self):
        import signal
        return signal.Signals(-self.exitcode).name if self.exitcode < 0 else "<N/A>"

    def timestamp_isoformat(self):
        import datetime
        return datetime.datetime.fromtimestamp(self.timestamp).isoformat(sep="_")

    def __repr__(self):
        return (f"ProcessFailure(local_rank={self.local_rank}, pid={self.pid}, exitcode={self.exitcode}, "
                f"error_file={self.error_file!r})")


class ChildFailedError(Exception):
    """Raised by the launcher API when workers failed: `failures` maps each failed global rank to its
    ProcessFailure; the first (earliest) is the root cause."""

    def __init__(self, name, failures):
        self.name, self.failures = name, failures
        if not failures:
            raise ValueError("ChildFailedError needs at least one failure")
        super().__init__(self.format_msg())

    def get_first_failure(self):
        rank = min(self.failures, key=lambda r: self.failures[r]._when)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim="=", section_delim="-"):
        import socket
        root_rank, root = self.get_first_failure()
        lines = [f"{self.name} FAILED", section_delim * 60, "Failures:"]
        others = [(r, f) for r, f in sorted(self.failures.items()) if r != root_rank]
        lines += [f"  [{r}]: exitcode {f.exitcode} ({f.message})" for r, f in others] or ["  <NO_OTHER_FAILURES>"]
        lines += [section_delim * 60, "Root Cause (first observed failure):",
                  f"[0]:\n  time      : {root.timestamp_isoformat()}\n  host      : {socket.getfqdn()}\n"
                  f"  rank      : {root_rank} (local_rank: {root.local_rank})\n  exitcode  : {root.exitcode} "
                  f"(pid: {root.pid})\n  error_file: {root.error_file or '<N/A>'}\n  message   : {root.message}"]
        traceback = root.error_file_data.get("traceback")
        if traceback:
            lines.append("  traceback :\n" + "\n".join("    " + t for t in traceback.splitlines()))
        return "\n".join([boarder_delim * 60, *lines, boarder_delim * 60])
