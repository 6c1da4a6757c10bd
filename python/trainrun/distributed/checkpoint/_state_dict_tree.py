"""State dicts as flat {fully-qualified name: value} and back: nested dicts
and lists flatten with dots ("model.layers.0.weight", "optim.param_groups.0.lr"),
and Stateful objects (anything with state_dict()/load_state_dict()) are
expanded into their state dict, to be handed back after a load."""


class Leaf:
    """One value of the tree: where it lives (container[key]) and its name."""
    __slots__ = ("fqn", "container", "key")

    def __init__(self, fqn, container, key):
        self.fqn, self.container, self.key = fqn, container, key

    @property
    def value(self):
        return self.container[self.key]

    def set(self, value):
        self.container[self.key] = value


def is_stateful(obj):
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)) and \
        not isinstance(obj, dict)


def flatten(state_dict):
    """(leaves, statefuls): every leaf of the tree, and [(stateful, its state dict)] to load back into."""
    leaves, statefuls = [], []

    def visit(container, key, fqn):
        value = container[key]
        if is_stateful(value):
            inner = value.state_dict()
            statefuls.append((value, inner))
            for k in list(inner):
                visit(inner, k, f"{fqn}.{k}")
        elif isinstance(value, dict):
            for k in list(value):
                if not isinstance(k, (str, int)):
                    raise TypeError(f"checkpoint: key {k!r} under '{fqn}' is a {type(k).__name__}; keys must be "
                                    "strings or integers")
                visit(value, k, f"{fqn}.{k}")
        elif isinstance(value, list):
            for i in range(len(value)):
                visit(value, i, f"{fqn}.{i}")
        else:
            leaves.append(Leaf(fqn, container, key))

    for k in list(state_dict):
        visit(state_dict, k, str(k))
    names = [leaf.fqn for leaf in leaves]
    if len(set(names)) != len(names):
        seen = set()
        twice = next(n for n in names if n in seen or seen.add(n))
        raise ValueError(f"checkpoint: two entries flatten to the same name '{twice}'")
    return leaves, statefuls
