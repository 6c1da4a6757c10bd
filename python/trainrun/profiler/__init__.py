"""torch.profiler, for what a training script marks: profile(...) records the ranges of record_function
blocks and, with a schedule, one ProfilerStep#N range per step (as PyTorch's), on every thread, with wall times;
key_averages().table() summarises them and export_chrome_trace / tensorboard_trace_handler write the
Chrome trace format that chrome://tracing and Perfetto read. schedule(wait, warmup, active, repeat,
skip_first) decides which steps record, as PyTorch's. Individual operators are not recorded (trainrun's
dispatcher has no profiling hook yet): a table has the ranges the script named."""
import collections
import contextlib
import enum
import json
import os
import socket
import threading
import time


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


_ACTIVE = []  # the profilers recording now (record_function reports to them)
_LOCK = threading.Lock()


class FunctionEvent:
    """One recorded range: name, start and end (microseconds since the profile started), thread."""
    __slots__ = ("name", "start_us", "end_us", "thread")

    def __init__(self, name, start_us, end_us, thread):
        self.name, self.start_us, self.end_us, self.thread = name, start_us, end_us, thread

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    def __repr__(self):
        return f"<FunctionEvent name={self.name!r} cpu_time_total={self.cpu_time_total:.1f}us>"


class FunctionEventAvg:
    """The ranges of one name together: count, total and average time."""

    def __init__(self, key):
        self.key, self.count, self.cpu_time_total = key, 0, 0.0

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return f"<FunctionEventAvg key={self.key!r} count={self.count} cpu_time_total={self.cpu_time_total:.1f}us>"


class EventList(list):
    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, header=None, top_level_events_only=False):
        rows = list(self)
        if sort_by is not None:
            key = sort_by.replace("self_", "").replace("cuda", "cpu").replace("device", "cpu")
            if key not in ("cpu_time_total", "cpu_time", "count"):
                raise ValueError(f"table(sort_by={sort_by!r}): sort by cpu_time_total, cpu_time or count")
            rows.sort(key=lambda e: getattr(e, key), reverse=True)
        rows = rows[:row_limit] if row_limit and row_limit > 0 else rows
        width = max([len("Name")] + [min(len(e.key), max_name_column_width) for e in rows])
        total = sum(e.cpu_time_total for e in self) or 1.0
        lines = [header] if header else []
        lines.append(f"{'Name':<{width}}  {'CPU total %':>11}  {'CPU total':>12}  {'CPU time avg':>12}  "
                     f"{'# of Calls':>10}")
        lines.append("-" * len(lines[-1]))
        for e in rows:
            lines.append(f"{e.key[:width]:<{width}}  {100.0 * e.cpu_time_total / total:>10.2f}%  "
                         f"{_fmt_us(e.cpu_time_total):>12}  {_fmt_us(e.cpu_time):>12}  {e.count:>10}")
        lines.append(f"Self CPU time total: {_fmt_us(total)}")
        return "\n".join(lines)

    def total_average(self):
        avg = FunctionEventAvg("Total")
        for e in self:
            avg.count += e.count
            avg.cpu_time_total += e.cpu_time_total
        return avg


def _fmt_us(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class record_function(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """Marks a range (as a with block or a decorator) for the profilers recording now."""

    def __init__(self, name, args=None):
        self.name, self.args = name, args
        self._start = None

    def __enter__(self):
        self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        end = time.perf_counter_ns()
        with _LOCK:
            recorders = list(_ACTIVE)
        for prof in recorders:
            prof._add(self.name, self._start, end)
        return False


class profile:  # noqa: N801  (PyTorch's name)
    """PyTorch's profiler context: with schedule, step() moves through its actions and calls on_trace_ready
    after each RECORD_AND_SAVE step; without, everything between start and stop is recorded."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None):
        self.activities = set(activities or [ProfilerActivity.CPU])
        self.schedule = schedule or (lambda step: ProfilerAction.RECORD)
        self.record_steps = schedule is not None  # (PyTorch's: ProfilerStep#N ranges with a schedule)
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.step_num = 0
        self._events, self._origin_ns, self._recording, self._step_start = [], None, False, None
        self._acc_events = acc_events

    # ---- recording ----
    def _add(self, name, start_ns, end_ns):
        if self._recording:
            origin = self._origin_ns
            self._events.append(FunctionEvent(name, (start_ns - origin) / 1e3, (end_ns - origin) / 1e3,
                                              threading.get_ident()))

    def _set_recording(self, on):
        if on and not self._recording:
            with _LOCK:
                _ACTIVE.append(self)
        elif not on and self._recording:
            with _LOCK:
                _ACTIVE.remove(self)
        self._recording = on

    def start(self):
        self._origin_ns = time.perf_counter_ns()
        self._action = self.schedule(self.step_num)
        self._set_recording(self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE))
        self._step_start = time.perf_counter_ns()

    def stop(self):
        self._close_step()
        self._set_recording(False)
        if self.on_trace_ready is not None and self._action in (ProfilerAction.RECORD,
                                                                 ProfilerAction.RECORD_AND_SAVE) and self._events:
            self.on_trace_ready(self)

    def step(self):
        """Ends step step_num (a ProfilerStep#N range) and moves the schedule on."""
        self._close_step()
        previous = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        if previous == ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready is not None:
            self.on_trace_ready(self)
            if not self._acc_events:
                self._events = []
        self._set_recording(self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE))
        self._step_start = time.perf_counter_ns()

    def _close_step(self):
        if self._step_start is not None and self._recording and self.record_steps:
            self._add(f"ProfilerStep#{self.step_num}", self._step_start, time.perf_counter_ns())
        self._step_start = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- results ----
    def events(self):
        return EventList(self._events)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        by_name = collections.OrderedDict()
        for e in self._events:
            avg = by_name.setdefault(e.name, FunctionEventAvg(e.name))
            avg.count += 1
            avg.cpu_time_total += e.cpu_time_total
        return EventList(by_name.values())

    def export_chrome_trace(self, path):
        """The recorded ranges as Chrome trace events ("X" events, microseconds)."""
        pid = os.getpid()
        trace = {"traceEvents": [{"name": e.name, "ph": "X", "cat": "user_annotation"
                                  if not e.name.startswith("ProfilerStep#") else "cpu_op",
                                  "ts": e.start_us, "dur": e.cpu_time_total, "pid": pid, "tid": e.thread}
                                 for e in self._events],
                 "displayTimeUnit": "ms"}
        with open(path, "w") as f:
            json.dump(trace, f)

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


__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule",
           "tensorboard_trace_handler"]
