"""trainrun.utils._pytree: flattening order, TreeSpec equality and repr, tree_map with several trees (a prefix
rule: a leaf of the first tree takes a whole subtree of the others), the *_only variants, key paths, custom
nodes, JSON round trips, and the errors that name the mismatch. Where PyTorch 1.13 has the same function its
leaves are compared with ours."""
from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.utils._pytree as pytree  # noqa: E402

Point = namedtuple("Point", ["x", "y"])


def sample_tree():
    return {"b": [1, (2, 3)], "a": Point(4, {"z": 5, "y": 6}), "c": OrderedDict(k=7), "d": None,
            "e": deque([8, 9], maxlen=3), "f": defaultdict(list, {"q": 10})}


def test_flatten_order_and_round_trip():
    tree = sample_tree()
    leaves, spec = pytree.tree_flatten(tree)
    # dicts keep insertion order (not sorted); None is a leaf
    assert leaves == [1, 2, 3, 4, 5, 6, 7, None, 8, 9, 10]
    assert spec.num_leaves == 11 and spec.num_children == 6
    back = pytree.tree_unflatten(leaves, spec)
    assert back == tree and type(back["a"]) is Point and type(back["c"]) is OrderedDict
    assert back["e"].maxlen == 3 and back["f"].default_factory is list
    assert pytree.tree_structure(tree) == spec and pytree.tree_leaves(tree) == leaves
    assert pytree.tree_flatten(3)[1].is_leaf() and pytree.tree_flatten([])[0] == []


def test_leaves_match_pytorch_1_13():
    ref = pytest.importorskip("torch.utils._pytree", reason="PyTorch (python3-torch) is not installed: no oracle")
    tree = {"b": [1, (2, 3)], "a": Point(4, {"z": 5, "y": 6}), "c": (None, [7])}
    assert pytree.tree_flatten(tree)[0] == ref.tree_flatten(tree)[0]
    assert pytree.tree_map(lambda v: v, tree) == ref.tree_map(lambda v: v, tree)


def test_tensors_are_leaves_and_tree_map_only():
    t = torch.ones(2)
    batch = {"x": t, "n": 3, "ys": [t * 2, "s"]}
    out = pytree.tree_map_only(torch.Tensor, lambda v: v + 1, batch)
    assert out["n"] == 3 and out["ys"][1] == "s"
    assert out["x"].tolist() == [2.0, 2.0] and out["ys"][0].tolist() == [3.0, 3.0]
    assert pytree.tree_all_only(torch.Tensor, lambda v: v.numel() == 2, batch)
    assert not pytree.tree_any_only(int, lambda v: v > 5, batch)
    assert pytree.tree_any(lambda v: v == "s", batch) and not pytree.tree_all(lambda v: v == "s", batch)
    seen = []
    assert pytree.tree_map_only_((int, str), seen.append, batch) is batch and seen == [3, "s"]


def test_tree_map_with_several_trees_uses_the_first_as_prefix():
    assert pytree.tree_map(lambda x, y: [x] + y, [5, 6], [[7, 9], [1, 2]]) == [[5, 7, 9], [6, 1, 2]]
    # dict kinds are interchangeable; the first tree's key order wins
    assert pytree.tree_map(lambda a, b: a + b, {"p": 1, "q": 2}, OrderedDict(q=20, p=10)) == {"p": 11, "q": 22}
    with pytest.raises(ValueError, match="Node type mismatch"):
        pytree.tree_map(lambda a, b: a, [1, 2], (1, 2))
    with pytest.raises(ValueError, match="arity mismatch; expected 2, but got 3"):
        pytree.tree_map(lambda a, b: a, [1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="missing key"):
        pytree.tree_map(lambda a, b: a, {"p": 1, "q": 2}, {"p": 1})


def test_unflatten_and_spec_errors_name_the_problem():
    _, spec = pytree.tree_flatten((1, [2, 3]))
    with pytest.raises(ValueError, match="has length 2 but the spec refers to a pytree that holds 3"):
        spec.unflatten([1, 2])
    with pytest.raises(TypeError, match="Expected `treespec` to be instance of TreeSpec"):
        pytree.tree_unflatten([1], "not a spec")


def test_spec_repr_and_pprint():
    _, spec = pytree.tree_flatten((1, [2, 3]))
    assert repr(spec) == "TreeSpec(tuple, None, [*,\n  TreeSpec(list, None, [*,\n    *])])"
    assert pytree.treespec_pprint(pytree.tree_structure({"a": (1, 2)})) == "{'a': (*, *)}"


def test_is_leaf_stops_the_descent():
    tree = {"pair": (1, 2), "list": [3]}
    leaves, spec = pytree.tree_flatten(tree, is_leaf=lambda n: isinstance(n, tuple))
    assert leaves == [(1, 2), 3] and spec.num_leaves == 2


def test_key_paths():
    tree = {"a": [10, Point(1, 2)], "b": (3,)}
    pairs = pytree.tree_leaves_with_path(tree)
    assert [pytree.keystr(p) for p, _ in pairs] == ["['a'][0]", "['a'][1].x", "['a'][1].y", "['b'][0]"]
    assert all(pytree.key_get(tree, p) == v for p, v in pairs)
    doubled = pytree.tree_map_with_path(lambda p, v: (pytree.keystr(p), v * 2), tree)
    assert doubled["a"][1].y == ("['a'][1].y", 4)


class Box:
    def __init__(self, items, label):
        self.items, self.label = items, label


def test_custom_node_registration_and_serialization():
    if Box not in pytree.SUPPORTED_NODES:
        pytree.register_pytree_node(
            Box, lambda b: (b.items, b.label), lambda items, label: Box(list(items), label),
            serialized_type_name="test.Box",
            flatten_with_keys_fn=lambda b: ([(pytree.SequenceKey(i), v) for i, v in enumerate(b.items)], b.label))
    with pytest.raises(ValueError, match="already registered"):
        pytree.register_pytree_node(Box, lambda b: ([], None), lambda i, c: Box([], c))
    leaves, spec = pytree.tree_flatten({"box": Box([1, (2, 3)], "lbl")})
    assert leaves == [1, 2, 3] and spec.children_specs[0].context == "lbl"
    rebuilt = pytree.tree_unflatten([4, 5, 6], spec)["box"]
    assert isinstance(rebuilt, Box) and rebuilt.items == [4, (5, 6)] and rebuilt.label == "lbl"
    loaded = pytree.treespec_loads(pytree.treespec_dumps(spec))
    assert loaded == spec
    assert [pytree.keystr(p) for p, _ in pytree.tree_leaves_with_path(Box([1, 2], "l"))] == ["[0]", "[1]"]


def test_json_round_trip_of_builtin_specs():
    spec = pytree.tree_structure(sample_tree() | {"a": [4, 5, 6]})
    dumped = pytree.treespec_dumps(spec)
    assert dumped.startswith('[1, {"type": "builtins.dict"')
    rebuilt = pytree.treespec_loads(dumped).unflatten(range(11))
    assert rebuilt["f"].default_factory is list and rebuilt["e"].maxlen == 3 and rebuilt["a"] == [3, 4, 5]
    with pytest.raises(NotImplementedError, match="serialized_type_name"):
        pytree.treespec_dumps(pytree.tree_structure(Point(1, 2)))
    Pair = namedtuple("Pair", ["left", "right"])
    pytree._register_namedtuple(Pair, serialized_type_name="test.Pair")
    assert pytree.treespec_loads(pytree.treespec_dumps(pytree.tree_structure(Pair(1, 2)))).unflatten([3, 4]) \
        == Pair(3, 4)
    with pytest.raises(ValueError, match="Unknown protocol 7"):
        pytree.treespec_dumps(spec, protocol=7)
