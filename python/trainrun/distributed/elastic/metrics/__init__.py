"""torchelastic's metrics API: put_metric(name, value, group) hands a value
to the handler configured for its group. By default that is NullMetricHandler
(it drops the value, as torchelastic's does), except under `trainrun
--metrics-port`, where the launcher agent's handler keeps this worker's latest
value of each metric for the agent's /metrics page. ConsoleMetricHandler
prints `[group][name]: value` lines and StdoutMetricHandler is its alias; a
handler of your own subclasses MetricHandler. `prof` times a function and
puts its duration and success or failure count."""
import abc
import collections
import functools
import json
import numbers
import os
import time

MetricData = collections.namedtuple("MetricData", ["timestamp", "group_name", "name", "value"])


class MetricHandler(abc.ABC):
    @abc.abstractmethod
    def emit(self, metric_data):
        ...


class NullMetricHandler(MetricHandler):
    def emit(self, metric_data):
        pass


class ConsoleMetricHandler(MetricHandler):
    def emit(self, metric_data):
        print(f"[{metric_data.timestamp}][{metric_data.group_name}]: {metric_data.name}={metric_data.value}",
              flush=True)


StdoutMetricHandler = ConsoleMetricHandler


class AgentMetricHandler(MetricHandler):
    """This worker's latest value of each metric, in `<directory>/rank<RANK>.json`, which the launcher agent
    reads at each scrape of its /metrics page (TRAINRUN_METRICS_DIR, set by `trainrun --metrics-port`). The file
    is replaced whole (write, then rename), so the agent never reads half of one."""

    def __init__(self, directory, rank):
        self._path = os.path.join(directory, f"rank{rank}.json")
        self._rank = int(rank)
        self._values = {}

    def emit(self, metric_data):
        if not isinstance(metric_data.value, numbers.Real):
            return  # Prometheus samples are numbers
        self._values[f"{metric_data.group_name}/{metric_data.name}"] = float(metric_data.value)
        tmp = f"{self._path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"rank": self._rank, "metrics": self._values}, f)
        os.replace(tmp, self._path)


_default_handler = (AgentMetricHandler(os.environ["TRAINRUN_METRICS_DIR"], os.environ.get("RANK", "0"))
                    if os.environ.get("TRAINRUN_METRICS_DIR") else NullMetricHandler())
_handlers = {}


def configure(handler, group=None):
    """handler for every group (group=None) or for one."""
    global _default_handler
    if group is None:
        _default_handler = handler
    else:
        _handlers[group] = handler


def getStream(group):  # noqa: N802  (torchelastic's name)
    return _handlers.get(group, _default_handler)


def put_metric(metric_name, metric_value, metric_group="torchelastic"):
    getStream(metric_group).emit(MetricData(int(time.time()), metric_group, metric_name, metric_value))


def prof(fn=None, group="torchelastic"):
    """@prof: puts `<qualname>.success` or `.failure` (1) and `.duration.ms` for each call."""
    def wrap(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            key = f.__qualname__
            start = time.perf_counter()
            try:
                result = f(*args, **kwargs)
                put_metric(f"{key}.success", 1, group)
                return result
            except Exception:
                put_metric(f"{key}.failure", 1, group)
                raise
            finally:
                put_metric(f"{key}.duration.ms", int((time.perf_counter() - start) * 1000), group)
        return wrapper
    return wrap(fn) if fn is not None else wrap
