"""export with inputs that are containers: a dict of tensors, a list, a named tuple, a registered dataclass (any
pytree, trainrun.utils._pytree). The inputs are flattened to their leaves, which the program takes one by one
(named by their path, as torch.export names its placeholders: `batch_x` for batch["x"]); the module is called
through StructuredCall, which rebuilds the containers; and the ExportedProgram flattens a call's inputs by the
exported structure (in_spec), refusing a call whose structure differs."""
import dataclasses

from trainrun.utils import _pytree as pytree


def is_structured(args, kwargs):
    """Whether some input is a container (then the program takes the leaves)."""
    return any(not pytree._is_leaf(v) for v in (*args, *kwargs.values()))


class StructuredCall:
    """mod called with the leaves of its inputs: the containers rebuilt from in_spec first."""

    def __init__(self, mod, in_spec):
        self._mod, self._in_spec = mod, in_spec
        self.__name__ = type(mod).__name__

    def __call__(self, *leaves):
        args, kwargs = pytree.tree_unflatten(list(leaves), self._in_spec)
        return self._mod(*args, **kwargs)

    def buffers(self):
        return self._mod.buffers() if hasattr(self._mod, "buffers") else iter(())


def _key_text(key):
    if isinstance(key, pytree.MappingKey):
        return str(key.key)
    if isinstance(key, pytree.SequenceKey):
        return str(key.idx)
    return key.name


def leaf_names(names, args, kwargs):
    """The program's input names: an input's own name for a leaf, name_key_key... for a leaf inside it."""
    out = []
    for name, value in zip(names, (*args, *kwargs.values())):
        for path, _ in pytree.tree_leaves_with_path(value):
            out.append("_".join([name, *(_key_text(k) for k in path)]))
    return out


def flat_dynamic_shapes(dynamic_shapes, names, args, kwargs):
    """dynamic_shapes given per input (a dict by name or a tuple in order, each mirroring its input's structure
    down to the tensors' {dim: Dim} specs) as one entry per leaf, in order."""
    if dynamic_shapes is None:
        return None
    values = (*args, *kwargs.values())
    if isinstance(dynamic_shapes, dict):
        per_input = [dynamic_shapes.get(n) for n in names]
    else:
        per_input = list(dynamic_shapes) + [None] * (len(values) - len(dynamic_shapes))
    flat = []
    for name, value, spec in zip(names, values, per_input):
        try:
            flat += _specs_per_leaf(pytree.tree_structure(value), spec)
        except ValueError as e:
            from trainrun.export.dynamic_shapes import UserError
            raise UserError(f"export: dynamic_shapes['{name}'] does not mirror the input's structure ({e})") from None
    return flat


def _specs_per_leaf(structure, spec):
    """spec (mirroring the input whose structure this is) as one entry per tensor leaf. A container's spec is
    the same kind of container, or a list in its children's order; a dataclass's may be a dict by field name."""
    if structure.is_leaf():
        return [spec]
    if spec is None:
        return [None] * structure.num_leaves
    if isinstance(spec, dict) and structure.type not in pytree.STANDARD_DICT_TYPES and \
            isinstance(structure.context, list) and set(spec) <= set(structure.context):
        children = [spec.get(field) for field in structure.context]  # (a dataclass's fields by name)
    elif isinstance(spec, (list, tuple)) and structure.type not in (list, tuple):
        children = list(spec)
    else:
        children = structure._children_of(spec)
    if len(children) != structure.num_children:
        raise ValueError(f"expected {structure.num_children} entries, got {len(children)}")
    return [leaf for child, sub in zip(children, structure.children_specs) for leaf in _specs_per_leaf(sub, child)]


def flatten_call(in_spec, args, kwargs):
    """A call's inputs as the exported leaves (dict keys matched by name); InputMismatchError naming the
    difference when the structure is not the exported one."""
    try:
        return in_spec.flatten_up_to((tuple(args), dict(kwargs)))
    except ValueError as e:
        from trainrun.export import InputMismatchError
        raise InputMismatchError(f"ExportedProgram: the inputs do not have the exported structure "
                                 f"{pytree.treespec_pprint(in_spec)}: {e}") from None


def register_dataclass(cls, *, serialized_type_name=None):
    """torch.export.register_dataclass: instances of the dataclass `cls` become containers of their fields (so
    a dataclass input's tensors are program inputs)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"register_dataclass: {cls} is not a dataclass")
    names = [f.name for f in dataclasses.fields(cls) if f.init]

    def flatten(obj):
        return [getattr(obj, n) for n in names], names

    def unflatten(values, context):
        return cls(**dict(zip(context, values)))

    def flatten_with_keys(obj):
        return [(pytree.GetAttrKey(n), getattr(obj, n)) for n in names], names
    pytree.register_pytree_node(cls, flatten, unflatten,
                                serialized_type_name=serialized_type_name or f"{cls.__module__}.{cls.__qualname__}",
                                flatten_with_keys_fn=flatten_with_keys)
