"""trainrun.cpu, as torch.cpu: the device-module interface (the same calls as trainrun.cuda) for the CPU, so
device-generic code (`get_device_module(device).synchronize()`, FSDP2's streams) runs unchanged. The CPU runs
operations in program order, so streams and events are ordering no-ops that report completion."""
from contextlib import AbstractContextManager


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def set_device(device):
    """Accepted for the interface: there is one CPU device."""


def synchronize(device=None):
    """Every CPU operation has completed when it returns, so there is nothing to wait for."""


class Event:
    def query(self):
        return True

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass

    def elapsed_time(self, end_event):
        raise RuntimeError("elapsed_time: CPU events carry no timestamps (time with time.perf_counter)")


class Stream:
    def __init__(self, priority=-1):
        self.priority = priority

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        return event if event is not None else Event()

    def query(self):
        return True

    def synchronize(self):
        pass


_default_cpu_stream = Stream()
_current_stream = _default_cpu_stream


def current_stream(device=None):
    return _current_stream


class StreamContext(AbstractContextManager):
    """Makes `stream` the current CPU stream inside the block."""

    def __init__(self, stream):
        self.stream, self.prev_stream = stream, None

    def __enter__(self):
        global _current_stream
        self.prev_stream, _current_stream = _current_stream, (self.stream if self.stream is not None
                                                              else _current_stream)
        return self

    def __exit__(self, *exc):
        global _current_stream
        _current_stream = self.prev_stream


def stream(stream):
    return StreamContext(stream)
