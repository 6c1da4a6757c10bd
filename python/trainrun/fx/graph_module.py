"""torch.fx.GraphModule: an nn.Module whose forward is a Graph: `graph`, `code` (the Python torch.fx would
write for it), print_readable(), and recompile() after the graph is edited. A graph module made from a program
trainrun recorded (a trainrun.compile backend's, ExportedProgram.module()) runs that program (fused loops and
all) until recompile(); from then on, and for a graph module built from any other graph, forward runs the
graph node by node (trainrun.fx.Interpreter), so graph edits take effect."""
from trainrun import nn
from trainrun.fx.interpreter import Interpreter, _attr


class GraphModule(nn.Module):
    """GraphModule(root, graph): root (a module, or a dict of the attributes and submodules the graph's get_attr
    and call_module nodes name) gives what the graph reads; `run` (internal) is a recorded program to run instead
    of the graph until recompile()."""

    def __init__(self, root, graph, class_name="GraphModule", run=None):
        super().__init__()
        object.__setattr__(self, "_graph", graph)
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_class_name", class_name)
        object.__setattr__(self, "_outputs", None)  # (an exported program's: its output structure from a tuple)
        if isinstance(root, nn.Module) or hasattr(root, "named_children"):
            for name, child in root.named_children():
                self.add_module(name, child)
            if run is None:
                self._copy_reads(lambda target: _attr(root, target))
        elif isinstance(root, dict):
            self._copy_reads(lambda target: root[target])
        elif root is not None:
            raise RuntimeError(f"Unsupported type {root} passed for root!")

    def _copy_reads(self, lookup):
        """The values the graph's get_attr and call_module nodes read, at the same paths on this module."""
        for n in self._graph.nodes:
            if n.op not in ("get_attr", "call_module"):
                continue
            try:
                _attr(self, n.target)
                continue
            except AttributeError:
                pass
            value = lookup(n.target)
            *path, leaf = n.target.split(".")
            owner = self
            for part in path:
                if not hasattr(owner, part):
                    owner.add_module(part, nn.Module())
                owner = getattr(owner, part)
            if isinstance(value, nn.Module) or hasattr(value, "named_children"):
                owner.add_module(leaf, value)
            elif isinstance(value, nn.Parameter):
                owner.register_parameter(leaf, value)
            elif hasattr(value, "shape"):
                owner.register_buffer(leaf, value)
            else:
                object.__setattr__(owner, leaf, value)

    def forward(self, *args, **kwargs):
        if self._run is not None:
            return self._run(*args, **kwargs)
        if kwargs:
            names = [n.target for n in self._graph.nodes if n.op == "placeholder"]
            args = list(args) + [kwargs[name] for name in names[len(args):] if name in kwargs]
        lifted = [_attr(self, n.meta["state_key"]) for n in self._graph.nodes
                  if n.op == "placeholder" and "state_key" in n.meta]  # (an exported program's weights)
        result = Interpreter(self, graph=self._graph).run(*lifted, *args)
        return self._outputs(result) if self._outputs is not None else result

    @property
    def graph(self):
        return self._graph

    @graph.setter
    def graph(self, g):
        object.__setattr__(self, "_graph", g)
        object.__setattr__(self, "_run", None)

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
        """From now on forward runs the graph as it is (edited), node by node, instead of the program trainrun
        recorded; returns the graph's Python code."""
        self._graph.lint()
        object.__setattr__(self, "_run", None)
        return self.code

    def _get_name(self):
        return self._class_name
