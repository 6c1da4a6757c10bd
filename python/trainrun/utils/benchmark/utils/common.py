"""What a benchmark measured (torch.utils.benchmark.utils.common): TaskSpec (what was timed) and Measurement
(the times of its runs, with median, IQR, significant figures and PyTorch's repr)."""
import collections
import contextlib
import dataclasses
import math
import textwrap

import numpy as np

__all__ = ["Measurement", "TaskSpec", "select_unit", "trim_sigfig", "unit_to_english", "ordered_unique",
           "set_torch_threads"]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # 25 ns
# A measurement warns when its spread is suspect: IQR / median above these.
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """What a Timer times (everything but its globals)."""
    stmt: str
    setup: str
    global_setup: str = ""
    label: str = None
    sub_label: str = None
    description: str = None
    env: str = None
    num_threads: int = 1

    @property
    def title(self):
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self):
        if self.setup == "pass" or not self.setup:
            return ""
        return f"setup:\n{textwrap.indent(self.setup, '  ')}" if "\n" in self.setup else f"setup: {self.setup}"

    def summarize(self):
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """raw_times: seconds per block of number_per_run runs. Statistics are per run."""
    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict = None

    def __post_init__(self):
        self._sorted_times, self._warnings = (), ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name):
        if name in _TASKSPEC_FIELDS:  # (the TaskSpec's fields, forwarded: m.label, m.num_threads, ...)
            return getattr(self.task_spec, name)
        raise AttributeError(f"'Measurement' object has no attribute '{name}'")

    @property
    def times(self):
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self):
        self._lazy_init()
        return self._median

    @property
    def mean(self):
        self._lazy_init()
        return self._mean

    @property
    def iqr(self):
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self):
        """The digits the interquartile spread supports (1 to 4), for Compare's trimming."""
        self._lazy_init()
        n = len(self._sorted_times)
        middle = self._sorted_times[n // 4:int(math.ceil(3 * n / 4))]
        std = float(np.std(middle)) if middle else 0.0
        interval = max(1.645 * std / math.sqrt(len(middle)) if middle else 0.0, _MIN_CONFIDENCE_INTERVAL)
        figures = int(math.floor(math.log10(self._median / interval)))
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self):
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self):
        if self.raw_times and not self._sorted_times:
            self._sorted_times = tuple(sorted(self.times))
            values = np.array(self._sorted_times, dtype=np.float64)
            self._median, self._mean = float(np.quantile(values, 0.5)), float(values.mean())
            self._p25, self._p75 = float(np.quantile(values, 0.25)), float(np.quantile(values, 0.75))
            relative = self.iqr / self.median * 100
            for threshold, why in ((_IQR_GROSS_WARN_THRESHOLD, "This suggests significant environmental influence."),
                                   (_IQR_WARN_THRESHOLD, "This could indicate system fluctuation.")):
                if not self.meets_confidence(threshold):
                    self._warnings += (f"  WARNING: Interquartile range is {relative:.1f}% of the median "
                                       f"measurement.\n           {why}",)
                    break

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        return self.iqr / self.median < threshold

    @property
    def title(self):
        return self.task_spec.title

    @property
    def env(self):
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self):
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self):
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        lines = [object.__repr__(self).replace("trainrun.utils.benchmark.utils.common", "torch.utils.benchmark."
                                                                                        "utils.common"),
                 self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to "
                         f"{self._p75 / scale:.2f})")
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {self.num_threads} thread"
                     f"{'s' if self.num_threads > 1 else ''}")
        lines += list(self._warnings)
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements):
        """Replicates of one task merged into one Measurement (times per run, number_per_run 1)."""
        grouped = collections.defaultdict(list)
        for m in measurements:
            grouped[m.task_spec].append(m)
        return [Measurement(1, [t for m in group for t in m.times], spec) for spec, group in grouped.items()]


def select_unit(t):
    """(unit, seconds per unit) that shows t with an O(1) magnitude."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(math.log10(t) // 3) if t > 0 else -3, "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def unit_to_english(u):
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x, n):
    """x rounded to n significant figures."""
    assert n == int(n)
    magnitude = int(math.ceil(math.log10(abs(x)))) if x else 0
    scale = 10 ** (magnitude - n)
    return float(round(x / scale) * scale)


def ordered_unique(elements):
    return list(collections.OrderedDict((i, None) for i in elements).keys())


@contextlib.contextmanager
def set_torch_threads(n):
    import trainrun
    previous = trainrun.get_num_threads()
    try:
        trainrun.set_num_threads(n)
        yield
    finally:
        trainrun.set_num_threads(previous)
