"""trainrun.fx: torch.fx's Graph and Node, for reading programs trainrun recorded (ExportedProgram.graph,
ExportedProgram.graph_module.graph), and GraphModule (ExportedProgram.module(), what a custom
torch.compile backend is handed). There is no symbolic tracer: trainrun captures programs at the dispatcher
(trainrun.compile, trainrun.export), not by tracing Python with proxies."""
from trainrun.fx.graph import Graph
from trainrun.fx.graph_module import GraphModule
from trainrun.fx.node import Node

__all__ = ["Graph", "GraphModule", "Node"]
