"""The op list (tensor/ops.yaml, compiled into trainrun._C) as Python
objects: each op's name, schema, argument types and names, tags, and where
the package binds it. The binding test and DTensor read it, so an op added
to the list is checked for its bindings and, when pointwise, gets DTensor's
pointwise rule without another list to update."""
import functools
import re
from typing import NamedTuple

from trainrun import _C


class Argument(NamedTuple):
    type: str  # "Tensor", "int[]", "Scalar?", ...
    name: str


class OpSchema(NamedTuple):
    name: str           # "max.dim"
    schema: str
    arguments: tuple    # of Argument
    returns: tuple      # of (type, name or None)
    tags: frozenset
    python_name: str    # "max"
    python: frozenset   # {"function", "method", "functional"}
    binding: str        # "generated" (python/csrc/op_bindings_generated.cc) or "manual"

    @property
    def tensor_inputs(self):
        """The arguments that are input tensors (not the out= tensor)."""
        return [a for a in self.arguments if a.type in ("Tensor", "Tensor?") and a.name != "out"]


_SCHEMA = re.compile(r"^(?P<name>[\w.]+)\((?P<args>.*)\)\s*->\s*(?P<ret>.+)$")


def parse(schema):
    m = _SCHEMA.match(schema)
    if m is None:
        raise ValueError(f"not an op schema: {schema!r}")
    # "*" (keyword-only from there) and "=default" are Python conventions; the list keeps types and names.
    arguments = tuple(Argument(*part.partition("=")[0].split())
                      for part in (p.strip() for p in m["args"].split(",")) if part and part != "*")
    ret = m["ret"].strip()
    returns = ()
    if ret != "()":
        inner = ret[1:-1] if ret.startswith("(") else ret
        returns = tuple((p.split() + [None])[:2] for p in (q.strip() for q in inner.split(",")))
        returns = tuple(tuple(r) for r in returns)
    return m["name"], arguments, returns


@functools.lru_cache(maxsize=None)
def ops():
    """Every op of the list, in its order."""
    result = []
    for e in _C._op_list():
        name, arguments, returns = parse(e["schema"])
        result.append(OpSchema(name, e["schema"], arguments, returns, frozenset(e["tags"]), e["python_name"],
                               frozenset(e["python"]), e["binding"]))
    return tuple(result)


def pointwise_methods(inputs):
    """Python names of the pointwise ops with `inputs` tensor inputs that are Tensor methods."""
    return sorted({op.python_name for op in ops()
                   if "pointwise" in op.tags and "method" in op.python and len(op.tensor_inputs) == inputs})
