"""Pytrees, as torch.utils._pytree: nested containers (tuples, lists, dicts, named tuples, OrderedDict,
defaultdict, deque and registered classes) flattened to a list of leaves and a TreeSpec that rebuilds them.

    leaves, spec = tree_flatten({"a": (x, y), "b": [z]})   # [x, y, z]
    tree_unflatten([x + 1 for x in leaves], spec)          # {"a": (x+1, y+1), "b": [z+1]}
    tree_map_only(Tensor, lambda t: t.detach(), batch)

The flattening order and the TreeSpec (type, context, children) are PyTorch's, so specs dumped with
treespec_dumps read back in either."""
import collections
import dataclasses
import json
import threading
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import Any, Callable, List, NamedTuple, Optional

PyTree = Any
Context = Any
DumpableContext = Any
KeyPath = tuple
DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


class NodeDef(NamedTuple):
    type: type
    flatten_fn: Callable
    unflatten_fn: Callable
    flatten_with_keys_fn: Optional[Callable]


class _SerializeNodeDef(NamedTuple):
    typ: type
    serialized_type_name: str
    to_dumpable_context: Optional[Callable]
    from_dumpable_context: Optional[Callable]


SUPPORTED_NODES = {}
SUPPORTED_SERIALIZED_TYPES = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE = {}
_REGISTRY_LOCK = threading.Lock()


def _register(cls, flatten_fn, unflatten_fn, serialized_type_name=None, to_dumpable_context=None,
              from_dumpable_context=None, flatten_with_keys_fn=None):
    if (to_dumpable_context is None) != (from_dumpable_context is None):
        raise ValueError(f"register_pytree_node({cls}): to_dumpable_context and from_dumpable_context go together")
    name = serialized_type_name or NO_SERIALIZED_TYPE_NAME_FOUND
    with _REGISTRY_LOCK:
        SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
        SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, name, to_dumpable_context, from_dumpable_context)
        if serialized_type_name is not None:
            SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """Makes `cls` a node: flatten_fn(obj) -> (children, context), unflatten_fn(children, context) -> obj."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    _register(cls, flatten_fn, unflatten_fn, serialized_type_name, to_dumpable_context, from_dumpable_context,
              flatten_with_keys_fn)


def _register_pytree_node(cls, flatten_fn, unflatten_fn, to_str_fn=None, maybe_from_str_fn=None, *,
                          serialized_type_name=None, to_dumpable_context=None, from_dumpable_context=None,
                          flatten_with_keys_fn=None):
    """The older name: re-registering replaces (PyTorch warns that it is deprecated)."""
    import warnings
    warnings.warn("`torch.utils._pytree._register_pytree_node` is deprecated. Please use "
                  "`torch.utils._pytree.register_pytree_node` instead.", FutureWarning, stacklevel=2)
    _register(cls, flatten_fn, unflatten_fn, serialized_type_name, to_dumpable_context, from_dumpable_context,
              flatten_with_keys_fn)


def _register_namedtuple(cls, *, serialized_type_name):
    """Registers a named tuple class under a name, so specs holding it can be dumped and loaded."""
    _register(cls, _namedtuple_flatten, _namedtuple_unflatten, serialized_type_name,
              lambda context: serialized_type_name, lambda dumped: SERIALIZED_TYPE_TO_PYTHON_TYPE[dumped],
              _namedtuple_flatten_with_keys)


# Key paths: how a leaf is reached from the root (keystr(path) == "['a'][0].x").
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


KeyEntry = Any


def _sequence_with_keys(children):
    return [(SequenceKey(i), v) for i, v in enumerate(children)]


def _tuple_flatten(d):
    return list(d), None


def _list_flatten(d):
    return list(d), None


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_with_keys(d):
    values, keys = _dict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(keys, values)], keys


def _namedtuple_flatten(d):
    return list(d), type(d)


def _namedtuple_flatten_with_keys(d):
    return [(GetAttrKey(f), v) for f, v in zip(d._fields, d)], type(d)


def _namedtuple_unflatten(values, context):
    return context(*values)


def _namedtuple_serialize(context):
    entry = SUPPORTED_SERIALIZED_TYPES.get(context)
    if entry is None or entry.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(f"Can't serialize TreeSpec of namedtuple class {context} because we couldn't "
                                  "find a serialized_type_name for it. Please register it with "
                                  "_register_namedtuple(cls, serialized_type_name=...).")
    return entry.serialized_type_name


def _namedtuple_deserialize(dumped):
    if dumped not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Can't deserialize namedtuple {dumped!r}: it is not registered")
    return SERIALIZED_TYPE_TO_PYTHON_TYPE[dumped]


def _defaultdict_flatten(d):
    values, keys = _dict_flatten(d)
    return values, [d.default_factory, keys]


def _defaultdict_serialize(context):
    factory, keys = context
    return {"default_factory_module": factory.__module__, "default_factory_name": factory.__qualname__,
            "dict_context": keys}


def _defaultdict_deserialize(dumped):
    import importlib
    module = importlib.import_module(dumped["default_factory_module"])
    return [getattr(module, dumped["default_factory_name"]), dumped["dict_context"]]


_register(tuple, _tuple_flatten, lambda values, context: tuple(values), "builtins.tuple",
          flatten_with_keys_fn=lambda d: (_sequence_with_keys(d), None))
_register(list, _list_flatten, lambda values, context: list(values), "builtins.list",
          flatten_with_keys_fn=lambda d: (_sequence_with_keys(d), None))
_register(dict, _dict_flatten, lambda values, keys: dict(zip(keys, values)), "builtins.dict",
          flatten_with_keys_fn=_dict_with_keys)
_register(namedtuple, _namedtuple_flatten, _namedtuple_unflatten, "collections.namedtuple",
          _namedtuple_serialize, _namedtuple_deserialize, _namedtuple_flatten_with_keys)
_register(OrderedDict, _dict_flatten, lambda values, keys: OrderedDict(zip(keys, values)),
          "collections.OrderedDict", flatten_with_keys_fn=_dict_with_keys)
_register(defaultdict, _defaultdict_flatten,
          lambda values, context: defaultdict(context[0], dict(zip(context[1], values))),
          "collections.defaultdict", _defaultdict_serialize, _defaultdict_deserialize,
          lambda d: (_dict_with_keys(d)[0], [d.default_factory, list(d.keys())]))
_register(deque, lambda d: (list(d), d.maxlen), lambda values, maxlen: deque(values, maxlen=maxlen),
          "collections.deque", flatten_with_keys_fn=lambda d: (_sequence_with_keys(d), d.maxlen))

STANDARD_DICT_TYPES = frozenset({dict, OrderedDict, defaultdict})
BUILTIN_TYPES = frozenset({tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque})


def is_namedtuple(obj):
    """True for a named tuple class or instance (a direct tuple subclass with string `_fields`)."""
    cls = obj if isinstance(obj, type) else type(obj)
    fields = getattr(cls, "_fields", None)
    return cls.__bases__ == (tuple,) and isinstance(fields, tuple) and all(type(f) is str for f in fields)


def is_namedtuple_class(cls):
    return isinstance(cls, type) and is_namedtuple(cls)


def is_namedtuple_instance(obj):
    return not isinstance(obj, type) and is_namedtuple(obj)


def _get_node_type(tree):
    if type(tree) not in SUPPORTED_NODES and is_namedtuple_instance(tree):
        return namedtuple
    return type(tree)


def _is_leaf(tree, is_leaf=None):
    return (is_leaf is not None and is_leaf(tree)) or _get_node_type(tree) not in SUPPORTED_NODES


class TreeSpec:
    """The structure of a pytree: the root's type, the context its flatten function returned (dict keys, a named
    tuple's class) and one TreeSpec per child. Equal specs describe trees that unflatten alike."""

    def __init__(self, type, context, children_specs):  # noqa: A002  (PyTorch's field name)
        self.type = type
        self.context = context
        self.children_specs = list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type, self.context, self.children_specs) == (other.type, other.context, other.children_specs)

    def __hash__(self):
        return hash((self.type, self.num_nodes, self.num_leaves))

    def __repr__(self, indent=0):
        head = f"TreeSpec({self.type.__name__}, {self.context}, ["
        if not self.children_specs:
            return head + "])"
        indent += 2
        rest = ",".join("\n" + " " * indent + c.__repr__(indent) for c in self.children_specs[1:])
        return head + self.children_specs[0].__repr__(indent) + ("," if rest else "") + rest + "])"

    def is_leaf(self):
        return self.num_nodes == 1 and self.num_leaves == 1

    def _children_of(self, tree):
        """The children of `tree` in this spec's order; raises ValueError naming the mismatch."""
        node_type = _get_node_type(tree)
        both_dicts = self.type in STANDARD_DICT_TYPES and node_type in STANDARD_DICT_TYPES
        if node_type != self.type and not both_dicts:
            raise ValueError(f"Node type mismatch; expected {self.type!r}, but got {node_type!r}.")
        if both_dicts:
            keys = self.context[1] if self.type is defaultdict else self.context
            if set(tree) != set(keys):
                missing, extra = set(keys) - set(tree), set(tree) - set(keys)
                raise ValueError("Node keys mismatch" + (f"; missing key(s): {missing}" if missing else "")
                                 + (f"; extra key(s): {extra}" if extra else "") + ".")
            return [tree[k] for k in keys]
        children, context = SUPPORTED_NODES[node_type].flatten_fn(tree)
        if len(children) != self.num_children:
            raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(children)}.")
        if context != self.context and self.type is not deque:
            raise ValueError(f"Node context mismatch for node type {self.type!r}; expected {self.context!r}, "
                             f"but got {context!r}.")
        return children

    def flatten_up_to(self, tree):
        """The subtrees of `tree` at this spec's leaves (`tree` must have this spec as a prefix)."""
        out = []

        def walk(spec, subtree):
            if spec.is_leaf():
                out.append(subtree)
                return
            for child_spec, child in zip(spec.children_specs, spec._children_of(subtree)):
                walk(child_spec, child)
        walk(self, tree)
        return out

    def unflatten(self, leaves):
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
                             f"to a pytree that holds {self.num_leaves} items ({self}).")
        if self.is_leaf():
            return leaves[0]
        children, start = [], 0
        for spec in self.children_specs:
            children.append(spec.unflatten(leaves[start:start + spec.num_leaves]))
            start += spec.num_leaves
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self.context)


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])
        self.num_nodes, self.num_leaves = 1, 1

    def __repr__(self, indent=0):
        return "*"


_LEAF_SPEC = LeafSpec()


def tree_flatten(tree, is_leaf=None):
    """(leaves, spec): the leaves left to right (dicts in key insertion order) and the structure."""
    leaves = []

    def walk(node):
        if _is_leaf(node, is_leaf):
            leaves.append(node)
            return _LEAF_SPEC
        node_type = _get_node_type(node)
        children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
        return TreeSpec(node_type, context, [walk(c) for c in children])
    return leaves, walk(tree)


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of TreeSpec but got "
                        f"item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf=None):
    if _is_leaf(tree, is_leaf):
        yield tree
        return
    for child in SUPPORTED_NODES[_get_node_type(tree)].flatten_fn(tree)[0]:
        yield from tree_iter(child, is_leaf)


def tree_leaves(tree, is_leaf=None):
    return list(tree_iter(tree, is_leaf))


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def arg_tree_leaves(*args, **kwargs):
    """tree_leaves((args, kwargs))."""
    return [leaf for a in (*args, *kwargs.values()) for leaf in tree_iter(a)]


def tree_map(func, tree, *rests, is_leaf=None):
    """A tree shaped like `tree` with func(leaf, *the matching subtrees of rests) at each leaf."""
    leaves, spec = tree_flatten(tree, is_leaf)
    return spec.unflatten(map(func, leaves, *[spec.flatten_up_to(r) for r in rests]))


def tree_map_(func, tree, *rests, is_leaf=None):
    """Calls func on each leaf for its effect and returns `tree` itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    collections.deque(map(func, leaves, *[spec.flatten_up_to(r) for r in rests]), maxlen=0)
    return tree


def map_only(type_or_types_or_pred):
    """Decorator: the function applies to leaves of the given type(s) (or passing the predicate); other leaves
    pass through unchanged."""
    import types
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        def pred(x):
            return isinstance(x, type_or_types_or_pred)
    elif callable(type_or_types_or_pred):
        pred = type_or_types_or_pred
    else:
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")

    def wrapper(func):
        import functools

        @functools.wraps(func)
        def wrapped(x):
            return func(x) if pred(x) else x
        return wrapped
    return wrapper


def tree_map_only(type_or_types_or_pred, func, tree, is_leaf=None):
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types_or_pred, func, tree, is_leaf=None):
    return tree_map_(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def _key_paths(path, tree, is_leaf):
    if is_leaf is not None and is_leaf(tree):
        yield path, tree
        return
    node = SUPPORTED_NODES.get(_get_node_type(tree))
    if node is None:
        yield path, tree
        return
    if node.flatten_with_keys_fn is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {node.type}. Please pass a "
                         "flatten_with_keys_fn argument to register_pytree_node.")
    for key, child in node.flatten_with_keys_fn(tree)[0]:
        yield from _key_paths((*path, key), child, is_leaf)


def tree_flatten_with_path(tree, is_leaf=None):
    """([(key path, leaf), ...], spec)."""
    return list(_key_paths((), tree, is_leaf)), tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None):
    return list(_key_paths((), tree, is_leaf))


def tree_map_with_path(func, tree, *rests, is_leaf=None):
    """Like tree_map, with the leaf's key path as func's first argument."""
    path_leaves, spec = tree_flatten_with_path(tree, is_leaf)
    paths = [p for p, _ in path_leaves]
    leaves = [v for _, v in path_leaves]
    return spec.unflatten(map(func, paths, leaves, *[spec.flatten_up_to(r) for r in rests]))


def keystr(kp):
    return "".join(str(k) for k in kp)


def key_get(obj, kp):
    for k in kp:
        obj = k.get(obj)
    return obj


def _spec_to_json(spec):
    if spec.is_leaf():
        return {"type": None, "context": None, "children_spec": []}
    entry = SUPPORTED_SERIALIZED_TYPES.get(spec.type)
    if entry is None:
        raise NotImplementedError(f"Serializing {spec.type} in pytree is not registered.")
    if entry.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(f"No registered serialization name for {spec.type} found. Please update your "
                                  "register_pytree_node call with a `serialized_type_name` kwarg.")
    if entry.to_dumpable_context is None:
        try:
            context = json.dumps(spec.context)
        except TypeError as e:
            raise TypeError("Unable to serialize context. Please make the context json dump-able, or register a "
                            "custom serializer using register_pytree_node.") from e
    else:
        context = entry.to_dumpable_context(spec.context)
    return {"type": entry.serialized_type_name, "context": context,
            "children_spec": [_spec_to_json(c) for c in spec.children_specs]}


def _json_to_spec(schema):
    if schema["type"] is None and schema["context"] is None and not schema["children_spec"]:
        return _LEAF_SPEC
    if schema["type"] not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Deserializing {schema['type']} in pytree is not registered.")
    cls = SERIALIZED_TYPE_TO_PYTHON_TYPE[schema["type"]]
    entry = SUPPORTED_SERIALIZED_TYPES[cls]
    context = (json.loads(schema["context"]) if entry.from_dumpable_context is None
               else entry.from_dumpable_context(schema["context"]))
    return TreeSpec(cls, context, [_json_to_spec(c) for c in schema["children_spec"]])


def treespec_dumps(treespec, protocol=None):
    """The spec as a JSON string: [protocol, {"type", "context", "children_spec"}], PyTorch's format."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"treespec_dumps(treespec, protocol): Expected `treespec` to be instance of TreeSpec but "
                        f"got item of type {type(treespec)}.")
    protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL if protocol is None else protocol
    if protocol != 1:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [1]")
    return json.dumps((protocol, _spec_to_json(treespec)))


def treespec_loads(serialized):
    protocol, schema = json.loads(serialized)
    if protocol != 1:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [1]")
    return _json_to_spec(schema)


class _DummyLeaf:
    def __repr__(self):
        return "*"


def treespec_pprint(treespec):
    """The tree rebuilt with `*` at each leaf, as a string: "({'a': *}, [*, *])"."""
    return repr(treespec.unflatten([_DummyLeaf() for _ in range(treespec.num_leaves)]))


def _broadcast_to_and_flatten(tree, treespec):
    """The leaves of `tree` repeated to fill `treespec` (a leaf of `tree` stands for a whole subtree), or None when
    `tree` is not a prefix of the spec."""
    if _is_leaf(tree):
        return [tree] * treespec.num_leaves
    if treespec.is_leaf():
        return None
    try:
        children = treespec._children_of(tree)
    except ValueError:
        return None
    out = []
    for child, spec in zip(children, treespec.children_specs):
        part = _broadcast_to_and_flatten(child, spec)
        if part is None:
            return None
        out += part
    return out
