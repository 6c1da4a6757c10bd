"""torch.fx.GraphModule for a program trainrun recorded: an nn.Module with `graph` (a trainrun.fx Graph), `code`
(the Python torch.fx would write for it) and print_readable(). Calling it runs the recorded program itself (the
graph's nodes are dispatcher ops trainrun recorded; there is no generated Python to exec), so an edit of `graph`
does not change what it computes: recompile() says so rather than run a program that differs from the graph."""
from trainrun import nn


class GraphModule(nn.Module):
    """What ExportedProgram.module() returns, and what a custom torch.compile backend is handed: `run` is the
    program (called with the module's inputs), `graph` its trainrun.fx Graph."""

    def __init__(self, root, graph, class_name="GraphModule", run=None):
        super().__init__()
        if run is None:
            raise NotImplementedError("GraphModule(root, graph): trainrun builds graph modules from programs it "
                                      "recorded (trainrun.compile backends, ExportedProgram.module()); a graph "
                                      "written by hand has no recorded program to run")
        object.__setattr__(self, "_graph", graph)
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_class_name", class_name)
        if isinstance(root, nn.Module):
            for name, child in root.named_children():
                self.add_module(name, child)

    def forward(self, *args, **kwargs):
        return self._run(*args, **kwargs)

    @property
    def graph(self):
        return self._graph

    @property
    def code(self):
        return self._graph.python_code_text()

    def print_readable(self, print_output=True, include_stride=False, include_device=False, colored=False):
        text = f"class {self._class_name}(torch.nn.Module):\n    " + \
            self._graph.python_code_text(annotate=True).replace("\n", "\n    ").rstrip() + "\n"
        if print_output:
            print(text)
        return text

    def __str__(self):  # (as torch's: the module, then its code)
        return "\n".join([super().__str__(), self.code,
                          "# To see more debug info, please use `graph_module.print_readable()`"])

    def recompile(self):
        """torch.fx regenerates forward from an edited graph; here forward is the recorded program, which an edit
        of the graph does not change, so an edited graph is refused rather than silently ignored."""
        raise NotImplementedError("GraphModule.recompile(): trainrun runs the program it recorded, not Python "
                                  "generated from the graph, so graph edits cannot take effect; change the model "
                                  "code instead")

    def _get_name(self):
        return self._class_name
