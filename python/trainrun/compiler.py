"""torch.compiler: what PyTorch scripts call around torch.compile, over trainrun.compile's recordings
(trainrun/_compile.py): reset the caches, keep a function out of the recordings, ask whether a recording runs."""
import functools

from trainrun import _C

__all__ = ["allow_in_graph", "cudagraph_mark_step_begin", "disable", "is_compiling", "is_dynamo_compiling",
           "is_exporting", "reset"]


def reset():
    """Forgets every compiled function's recordings: their next calls record anew."""
    from trainrun._compile import _compiled_functions
    for fn in list(_compiled_functions):
        fn.reset()


def is_compiling():
    """True while trainrun.compile or trainrun.export records a call (the Python of a replay does not run at all,
    so code that branches on this takes the recorded branch on every replay)."""
    return bool(_C._capture_active())


def is_dynamo_compiling():
    return is_compiling()


def is_exporting():
    """True while trainrun.export records a module's forward."""
    from trainrun import export
    return is_compiling() and export._exporting > 0


def disable(fn=None, recursive=True):
    """fn runs as Python on every call, never replayed from a recording: a compiled call that reaches it runs
    eagerly for those guards (a graph break that explain() names). On a module, its forward is wrapped.
    Usable as a decorator, with or without arguments."""
    if fn is None:
        return lambda f: disable(f, recursive)
    if hasattr(fn, "named_parameters") and hasattr(fn, "forward"):  # a module: its forward
        fn.forward = _disabled(fn.forward, f"{type(fn).__name__}.forward")
        return fn
    if not callable(fn):
        raise TypeError(f"disable: expected a function or a module, got {type(fn).__name__}")
    return _disabled(fn, getattr(fn, "__qualname__", None) or type(fn).__name__)


def _disabled(fn, name):
    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        if _C._capture_active():
            _C._note_graph_break(f"{name} is marked trainrun.compiler.disable")
        return fn(*args, **kwargs)

    disabled._trainrun_compile_disabled = True
    return disabled


def allow_in_graph(fn):
    """Returns fn. trainrun records the ops a call makes at the dispatcher, below Python, so every function's ops
    are in the graph already; nothing needs allowing."""
    if not callable(fn):
        raise TypeError(f"allow_in_graph: expected a function, got {type(fn).__name__}")
    return fn


def cudagraph_mark_step_begin():
    """Marks a new iteration for mode="reduce-overhead"'s CUDA graphs. trainrun's replays do not use CUDA graphs,
    so outputs of one step are never overwritten by the next: there is nothing to mark."""
