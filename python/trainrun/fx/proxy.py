"""torch.fx.proxy: Proxy (a traced value), Attribute (proxy.name), TraceError, and GraphAppendingTracer, a
tracer that appends to an existing graph (proxies made over its nodes add their operations there)."""
from trainrun.fx._symbolic_trace import Proxy, TraceError, Tracer, _Attribute as Attribute

__all__ = ["Attribute", "GraphAppendingTracer", "Proxy", "TraceError"]


class GraphAppendingTracer(Tracer):
    def __init__(self, graph):
        super().__init__()
        from trainrun import nn
        self.graph = graph
        self.root = nn.Module()
        self._constants = {}
