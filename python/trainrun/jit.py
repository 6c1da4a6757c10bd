"""torch.jit, as far as trainrun goes: the predicates code asks (is_scripting, is_tracing: never) and the
decorators that only mark functions (ignore, unused, export, annotations). TorchScript itself (script,
trace) is not there: trainrun.compile and trainrun.export capture programs instead, and those say so."""


def is_scripting():
    return False


def is_tracing():
    return False


def _marker(fn=None, **kwargs):
    """@torch.jit.ignore, @torch.jit.ignore(drop=True): the function itself."""
    if fn is None:
        return lambda f: f
    return fn


ignore = unused = export = _marker


def _no_torchscript(name):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"torch.jit.{name}: TorchScript is not part of trainrun; use trainrun.compile "
                                  "(in process) or trainrun.export + trainrun.aot_compile (a library a C++ program "
                                  "runs)")
    refuse.__name__ = name
    return refuse


script, trace, trace_module, load, save, freeze, optimize_for_inference = (
    _no_torchscript(n) for n in ("script", "trace", "trace_module", "load", "save", "freeze",
                                 "optimize_for_inference"))


class Final:  # noqa: D101  (typing marker: `x: torch.jit.Final[int]`)
    def __class_getitem__(cls, item):
        return item


def annotate(the_type, the_value):
    return the_value
