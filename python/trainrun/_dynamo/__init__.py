"""torch._dynamo's entry points that PyTorch scripts call, over trainrun.compile's recordings (trainrun/_compile.py
says how calls are recorded and replayed): reset, disable, mark_dynamic, explain, config,
utils.counters, eval_frame.OptimizedModule and the testing backends (CompileCounter)."""
import collections
import time

from trainrun import _C
from trainrun._dynamo import config, eval_frame, testing, utils  # noqa: F401
from trainrun.compiler import allow_in_graph, disable, reset  # noqa: F401
from trainrun.compiler import is_compiling  # noqa: F401

__all__ = ["allow_in_graph", "config", "disable", "explain", "graph_break", "is_compiling", "list_backends",
           "mark_dynamic", "mark_static", "maybe_mark_dynamic", "optimize", "reset"]


def graph_break():
    """Inside a call trainrun.compile records: the recording breaks here (the call runs eagerly for those guards,
    and explain() names this). Outside a recording it does nothing."""
    if _C._capture_active():
        _C._note_graph_break("torch._dynamo.graph_break() was called")


def optimize(backend="inductor", *, nopython=False, guard_export_fn=None, guard_fail_fn=None, disable=False,
             dynamic=None):
    """The older spelling of torch.compile: optimize(backend)(fn) is compile(fn, backend=backend,
    fullgraph=nopython, dynamic=dynamic)."""
    from trainrun._compile import compile as _compile

    def wrap(fn):
        return _compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic, disable=disable)
    return wrap


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names trainrun.compile accepts (each runs trainrun's recordings), without the debug ones
    ("eager", "aot_eager", ...) unless exclude_tags leaves them in."""
    from trainrun._compile import _BACKENDS
    debug = {"eager", "aot_eager", "aot_eager_decomp_partition"}
    return sorted(b for b in _BACKENDS if not (exclude_tags and "debug" in exclude_tags and b in debug))


def mark_dynamic(t, index, *, min=None, max=None):  # noqa: A002
    """Tells torch.compile that dim `index` of t varies between calls. trainrun records once per shape, so the
    hint changes nothing but is checked: index must name dims of t, and min <= max when both are given."""
    indices = list(index) if isinstance(index, (list, tuple)) else [index]
    for i in indices:
        if not isinstance(i, int) or not -t.ndim <= i < t.ndim:
            raise IndexError(f"mark_dynamic: dim {i!r} is out of range for a tensor of {t.ndim} dims")
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min ({min}) is greater than max ({max})")


def maybe_mark_dynamic(t, index):
    """mark_dynamic without the promise that the dim stays dynamic (torch's: no error if it specializes)."""
    mark_dynamic(t, index)


def mark_static(t, index=None):
    """The opposite hint (the dim keeps its size): trainrun records per shape already."""
    if index is not None and not -t.ndim <= index < t.ndim:
        raise IndexError(f"mark_static: dim {index} is out of range for a tensor of {t.ndim} dims")


class GraphBreakReason(str):
    """One break reason, as torch's GraphBreakReason: `.reason` (the text; the object is that string too) and
    `.user_stack` (empty: trainrun's recordings break below Python, where there is no user frame to name)."""

    @property
    def reason(self):
        return str(self)

    @property
    def user_stack(self):
        return []

    @property
    def graph_break(self):
        return True


class ExplainOutput(collections.namedtuple(
        "ExplainOutput", "graphs graph_count graph_break_count break_reasons op_count ops_per_graph out_guards "
                         "compile_times")):
    """What explain() found; str() gives PyTorch's summary lines."""

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines += [f"  Break Reason {i + 1}: {r}" for i, r in enumerate(self.break_reasons)]
        return "\n".join(lines)


def explain(f, *extra_args, **extra_kwargs):
    """torch._dynamo.explain(f)(*args, **kwargs): records one call of f (a fresh recording, f's own compiled
    caches untouched) and says what it became. A call trainrun cannot record whole runs eagerly, so it counts as
    one graph break and no graph (PyTorch would split it into graphs around the break)."""
    from trainrun._compile import CompiledFunction, _Recording

    def inner(*args, **kwargs):
        compiled = CompiledFunction(f, module=f if hasattr(f, "named_parameters") else None)
        start = time.perf_counter()
        compiled(*args, **kwargs)
        seconds = time.perf_counter() - start
        entries = list(compiled._cache.values())
        graphs = [e.recorded for e in entries if isinstance(e, _Recording)]  # (as captured, before fusion)
        reasons = [GraphBreakReason(e.reason) for e in entries if not isinstance(e, _Recording)]
        ops = [g.num_nodes for g in graphs]
        return ExplainOutput(graphs, len(graphs), len(reasons), reasons, sum(ops), ops, [], f"{seconds:.4f}")

    if extra_args or extra_kwargs:  # the older spelling: explain(f, *args, **kwargs)
        return inner(*extra_args, **extra_kwargs)
    return inner

