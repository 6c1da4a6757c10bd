"""Recording a forward for export (compile/graph_capture.h), under no_grad: what export() and the recordings of
dynamic shapes share."""
from trainrun import _C
from trainrun._compile import GraphBreakError, _flatten

_exporting = 0  # export() calls recording now (trainrun.compiler.is_exporting)


def _no_grad():
    from trainrun._autograd import no_grad
    return no_grad()



def _record(mod, tensors, num_args, kwarg_names):
    """(graph, output tensors, output spec): mod's forward on these inputs, recorded under no_grad."""
    call_args, call_kwargs = tensors[:num_args], dict(zip(kwarg_names, tensors[num_args:]))
    graph = _C._CapturedGraph()
    capture = _C._GraphCapture(graph, tensors)
    global _exporting
    _exporting += 1
    try:
        with _no_grad(), capture:
            result = mod(*call_args, **call_kwargs)
            out_leaves = []
            out_spec = _flatten(result, out_leaves)
            capture.finish(out_leaves)
    finally:
        _exporting -= 1
    if capture.broken:
        name = getattr(mod, "__name__", None) or type(mod).__name__  # (_SpecializedCall: its module's)
        raise GraphBreakError(f"export: {name}.forward could not be captured whole: "
                              f"{capture.break_reason}")
    return graph, out_leaves, out_spec
