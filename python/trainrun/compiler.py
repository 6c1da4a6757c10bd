"""torch.compiler: what PyTorch scripts call around torch.compile, over trainrun.compile's recordings
(trainrun/_compile.py): reset the caches, keep a function out of the recordings, ask whether a recording runs."""
import functools

from trainrun import _C

__all__ = ["allow_in_graph", "assume_constant_result", "cudagraph_mark_step_begin", "disable", "is_compiling",
           "is_dynamo_compiling", "is_exporting", "list_backends", "reset", "set_stance"]


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names compile(backend=...) accepts: torch._dynamo.list_backends."""
    from trainrun._dynamo import list_backends as dynamo_list_backends
    return dynamo_list_backends(exclude_tags)


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
    return is_compiling() and export._recording._exporting > 0


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


def assume_constant_result(fn):
    """Returns fn: a recording keeps what a Python function returned as a constant of the recorded ops already
    (the function is not called again on replays), which is what this marks."""
    if not callable(fn):
        raise TypeError(f"assume_constant_result: expected a function, got {type(fn).__name__}")
    return fn


_STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")


class _StanceSetting:
    """set_stance's result: the stance holds from the call on; `with` restores the one before at exit, and as a
    decorator it holds only during the decorated function's calls."""

    def __init__(self, stance, previous):
        self._stance, self._previous = stance, previous

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self._previous)
        return False

    def __call__(self, fn):
        _set(self._previous)  # (as a decorator, set_stance(...) does not change the stance outside fn)
        stance = self._stance

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            before = _set(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _set(before)

        return with_stance


def _set(stance):
    from trainrun import _compile
    before, _compile._stance = _compile._stance, stance
    return before


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """torch.compiler.set_stance (PyTorch 2.6): how compiled functions behave from now on. "default" records and
    replays; "force_eager" runs every call as plain Python; "eager_on_recompile" replays what fits and runs a call
    that would need a new recording as Python; "fail_on_recompile" raises RecompileError then. Works as a call,
    a `with` block (restored at exit) or a decorator."""
    if stance not in _STANCES:
        raise RuntimeError(f"set_stance: unknown stance {stance!r}; the stances are {list(_STANCES)}")
    if force_backend is not None:
        raise RuntimeError("set_stance: force_backend is not supported (every backend runs trainrun's recordings)")
    return _StanceSetting(stance, _set(stance))


def compile(*args, **kwargs):  # noqa: A001  (torch.compiler.compile: trainrun.compile)
    from trainrun._compile import compile as compile_
    return compile_(*args, **kwargs)
