"""A profile's events as PyTorch's profiler gives them (torch.autograd.profiler_util): FunctionEvent (one op call
or named range, with its parent and children on its thread and its self time), FunctionEventAvg (the events of
one name, or of one name and input shapes, summed) and EventList, whose table() prints PyTorch's columns."""
import collections
import enum


class DeviceType(enum.Enum):
    """Where an event ran (torch.autograd.DeviceType)."""
    CPU = 0
    CUDA = 1


class Interval:
    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


def _fmt_memory(nbytes):
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} b"


def _fmt_us(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class _DeviceFields:
    """What PyTorch's events carry for devices and memory; a CPU profile's are zero."""
    device_time_total = self_device_time_total = cuda_time_total = self_cuda_time_total = 0.0
    cuda_memory_usage = self_cuda_memory_usage = 0
    flops = 0
    is_async = is_remote = is_legacy = False
    node_id = -1
    scope = 0

    device_type = DeviceType.CPU

    @property
    def cpu_time_str(self):
        return _fmt_us(self.cpu_time)

    @property
    def cpu_time_total_str(self):
        return _fmt_us(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self):
        return _fmt_us(self.self_cpu_time_total)


class FunctionEvent(_DeviceFields):
    """One op call or named range: times in microseconds from the profile's start, its thread (the OS id), the
    sizes of its tensor arguments (with record_shapes), and where it sits in its thread's tree."""

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None,  # noqa: A002  (PyTorch's name)
                 cpu_memory_usage=0, concrete_inputs=None):
        self.id, self.name, self.thread = id, name, thread
        self.time_range = Interval(start_us, end_us)
        self.cpu_memory_usage = cpu_memory_usage  # (profile_memory) bytes allocated less freed while it ran
        self.input_shapes = input_shapes if input_shapes is not None else []
        # (record_shapes) per argument: an int list's values, an integer as one element, [] for anything else
        self.concrete_inputs = [list(c) for c in concrete_inputs] if concrete_inputs is not None else []
        self.cpu_children, self.cpu_parent = [], None
        self.count = 1
        self.stack = []
        self.sequence_nr = -1
        self.fwd_thread = None

    @property
    def key(self):
        return self.name

    @property
    def trace_name(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def cpu_time(self):
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    def append_cpu_child(self, child):
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent):
        self.cpu_parent = parent

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time_total={_fmt_us(self.cpu_time_total)} "
                f"self_cpu_time_total={_fmt_us(self.self_cpu_time_total)} thread={self.thread} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg(_DeviceFields):
    """The events of one key summed: count, total and self time; cpu_time is the average."""

    def __init__(self, key=None, input_shapes=None):
        self.key, self.input_shapes = key, input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.cpu_children, self.cpu_parent, self.stack = None, None, []

    def add(self, other):
        if self.count == 0:  # (PyTorch's: the first event's parent stands for the group's, top_level_events_only)
            self.cpu_parent = other.cpu_parent
        if self.key is None:
            self.key, self.input_shapes = other.key, other.input_shapes
        if other.key != self.key:
            raise ValueError(f"FunctionEventAvg.add: {other.key!r} is not {self.key!r}")
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        return self

    def __iadd__(self, other):
        return self.add(other)

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_fmt_us(self.self_cpu_time_total)} "
                f"cpu_time={_fmt_us(self.cpu_time)} input_shapes={self.input_shapes}>")


def link_tree(events):
    """Sets each event's parent and children: the innermost event of the same thread whose range holds it."""
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e.thread].append(e)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e.time_range.start, -e.time_range.end))
        open_ranges = []
        for e in thread_events:
            while open_ranges and open_ranges[-1].time_range.end <= e.time_range.start:
                open_ranges.pop()
            if open_ranges and e.time_range.end <= open_ranges[-1].time_range.end:
                e.set_cpu_parent(open_ranges[-1])
                open_ranges[-1].append_cpu_child(e)
            open_ranges.append(e)


_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cuda_time", "cuda_time_total",
              "self_cuda_time_total", "device_time", "device_time_total", "self_device_time_total",
              "cpu_memory_usage", "self_cpu_memory_usage", "cuda_memory_usage", "self_cuda_memory_usage", "flops")


class EventList(list):
    """A list of FunctionEvents (or of their averages) with PyTorch's table, averages and totals."""

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        groups = collections.OrderedDict()
        for e in self:
            key = (e.key, str(e.input_shapes)) if group_by_input_shape else e.key
            if key not in groups:
                groups[key] = FunctionEventAvg(e.key, e.input_shapes if group_by_input_shape else None)
            groups[key].add(e)
        return EventList(groups.values())

    def total_average(self):
        total = FunctionEventAvg("Total")
        for e in self:
            total.count += e.count
            total.cpu_time_total += e.cpu_time_total
            total.self_cpu_time_total += e.self_cpu_time_total
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        """PyTorch's summary: a row per entry (sorted by `sort_by` descending), Self CPU %, Self CPU, CPU total %,
        CPU total, CPU time avg and # of Calls, and Input Shapes when the entries were grouped by them."""
        rows = [e for e in self if not top_level_events_only or getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table(sort_by={sort_by!r}): sort by one of {', '.join(_SORT_KEYS)}")
            rows.sort(key=lambda e: getattr(e, sort_by.replace("device", "cuda")), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        with_shapes = any(e.input_shapes for e in self)  # (averages keep them when grouped by them)
        name_width = min(max([len("Name")] + [len(e.key) for e in rows]) + 4, max_name_column_width)
        shapes_width = min(max([len("Input Shapes")] + [len(str(e.input_shapes)) for e in rows]) + 4,
                           max_shapes_column_width)
        with_memory = any(e.cpu_memory_usage or e.self_cpu_memory_usage for e in self)  # (profile_memory)
        headers = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"] + \
            (["CPU Mem", "Self CPU Mem"] if with_memory else []) + ["# of Calls"]
        widths = [name_width] + [12] * len(headers) + ([shapes_width] if with_shapes else [])
        names = ["Name"] + headers + (["Input Shapes"] if with_shapes else [])
        rule = "".join("-" * w + "  " for w in widths)
        self_total = sum(e.self_cpu_time_total for e in self) or 1.0
        out = [header] if header else []
        out += [rule, "".join(f"{n:>{w}}  " for n, w in zip(names, widths)), rule]
        for e in rows:
            name = e.key if len(e.key) <= name_width else e.key[:name_width - 3] + "..."
            cells = [name, f"{100.0 * e.self_cpu_time_total / self_total:.2f}%", _fmt_us(e.self_cpu_time_total),
                     f"{100.0 * e.cpu_time_total / self_total:.2f}%", _fmt_us(e.cpu_time_total),
                     _fmt_us(e.cpu_time)] + \
                ([_fmt_memory(e.cpu_memory_usage), _fmt_memory(e.self_cpu_memory_usage)] if with_memory else []) + \
                [str(e.count)]
            if with_shapes:
                shapes = str(e.input_shapes)
                cells.append(shapes if len(shapes) <= shapes_width else shapes[:shapes_width - 3] + "...")
            out.append("".join(f"{c:>{w}}  " for c, w in zip(cells, widths)))
        out += [rule, f"Self CPU time total: {_fmt_us(sum(e.self_cpu_time_total for e in self))}"]
        return "\n".join(out) + "\n"

    def export_chrome_trace(self, path, pid=0):
        import json
        trace = {"traceEvents": [_trace_event(e, pid) for e in self], "displayTimeUnit": "ms"}
        with open(path, "w") as f:
            json.dump(trace, f)


def _trace_event(e, pid):
    """One Chrome trace "X" event: operators are cpu_op, named ranges user_annotation."""
    category = "cpu_op" if "::" in e.name or e.name.startswith("ProfilerStep#") else "user_annotation"
    event = {"name": e.name, "ph": "X", "cat": category, "ts": e.time_range.start, "dur": e.cpu_time_total,
             "pid": pid, "tid": e.thread}
    if e.input_shapes:
        event["args"] = {"Input Dims": e.input_shapes}
    return event
