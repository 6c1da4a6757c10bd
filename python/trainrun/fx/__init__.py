"""trainrun.fx: torch.fx's Graph, Node, GraphModule and Interpreter/Transformer. Graphs come from programs
trainrun recorded (ExportedProgram.graph, what a custom torch.compile backend is handed) or are built by hand;
they can be edited (create_node at inserting_before/after, replace_all_uses_with, erase_node) and a GraphModule
runs the edited graph after recompile(). symbolic_trace(module) records a forward's Python-level program
(call_module for trainrun.nn's layers, call_function/call_method for the rest) with Proxy objects."""
from trainrun.fx.graph import Graph
from trainrun.fx.graph_module import GraphModule
from trainrun.fx.interpreter import Interpreter, Transformer
from trainrun.fx.node import Node, map_arg
from trainrun.fx._symbolic_trace import Proxy, TraceError, Tracer, symbolic_trace, wrap
from trainrun.fx import node, proxy  # noqa: F401  (torch.fx.node.Target, torch.fx.proxy.GraphAppendingTracer)

__all__ = ["Graph", "GraphModule", "Interpreter", "Node", "Proxy", "TraceError", "Tracer", "Transformer", "map_arg",
           "symbolic_trace", "wrap"]
