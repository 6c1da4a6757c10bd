"""torch.profiler: profile(...) records every operator called through the dispatcher ("aten::addmm", a custom
op's "ns::name"), the autograd engine's nodes ("autograd::engine::evaluate_function: ..."), a compiled call's
generated loops and the ranges record_function names, on every thread, with wall times and (record_shapes) the
sizes of each op's tensor arguments; with a schedule, one ProfilerStep#N range per step (as PyTorch's). Events
nest by time on their thread, so each has a self time; key_averages().table() prints PyTorch's summary and
export_chrome_trace / tensorboard_trace_handler write the Chrome trace format that chrome://tracing and Perfetto
read. schedule(wait, warmup, active, repeat, skip_first) decides which steps record, as PyTorch's. The recorder
is tensor/record_function.h: while no profile records, an op pays one atomic load for it."""
import contextlib
import enum
import os
import socket
import time

from trainrun import _C
from trainrun.profiler._events import DeviceType, EventList, FunctionEvent, FunctionEventAvg, link_tree  # noqa: F401


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """PyTorch's: skip_first steps, then cycles of wait (NONE), warmup (WARMUP) and active (RECORD; the cycle's
    last RECORD_AND_SAVE), `repeat` times (0: for ever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("schedule: wait, warmup, repeat and skip_first must be >= 0 and active > 0")

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if at == cycle - 1 else ProfilerAction.RECORD
    return action


class record_function(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """Marks a range (as a with block or a decorator) for the profilers recording now: one event, the parent of
    the ops called inside it."""

    def __init__(self, name, args=None):
        self.name, self.args = name, args
        self._start = None

    def _recreate_cm(self):  # as a decorator: a range per call (calls may nest or run on several threads)
        return record_function(self.name, self.args)

    def __enter__(self):
        if _C._profiler_active():
            self._bytes, self._start = _C._profiler_net_bytes(), _C._profiler_now_ns()
        else:
            self._start = None
        return self

    def __exit__(self, *exc):
        if self._start is not None:
            _C._profiler_add_event(self.name, self._start, _C._profiler_now_ns(),
                                   _C._profiler_net_bytes() - self._bytes)
        return False


class profile:  # noqa: N801  (PyTorch's name)
    """PyTorch's profiler context: records every op called (aten::addmm, ...), the autograd engine's nodes, a
    compiled call's generated loops and the ranges record_function names, each with its wall time, thread and
    (record_shapes) its tensor arguments' sizes. With schedule, step() moves through its actions and calls
    on_trace_ready after each RECORD_AND_SAVE step; without, everything between start and stop is recorded."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 enabled=True, use_device=None, use_kineto=True, use_cpu=True, custom_trace_id_callback=None):
        self.activities = set(activities or [ProfilerActivity.CPU])
        self.enabled = enabled
        self.schedule = schedule or (lambda step: ProfilerAction.RECORD)
        self.record_steps = schedule is not None  # (PyTorch's: ProfilerStep#N ranges with a schedule)
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.with_flops, self.with_modules = with_flops, with_modules
        self.step_num = 0
        self._raw, self._origin_ns, self._recording, self._step_start, self._from = [], None, False, None, 0
        self._function_events = None
        self._acc_events = acc_events

    # ---- recording ----
    def _pull(self):
        """Moves the events recorded since the last pull out of the recorder (it may be cleared later)."""
        if self._recording:
            self._raw += _C._profiler_events(self._from)
            self._from = _C._profiler_num_events()
            self._function_events = None

    def _set_recording(self, on):
        on = on and self.enabled
        if on and not self._recording:
            _C._profiler_start(self.record_shapes, self.profile_memory)
            self._from = _C._profiler_num_events()
        elif not on and self._recording:
            self._pull()
            _C._profiler_stop()
        self._recording = on

    def start(self):
        self._origin_ns = _C._profiler_now_ns()
        self._action = self.schedule(self.step_num)
        self._set_recording(self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE))
        self._step_start = _C._profiler_now_ns()

    def stop(self):
        self._close_step()
        self._set_recording(False)
        if self.on_trace_ready is not None and self._action in (ProfilerAction.RECORD,
                                                                 ProfilerAction.RECORD_AND_SAVE) and self._raw:
            self.on_trace_ready(self)

    def step(self):
        """Ends step step_num (a ProfilerStep#N range) and moves the schedule on."""
        self._close_step()
        self._pull()
        previous = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        if previous == ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready is not None:
            self.on_trace_ready(self)
            if not self._acc_events:
                self._raw, self._function_events = [], None
        self._set_recording(self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE))
        self._step_start = _C._profiler_now_ns()

    def _close_step(self):
        if self._step_start is not None and self._recording and self.record_steps:
            _C._profiler_add_event(f"ProfilerStep#{self.step_num}", self._step_start, _C._profiler_now_ns())
        self._step_start = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- results ----
    def events(self):
        """Every event recorded (FunctionEvents, each linked to its parent and children on its thread)."""
        self._pull()
        if self._function_events is None:
            origin = self._origin_ns
            events = [FunctionEvent(i, name, thread, (start - origin) / 1e3, (end - origin) / 1e3,
                                    [list(s) for s in shapes], memory, concrete_inputs=concrete)
                      for i, (name, start, end, thread, shapes, memory, concrete) in enumerate(self._raw)]
            link_tree(events)
            events.sort(key=lambda e: e.time_range.start)
            self._function_events = EventList(events)
        return self._function_events

    @property
    def function_events(self):
        return self.events()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    @property
    def self_cpu_time_total(self):
        return self.events().self_cpu_time_total

    def table(self, *args, **kwargs):  # (torch.autograd.profiler.profile's, as total_average and str)
        return self.events().table(*args, **kwargs)

    def total_average(self):
        return self.events().total_average()

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path):
        """The recorded events as Chrome trace events ("X" events, microseconds): operators as cpu_op, named
        ranges as user_annotation."""
        self.events().export_chrome_trace(path, pid=os.getpid())

    def export_stacks(self, path, metric="self_cpu_time_total"):
        raise NotImplementedError("export_stacks: trainrun's profiler records no stacks (with_stack)")


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """on_trace_ready that writes <dir_name>/<worker_name>.<time>.pt.trace.json (TensorBoard's profile plugin
    and Perfetto read it)."""
    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json")
        prof.export_chrome_trace(path)
        if use_gzip:
            import gzip
            import shutil
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(path)
    return handler


__all__ = ["DeviceType", "EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction", "ProfilerActivity",
           "profile", "record_function", "schedule",
           "tensorboard_trace_handler"]
