"""trainrun.fx's Graph: a program's nodes in order, as torch.fx.Graph presents them (iterate nodes, find_nodes,
print, print_tabular) and edits them: create_node at an insertion point (inserting_before/after), erase_node,
node.replace_all_uses_with, eliminate_dead_code. A GraphModule runs an edited graph after recompile()."""
import contextlib

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
        self._insert_at = None  # (node, before): where create_node puts a node; None: at the end

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
        if self._insert_at is None:
            self._nodes.append(node)
        else:
            anchor, before = self._insert_at
            self._nodes.insert(self._nodes.index(anchor) + (0 if before else 1), node)
            if not before:
                self._insert_at = (node, False)  # (the next one goes after this one)
        self._relink()
        return node

    def _relink(self):
        for i, n in enumerate(self._nodes):
            n.prev = self._nodes[i - 1] if i else None
            n.next = self._nodes[i + 1] if i + 1 < len(self._nodes) else None

    def _move(self, x, anchor, before):
        self._nodes.remove(x)
        self._nodes.insert(self._nodes.index(anchor) + (0 if before else 1), x)
        self._relink()

    @contextlib.contextmanager
    def inserting_before(self, n=None):
        """Nodes created inside go just before n (None: before the first node)."""
        saved = self._insert_at
        self._insert_at = (n if n is not None else self._nodes[0], True) if self._nodes else None
        try:
            yield
        finally:
            self._insert_at = saved

    @contextlib.contextmanager
    def inserting_after(self, n=None):
        """Nodes created inside go just after n (in creation order)."""
        saved = self._insert_at
        self._insert_at = (n, False) if n is not None else None
        try:
            yield
        finally:
            self._insert_at = saved

    def erase_node(self, to_erase):
        """Removes a node no other node reads."""
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} users in "
                               f"the graph: {to_erase.users}!")
        to_erase.args, to_erase.kwargs = (), {}  # (it no longer reads its inputs)
        self._nodes.remove(to_erase)
        self._relink()

    def eliminate_dead_code(self):
        """Erases the call nodes nothing reads (those that write in place, and outputs, stay); returns whether
        any went."""
        changed = False
        for n in reversed(list(self._nodes)):
            if n.op in ("call_function", "call_method", "call_module", "get_attr") and not n.users and \
                    not _writes_in_place(n):
                self.erase_node(n)
                changed = True
        return changed

    def placeholder(self, name, type_expr=None, default_value=None):
        return self.create_node("placeholder", name, name=name)

    def get_attr(self, qualified_name, type_expr=None):
        return self.create_node("get_attr", qualified_name, name=qualified_name.replace(".", "_"))

    def call_function(self, the_function, args=(), kwargs=None, type_expr=None):
        return self.create_node("call_function", the_function, args, kwargs)

    def call_method(self, method_name, args=(), kwargs=None, type_expr=None):
        return self.create_node("call_method", method_name, args, kwargs)

    def call_module(self, module_name, args=(), kwargs=None, type_expr=None):
        return self.create_node("call_module", module_name, args, kwargs, name=module_name.replace(".", "_"))

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
            args = [_format_arg(a, "") for a in n.args]
            args += [f"{k} = {_format_arg(v, '')}" for k, v in n.kwargs.items()]
            if n.op == "call_function":
                lines.append(f"    {name(n)} = {_target_name(n.target)}({', '.join(args)})")
            elif n.op == "call_method":
                lines.append(f"    {name(n)} = {args[0]}.{n.target}({', '.join(args[1:])})")
            elif n.op == "call_module":
                lines.append(f"    {name(n)} = self.{n.target}({', '.join(args)})")
            elif n.op == "get_attr":
                lines.append(f"    {name(n)} = self.{n.target}")
            elif n.op == "output":
                lines.append(f"    return {_format_arg(n.args[0], '')}")
        return "\n".join(lines) + "\n"

    def __str__(self):
        return "graph():\n" + "\n".join("    " + n.format_node() for n in self._nodes)

    __repr__ = __str__


def _writes_in_place(n):
    """Whether the node's call may write its arguments (an aten op ending in '_', copy_, a method ending in '_')."""
    name = n.target if isinstance(n.target, str) else getattr(n.target, "_opname", getattr(n.target, "__name__", ""))
    return str(name).endswith("_") or n.op == "call_module"


_SHORT_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
                 "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8"}


def _annotation(node):
    val = node.meta["val"]
    dtype = str(val.dtype).rsplit(".", 1)[-1]
    return f"{_SHORT_DTYPES.get(dtype, dtype)}{list(val.shape)}"
