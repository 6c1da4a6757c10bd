"""trainrun.fx: torch.fx's Graph, Node, GraphModule and Interpreter/Transformer. Graphs come from programs
trainrun recorded (ExportedProgram.graph, what a custom torch.compile backend is handed) or are built by hand;
they can be edited (create_node at inserting_before/after, replace_all_uses_with, erase_node) and a GraphModule
runs the edited graph after recompile(). There is no symbolic tracer: trainrun captures programs at the
dispatcher (trainrun.compile, trainrun.export), not by tracing Python with proxies."""
from trainrun.fx.graph import Graph
from trainrun.fx.graph_module import GraphModule
from trainrun.fx.interpreter import Interpreter, Transformer
from trainrun.fx.node import Node, map_arg

__all__ = ["Graph", "GraphModule", "Interpreter", "Node", "Transformer", "map_arg"]
