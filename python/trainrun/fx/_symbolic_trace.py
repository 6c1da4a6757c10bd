"""torch.fx.symbolic_trace: a module's forward run on Proxy objects, each operation on them recorded as a node.

The forward's arguments are placeholders; a call of a leaf module (trainrun.nn's own layers) is one call_module
node, other modules are traced through; trainrun's functions (trainrun.*, trainrun.nn.functional.*) called
with a proxy become call_function nodes, tensor methods call_method nodes, Python operators operator.* nodes;
the root's parameters and buffers used directly are get_attr nodes. While tracing, those functions and module
calls are redirected (and put back after). As with torch.fx, control flow that depends on a proxy's value
(`if x.sum() > 0:`) cannot be traced and raises TraceError."""
import builtins
import inspect
import operator

from trainrun import _C
from trainrun.fx.graph import Graph
from trainrun.fx.graph_module import GraphModule

__all__ = ["Proxy", "Tracer", "TraceError", "symbolic_trace", "wrap"]

# (the globals dict of the module that called wrap(), the name there) for every wrap(): while tracing, a call of
# that name from that module's code with a traced argument is one call_function node.
_WRAPPED = []


def wrap(fn_or_name):
    """PyTorch's torch.fx.wrap, called at module scope: the function (or a name such as "len") is a leaf of
    symbolic tracing: called with traced values it is recorded as one call_function node, not traced through.
    Returns its argument, so it also works as a decorator."""
    import sys
    caller = sys._getframe(1)
    if caller.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    name = fn_or_name if isinstance(fn_or_name, str) else getattr(fn_or_name, "__name__", None)
    if not name or name == "<lambda>":
        raise ValueError(f"wrap: {fn_or_name!r} has no name to look it up by when tracing")
    _WRAPPED.append((caller.f_globals, name))
    return fn_or_name


class TraceError(ValueError):
    pass


class Proxy:
    """A value of the program being traced: operations on it add nodes to its tracer's graph."""

    def __init__(self, node, tracer):
        self.node, self.tracer = node, tracer

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Attribute(self, name)

    def __call__(self, *args, **kwargs):
        raise TraceError(f"a traced value ({self.node.name}) is called as a function")

    def __bool__(self):
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def __iter__(self):
        raise TraceError("Proxy object cannot be iterated (its length is not known while tracing)")

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to be "
                           "recorded, please call torch.fx.wrap('len') at module scope")

    def size(self, dim=None):
        return self.tracer.create_proxy("call_method", "size", (self,) if dim is None else (self, dim), {})

    def dim(self):
        return self.tracer.create_proxy("call_method", "dim", (self,), {})


class _Attribute(Proxy):
    """proxy.name: a method call when called, else the attribute's value (getattr)."""

    def __init__(self, root, name):
        self.root, self.attr, self.tracer = root, name, root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", builtins.getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _binary(op, reflected=False):
    def method(self, other):
        args = (other, self) if reflected else (self, other)
        return self.tracer.create_proxy("call_function", op, args, {})
    return method


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
                   ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
                   ("matmul", operator.matmul), ("and", operator.and_), ("or", operator.or_),
                   ("xor", operator.xor), ("lshift", operator.lshift), ("rshift", operator.rshift)):
    setattr(Proxy, f"__{_name}__", _binary(_op))
    setattr(Proxy, f"__r{_name}__", _binary(_op, reflected=True))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne), ("getitem", operator.getitem)):
    setattr(Proxy, f"__{_name}__", _binary(_op))
for _name, _op in (("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs), ("invert", operator.invert)):
    setattr(Proxy, f"__{_name}__", (lambda op: lambda self: self.tracer.create_proxy("call_function", op, (self,),
                                                                                      {}))(_op))
Proxy.__hash__ = object.__hash__


def _has_proxy(value):
    found = []
    _walk(value, lambda p: found.append(p))
    return bool(found)


def _walk(value, fn):
    if isinstance(value, Proxy):
        fn(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _walk(v, fn)
    elif isinstance(value, dict):
        for v in value.values():
            _walk(v, fn)


class Tracer:
    """Records a module's forward as a Graph (trace(root)); is_leaf_module decides which modules stay one call."""

    def __init__(self, autowrap_modules=(), autowrap_functions=()):
        self.graph = None
        self.root = None

    def is_leaf_module(self, m, module_qualified_name):
        from trainrun.nn import ModuleDict, ModuleList, Sequential
        return type(m).__module__.startswith("trainrun.nn") and not isinstance(m, (Sequential, ModuleList,
                                                                                        ModuleDict))

    def path_of_module(self, mod):
        for name, m in self.root.named_modules():
            if m is mod:
                return name
        raise NameError("module is not installed as a submodule")

    def create_arg(self, a):
        """What a node's argument is: proxies as their nodes, the root's tensors as get_attr nodes, other tensors
        as constants the GraphModule keeps."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, (list, tuple)):
            made = [self.create_arg(x) for x in a]
            return type(a)(made) if not hasattr(a, "_fields") else type(a)(*made)
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if _C._is_cpp_tensor(a) or hasattr(a, "to_local"):
            for name, t in list(self.root.named_parameters()) + list(self.root.named_buffers()):
                if t is a or (_C._is_cpp_tensor(a) and _C._is_cpp_tensor(t) and t._cdata == a._cdata):
                    return self.graph.get_attr(name)
            name = f"_tensor_constant{len(self._constants)}"
            self._constants[name] = a
            return self.graph.get_attr(name)
        return a

    def create_proxy(self, kind, target, args, kwargs, name=None):
        node = self.graph.create_node(kind, target, self.create_arg(tuple(args)), self.create_arg(dict(kwargs)),
                                      name=name)
        return Proxy(node, self)

    def call_module(self, m, forward, args, kwargs):
        path = self.path_of_module(m)
        if self.is_leaf_module(m, path):
            return self.create_proxy("call_module", path, args, kwargs)
        return forward(*args, **kwargs)

    def trace(self, root, concrete_args=None):
        import trainrun
        from trainrun.nn import functional as F
        self.root = root if hasattr(root, "named_modules") else None
        fn = root.forward if self.root is not None else root
        if self.root is None:
            from trainrun import nn
            self.root = nn.Module()
        self.graph = Graph()
        self._constants = {}
        concrete_args = dict(concrete_args or {})
        args = []
        for p in inspect.signature(fn).parameters.values():
            if p.name in concrete_args:
                args.append(concrete_args[p.name])
            elif p.kind == p.VAR_POSITIONAL:
                raise TraceError(f"symbolic_trace: {p.name} (*args) cannot be traced; give concrete_args")
            elif p.kind == p.VAR_KEYWORD:
                continue
            else:
                args.append(Proxy(self.graph.placeholder(p.name), self))
        patched = []
        tracer = self

        def wrap(namespace, name, original):
            def call(*a, **k):
                if _has_proxy(a) or _has_proxy(k):
                    return tracer.create_proxy("call_function", original, a, k)
                return original(*a, **k)
            call.__name__ = getattr(original, "__name__", name)
            setattr(namespace, name, call)
            patched.append((namespace, name, original))

        for namespace in (trainrun, F, trainrun.linalg, trainrun.special):
            for name, value in list(vars(namespace).items()):
                if callable(value) and not isinstance(value, type) and not name.startswith("_") and \
                        not inspect.ismodule(value):
                    wrap(namespace, name, value)
        for module_globals, name in _WRAPPED:  # fx.wrap()'s: in the globals of the module that wrapped them
            original = module_globals.get(name, getattr(builtins, name, None))
            if callable(original):
                wrap(_GlobalsNamespace(module_globals), name, original)
        module_call = _C.nn.Module.__call__

        def traced_call(m, *a, **k):
            return tracer.call_module(m, lambda *aa, **kk: m.forward(*aa, **kk), a, k)

        _C.nn.Module.__call__ = traced_call
        try:
            result = fn(*args)
        finally:
            _C.nn.Module.__call__ = module_call
            for namespace, name, original in reversed(patched):
                setattr(namespace, name, original)
        self.graph.output(self.create_arg(result))
        return self.graph


class _GlobalsNamespace:
    """A module's globals dict as setattr/delattr targets (what tracing patches and restores); a name that was
    a builtin (len) is removed again rather than left as a global."""

    def __init__(self, globals_dict):
        object.__setattr__(self, "_globals", globals_dict)
        object.__setattr__(self, "_had", set(globals_dict))

    def __setattr__(self, name, value):
        if name not in self._had and getattr(builtins, name, None) is value:
            self._globals.pop(name, None)  # (restoring a builtin: it was never a global)
        else:
            self._globals[name] = value


def symbolic_trace(root, concrete_args=None):
    """The GraphModule of root's forward (or of a function) as traced by Tracer."""
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    owner = tracer.root
    for name, value in tracer._constants.items():
        object.__setattr__(owner, name, value)
    name = type(root).__name__ if hasattr(root, "named_modules") else getattr(root, "__name__", "GraphModule")
    return GraphModule(owner, graph, class_name=name)

