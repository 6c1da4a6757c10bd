"""State dicts as flat {fully-qualified name: value} and back: nested dicts
and lists flatten with dots ("model.layers.0.weight", "optim.param_groups.0.lr"),
and Stateful objects (anything with state_dict()/load_state_dict()) are
expanded into their state dict, to be handed back after a load."""


class Leaf:
    """One value of the tree: where it lives (container[key]), its name, and its path of keys from the root."""
    __slots__ = ("fqn", "container", "key", "path")

    def __init__(self, fqn, container, key, path=()):
        self.fqn, self.container, self.key, self.path = fqn, container, key, path

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

    def visit(container, key, fqn, path):
        value = container[key]
        if is_stateful(value):
            inner = value.state_dict()
            statefuls.append((value, inner))
            for k in list(inner):
                visit(inner, k, f"{fqn}.{k}", path + (k,))
        elif isinstance(value, dict):
            for k in list(value):
                if not isinstance(k, (str, int)):
                    raise TypeError(f"checkpoint: key {k!r} under '{fqn}' is a {type(k).__name__}; keys must be "
                                    "strings or integers")
                visit(value, k, f"{fqn}.{k}", path + (k,))
        elif isinstance(value, list):
            for i in range(len(value)):
                visit(value, i, f"{fqn}.{i}", path + (i,))
        else:
            leaves.append(Leaf(fqn, container, key, path))

    for k in list(state_dict):
        visit(state_dict, k, str(k), (k,))
    names = [leaf.fqn for leaf in leaves]
    if len(set(names)) != len(names):
        seen = set()
        twice = next(n for n in names if n in seen or seen.add(n))
        raise ValueError(f"checkpoint: two entries flatten to the same name '{twice}'")
    return leaves, statefuls


def unflatten(items):
    """The tree back from [(path, value)]: dicts, and lists where a level's keys are the positions 0..n-1."""
    root = {}
    for path, value in items:
        node = root
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = value

    def lists(node):
        if not isinstance(node, dict):
            return node
        node = {k: lists(v) for k, v in node.items()}
        if node and all(isinstance(k, int) for k in node) and sorted(node) == list(range(len(node))):
            return [node[i] for i in range(len(node))]
        return node
    return lists(root)
