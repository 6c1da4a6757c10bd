"""A node of a trainrun.fx Graph, as torch.fx.Node: op ('placeholder', 'call_function', 'output'), name, target,
args and kwargs (other nodes where values flow), users, and meta ('val': a meta-device tensor of the value's
shape and dtype; 'device': where the value lives)."""
import typing

# PyTorch's annotations of a node's target (a callable or a name) and of its arguments.
Target = typing.Union[typing.Callable[..., typing.Any], str]
Argument = typing.Optional[typing.Union[tuple, list, dict, slice, range, "Node", str, int, float, bool, complex,
                                        "typing.Any"]]


class Node:
    def __init__(self, graph, name, op, target, args=(), kwargs=None):
        self.graph, self.name, self.op, self.target = graph, name, op, target
        self.meta = {}
        self.users = {}  # {node reading this one: None}, in order, as torch.fx keeps it
        self.prev = self.next = None
        self._args, self._kwargs = (), {}
        self._update_args(tuple(args), dict(kwargs or {}))

    # ---- what the node reads: setting args/kwargs keeps every node's users right ---------------------------
    def _update_args(self, args, kwargs):
        for n in self.all_input_nodes:
            n.users.pop(self, None)
        self._args, self._kwargs = tuple(args), dict(kwargs)
        for n in self.all_input_nodes:
            n.users.setdefault(self, None)

    @property
    def args(self):
        return self._args

    @args.setter
    def args(self, value):
        self._update_args(value, self._kwargs)

    @property
    def kwargs(self):
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value):
        self._update_args(self._args, value)

    def update_arg(self, index, value):
        args = list(self._args)
        args[index] = value
        self.args = tuple(args)

    def update_kwarg(self, key, value):
        self.kwargs = {**self._kwargs, key: value}

    def replace_input_with(self, old, new):
        """Every read of node `old` in this node's arguments reads `new` instead."""
        self._update_args(_map_nodes(self._args, lambda n: new if n is old else n),
                          _map_nodes(self._kwargs, lambda n: new if n is old else n))

    def replace_all_uses_with(self, replace_with, delete_user_cb=lambda user: True, *, propagate_meta=False):
        """Every node reading this one reads replace_with instead; returns those nodes."""
        if propagate_meta:
            for k, v in self.meta.items():
                replace_with.meta.setdefault(k, v)
        changed = [u for u in list(self.users) if delete_user_cb(u)]
        for user in changed:
            user.replace_input_with(self, replace_with)
        return changed

    # ---- where the node sits -------------------------------------------------------------------------------
    def prepend(self, x):
        """Moves node x to just before this one."""
        self.graph._move(x, self, before=True)

    def append(self, x):
        """Moves node x to just after this one."""
        self.graph._move(x, self, before=False)

    @property
    def all_input_nodes(self):
        """The nodes this one reads, in order of first appearance in args then kwargs."""
        found = []

        def walk(a):
            if isinstance(a, Node):
                if a not in found:
                    found.append(a)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    walk(x)
            elif isinstance(a, dict):
                for x in a.values():
                    walk(x)

        walk(self.args)
        walk(self.kwargs)
        return found

    @property
    def type(self):
        return None

    def format_node(self):
        """The node as torch.fx prints it in a graph ('%name : [num_users=N] = op[target=...](args = ..., ...)')."""
        if self.op == "output":
            return f"return {_format_arg(self.args[0])}"
        head = f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target={_target_name(self.target)}]"
        if self.op == "placeholder":
            return head
        kwargs = "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in self.kwargs.items()) + "}"
        return f"{head}(args = {_format_arg(self.args)}, kwargs = {kwargs})"

    def __repr__(self):
        return self.name


def _map_nodes(a, fn):
    """a (an argument: a node, or nested tuples/lists/dicts of them) with fn applied to every node in it."""
    if isinstance(a, Node):
        return fn(a)
    if isinstance(a, tuple):
        return tuple(_map_nodes(x, fn) for x in a)
    if isinstance(a, list):
        return [_map_nodes(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: _map_nodes(v, fn) for k, v in a.items()}
    return a


def map_arg(a, fn):
    """torch.fx.node.map_arg: fn applied to every node inside the argument a."""
    return _map_nodes(a, fn)


def _target_name(target):
    """As torch.fx names targets: 'torch.ops.aten.addmm.default', 'operator.getitem', a string as it is."""
    if isinstance(target, str):
        return target
    if hasattr(target, "_packet"):  # an OpOverload
        return f"torch.ops.{target!r}"
    public = _public_name(target)
    if public is not None:
        return public
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if module == "_operator":
        module = "operator"
    return f"{module}.{name}" if module and name else repr(target)


def _public_name(target):
    """'torch.cat', 'torch.nn.functional.gelu': a trainrun function by the name PyTorch's code spells it, when it
    is one of the package's public functions."""
    import trainrun
    name = getattr(target, "__name__", None)
    if name is None or not callable(target):
        return None
    for prefix, namespace in (("torch", trainrun), ("torch.nn.functional", trainrun.nn.functional),
                              ("torch.linalg", trainrun.linalg), ("torch.special", trainrun.special)):
        if getattr(namespace, name, None) is target:
            return f"{prefix}.{name}"
    return None


def _format_arg(a, node_prefix="%"):
    """An argument as torch.fx prints it: nodes as %name (in a graph's text) or name (in code)."""
    if isinstance(a, Node):
        return f"{node_prefix}{a.name}"
    if isinstance(a, tuple):
        inner = ", ".join(_format_arg(x, node_prefix) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(_format_arg(x, node_prefix) for x in a) + "]"
    return repr(a)
