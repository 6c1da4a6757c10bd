"""torch.fx.Interpreter: runs a Graph node by node on a module (its attributes for get_attr, its submodules for
call_module). Override run_node or the per-op methods (call_function, ...) to watch or change each step;
Transformer builds a new graph from an old one the same way."""
from trainrun.fx.node import Node, _map_nodes

__all__ = ["Interpreter", "Transformer"]


def _attr(root, qualified_name):
    obj = root
    for part in qualified_name.split("."):
        obj = getattr(obj, part)
    return obj


class Interpreter:
    def __init__(self, module, garbage_collect_values=True, graph=None):
        self.module = module
        self.graph = graph if graph is not None else module.graph
        self.garbage_collect_values = garbage_collect_values
        self.env = {}

    def run(self, *args, initial_env=None, enable_io_processing=True):
        """The graph's result on these inputs (one per placeholder, in order)."""
        self.env = dict(initial_env or {})
        self.args_iter = iter(args)
        last_use = {}
        if self.garbage_collect_values:
            for node in self.graph.nodes:
                for used in node.all_input_nodes:
                    last_use[used] = node
        for node in self.graph.nodes:
            if node in self.env:
                continue
            self.env[node] = self.run_node(node)
            if self.garbage_collect_values:
                for used in node.all_input_nodes:
                    if last_use.get(used) is node and used.op != "placeholder":
                        self.env.pop(used, None)
            if node.op == "output":
                return self.env[node]
        return None

    def run_node(self, n):
        args = _map_nodes(n.args, self.env.__getitem__)
        kwargs = _map_nodes(n.kwargs, self.env.__getitem__)
        return getattr(self, n.op)(n.target, args, kwargs)

    def placeholder(self, target, args, kwargs):
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:  # (a default value)
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one was not passed "
                               "in!") from None

    def get_attr(self, target, args, kwargs):
        return _attr(self.module, target)

    def call_function(self, target, args, kwargs):
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        return _attr(self.module, target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]

    def fetch_attr(self, target):
        return _attr(self.module, target)


class Transformer(Interpreter):
    """Copies the graph node by node into a new one: each call_function/call_method/call_module/get_attr
    (override them to change what a node becomes) returns the new node; transform() returns a GraphModule over
    the new graph."""

    def __init__(self, module):
        super().__init__(module)
        from trainrun.fx.graph import Graph
        self.new_graph = Graph()

    def run_node(self, n):
        args = _map_nodes(n.args, self.env.__getitem__)
        kwargs = _map_nodes(n.kwargs, self.env.__getitem__)
        if n.op == "placeholder":
            return self.new_graph.placeholder(n.target)
        if n.op == "output":
            return self.new_graph.output(args[0])
        new = getattr(self, n.op)(n.target, args, kwargs)
        if isinstance(new, Node):
            new.meta.update(n.meta)
        return new

    def get_attr(self, target, args, kwargs):
        return self.new_graph.get_attr(target)

    def call_function(self, target, args, kwargs):
        return self.new_graph.call_function(target, args, kwargs)

    def call_method(self, target, args, kwargs):
        return self.new_graph.call_method(target, args, kwargs)

    def call_module(self, target, args, kwargs):
        return self.new_graph.call_module(target, args, kwargs)

    def transform(self):
        self.env = {}
        for node in self.graph.nodes:
            self.env[node] = self.run_node(node)
        from trainrun.fx.graph_module import GraphModule
        return GraphModule(self.module, self.new_graph)
