"""torch.fx.experimental.proxy_tensor.make_fx: a function's aten-level program, as a GraphModule. PyTorch traces
the dispatcher calls a function makes on proxy tensors; trainrun records the calls it makes at its dispatcher
(the recording trainrun.compile makes, compile/graph_capture.h), which is the same program: placeholders arg0_1,
arg1_1, ... for the input tensors, a call_function node per op (torch.ops.aten.<op>.default), an output.

The recording runs the function on the real inputs (tracing_mode "real"; "fake" and "symbolic" record the same
program for these shapes). A call whose result depends on a tensor's values read into Python (item(), a branch
on a tensor) is refused, naming the read: the program would be the one branch taken. Tensors the function
reaches other than through its arguments (a module's weights) are constants of the program, read when it runs."""
from trainrun import _C
from trainrun._compile import _flatten, _unflatten

__all__ = ["make_fx"]

_TRACING_MODES = ("real", "fake", "symbolic")


def make_fx(f, decomposition_table=None, tracing_mode="real", _allow_non_fake_inputs=False, *,
            pre_dispatch=False, record_module_stack=False, _allow_fake_constant=False,
            _error_on_data_dependent_ops=True):
    """make_fx(f)(*args) -> GraphModule of the ops f(*args) made. decomposition_table is accepted and not needed:
    the recorded ops are trainrun's own kernels, with nothing composite left to decompose."""
    if tracing_mode not in _TRACING_MODES:
        raise AssertionError(f"make_fx: unexpected tracing mode {tracing_mode!r}; expected one of {_TRACING_MODES}")
    if not callable(f):
        raise TypeError(f"make_fx: expected a callable, got {type(f).__name__}")

    def traced(*args):
        from trainrun._compile_backend import graph_module
        tensors = []
        in_spec = _flatten(args, tensors)
        graph = _C._CapturedGraph()
        capture = _C._GraphCapture(graph, tensors)
        with capture:
            result = f(*_unflatten(in_spec, iter(tensors)))
            out_leaves = []
            out_spec = _flatten(result, out_leaves)
            capture.finish(out_leaves)
        if capture.broken:
            raise RuntimeError(f"make_fx: {getattr(f, '__name__', 'the function')} could not be recorded whole: "
                               f"{capture.break_reason}")
        for i, o in enumerate(out_leaves):  # (an output that is an input is no op of the program)
            if any(o is t for t in tensors):
                raise ValueError(f"make_fx: output {i} is an input itself; return a copy (x.clone())")
        names = [f"arg{i}_1" for i in range(len(tensors))]
        return graph_module(graph, names, wrap_outputs=lambda outs: _unflatten(out_spec, iter(outs)))

    return traced
