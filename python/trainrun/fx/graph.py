"""trainrun.fx's Graph: a program's nodes in order, as torch.fx.Graph presents them (iterate nodes, find_nodes,
print, print_tabular). trainrun records programs at the dispatcher rather than by symbolic tracing, so a Graph is
read from a recorded program (ExportedProgram.graph) and is not edited back into one."""
from trainrun.fx.node import Node, _format_arg, _target_name


class _NodeList:
    """graph.nodes: iterable (also reversed), with len; in program order."""

    def __init__(self, nodes):
        self._nodes = nodes

    def __iter__(self):
        return iter(list(self._nodes))

    def __reversed__(self):
        return reversed(list(self._nodes))

    def __len__(self):
        return len(self._nodes)

    def __repr__(self):
        return f"[{', '.join(n.name for n in self._nodes)}]"


class Graph:
    def __init__(self, owning_module=None):
        self._nodes = []
        self._names = {}
        self.owning_module = owning_module

    @property
    def nodes(self):
        return _NodeList(self._nodes)

    def _unique_name(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "node"
        if base[0].isdigit():
            base = "_" + base
        count = self._names.get(base, 0)
        self._names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def create_node(self, op, target, args=(), kwargs=None, name=None):
        """Appends a node (name: unique, from `name` or the target's name) and returns it."""
        if op not in ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output"):
            raise ValueError(f"Graph.create_node: unknown op '{op}'")
        if name is None:  # (an op overload by its op's name, "addmm", as torch.fx names it)
            name = target if isinstance(target, str) else getattr(target, "_opname", None) or target.__name__
        node = Node(self, self._unique_name(name), op, target, args, kwargs)
        if self._nodes:
            node.prev, self._nodes[-1].next = self._nodes[-1], node
        self._nodes.append(node)
        return node

    def placeholder(self, name):
        return self.create_node("placeholder", name, name=name)

    def call_function(self, the_function, args=(), kwargs=None):
        return self.create_node("call_function", the_function, args, kwargs)

    def output(self, result):
        return self.create_node("output", "output", (result,), name="output")

    def find_nodes(self, *, op, target=None, sort=True):
        """The nodes of kind `op` (and `target`, when given), in program order."""
        return [n for n in self._nodes if n.op == op and (target is None or n.target == target)]

    def output_node(self):
        for n in reversed(self._nodes):
            if n.op == "output":
                return n
        raise ValueError("Graph.output_node: the graph has no output node")

    def lint(self):
        """Checks what torch.fx's lint does: unique names, and every node read is defined earlier in this graph."""
        seen, names = set(), set()
        for n in self._nodes:
            if n.name in names:
                raise RuntimeError(f"Graph.lint: node name '{n.name}' is used twice")
            names.add(n.name)
            for a in n.all_input_nodes:
                if a not in seen:
                    raise RuntimeError(f"Graph.lint: node '{n.name}' reads '{a.name}' before it is defined")
            seen.add(n)

    def print_tabular(self):
        """Prints opcode, name, target, args and kwargs per node, one line each."""
        rows = [("opcode", "name", "target", "args", "kwargs")]
        for n in self._nodes:
            rows.append((n.op, n.name, _target_name(n.target), str(n.args), str(n.kwargs)))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        print("\n".join(lines))

    def python_code_text(self, annotate=False):
        """The graph as the Python torch.fx generates for it: def forward(self, <placeholders>) with one line per
        call and a return. annotate: each value's dtype and shape as torch prints them ("f32[2, 4]")."""
        def name(n):
            return f'{n.name}: "{_annotation(n)}"' if annotate and "val" in n.meta else n.name

        params = ", ".join(["self"] + [name(n) for n in self._nodes if n.op == "placeholder"])
        lines = [f"def forward({params}):"]
        for n in self._nodes:
            if n.op == "call_function":
                args = [_format_arg(a, "") for a in n.args]
                args += [f"{k} = {_format_arg(v, '')}" for k, v in n.kwargs.items()]
                lines.append(f"    {name(n)} = {_target_name(n.target)}({', '.join(args)})")
            elif n.op == "output":
                lines.append(f"    return {_format_arg(n.args[0], '')}")
        return "\n".join(lines) + "\n"

    def __str__(self):
        return "graph():\n" + "\n".join("    " + n.format_node() for n in self._nodes)

    __repr__ = __str__


_SHORT_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
                 "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8"}


def _annotation(node):
    val = node.meta["val"]
    dtype = str(val.dtype).rsplit(".", 1)[-1]
    return f"{_SHORT_DTYPES.get(dtype, dtype)}{list(val.shape)}"
