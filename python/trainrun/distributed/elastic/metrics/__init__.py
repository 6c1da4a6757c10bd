"""torchelastic's metrics API: put_metric(name, value, group) hands a value
to the handler configured for its group (none by default: NullMetricHandler
drops it, as torchelastic's does); ConsoleMetricHandler prints
`[group][name]: value` lines and StdoutMetricHandler is its alias; a handler
of your own subclasses MetricHandler. `prof` times a function and puts its
duration and success or failure count."""
import abc
import collections
import functools
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

_default_handler = NullMetricHandler()
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
