"""torch._logging.set_logs: which of trainrun.compile's logs print. trainrun's are graph_breaks (a recording that
broke: which function, and why; it then runs eagerly for those guards) and recompiles (a call no recording
fits, so it is recorded anew). Both go to the standard logging loggers "trainrun._dynamo.graph_breaks" and
"trainrun._dynamo.recompiles" at DEBUG, which set_logs turns on with a handler to stderr."""
import logging

__all__ = ["set_logs"]

_ARTIFACTS = {"graph_breaks": "trainrun._dynamo.graph_breaks", "recompiles": "trainrun._dynamo.recompiles"}
# PyTorch's other switches: components' levels (dynamo=logging.INFO) and artifacts trainrun has no output for
# (there is no bytecode, FX graph or Triton code to print). Accepted; they print nothing.
_SILENT = {"all", "dynamo", "aot", "autograd", "inductor", "dynamic", "torch", "distributed", "c10d", "ddp", "fsdp",
           "dtensor", "onnx", "export", "bytecode", "graph", "graph_code", "graph_sizes", "guards",
           "recompiles_verbose", "trace_source", "trace_call", "output_code", "schedule", "perf_hints",
           "post_grad_graphs", "pre_grad_graphs", "aot_graphs", "aot_joint_graph", "ddp_graphs", "kernel_code",
           "fusion", "overlap", "modules", "sym_node", "compiled_autograd", "cudagraphs", "cudagraph_static_inputs"}
_handler = None


def set_logs(**switches):
    """torch._logging.set_logs(graph_breaks=True, recompiles=True, ...): turns trainrun.compile's logs on (True)
    or off (False). A call resets the switches it does not name, as PyTorch's does. Unknown names are refused."""
    global _handler
    unknown = sorted(k for k in switches if k not in _ARTIFACTS and k not in _SILENT)
    if unknown:
        raise ValueError(f"set_logs: unknown log {unknown[0]!r}; trainrun's are {sorted(_ARTIFACTS)} (and PyTorch's "
                         "other names, which print nothing here)")
    if _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    for name, logger_name in _ARTIFACTS.items():
        logger = logging.getLogger(logger_name)
        on = bool(switches.get(name, False))
        logger.setLevel(logging.DEBUG if on else logging.NOTSET)
        if on and _handler not in logger.handlers:
            logger.addHandler(_handler)
        if not on and _handler in logger.handlers:
            logger.removeHandler(_handler)
