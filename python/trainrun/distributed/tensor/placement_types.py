"""How a DTensor lies along one mesh dimension: Shard(dim) (split along a
tensor dim as torch.chunk splits it: trailing ranks may get smaller or empty
pieces), Replicate() (every rank holds all of it), Partial(reduce_op) (every
rank holds a term; the tensor is their sum, or avg/max/min).

_StridedShard(dim, split_factor) is what FSDP over a tensor-parallel
parameter gives (PyTorch's name): a Shard on this mesh dim applied inside
the shards of the later mesh dims on the same tensor dim, so each rank
holds a block of its tensor-parallel piece (the piece is split
split_factor ways first)."""
import numpy as np


class Placement:
    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Shard(Placement):
    def __init__(self, dim):
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"Shard(dim): dim must be an int, got {type(dim).__name__}")
        self.dim = dim

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    __str__ = lambda self: f"S({self.dim})"  # noqa: E731


class _StridedShard(Shard):
    def __init__(self, dim, split_factor):
        super().__init__(dim)
        self.split_factor = split_factor

    def __eq__(self, other):
        return isinstance(other, _StridedShard) and (other.dim, other.split_factor) == (self.dim, self.split_factor)

    def __hash__(self):
        return hash(("_StridedShard", self.dim, self.split_factor))

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    __str__ = lambda self: f"_S({self.dim}, {self.split_factor})"  # noqa: E731


def nesting_order(placements):
    """The mesh dims in the order their shards split the tensor: strided shards after the plain ones."""
    plain = [i for i, p in enumerate(placements) if not isinstance(p, _StridedShard)]
    return plain + [i for i, p in enumerate(placements) if isinstance(p, _StridedShard)]


class Replicate(Placement):
    def is_replicate(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    __str__ = lambda self: "R"  # noqa: E731


class Partial(Placement):
    _OPS = ("sum", "avg", "max", "min")

    def __init__(self, reduce_op="sum"):
        if reduce_op not in self._OPS:
            raise ValueError(f"Partial(reduce_op): one of {self._OPS}, got {reduce_op!r}")
        self.reduce_op = reduce_op

    def is_partial(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    __str__ = lambda self: f"P({self.reduce_op})"  # noqa: E731


def chunk_sizes(size, n):
    """The sizes torch.chunk gives a dim of `size` split n ways: ceil(size / n) each, the last ones smaller
    or empty (always n entries)."""
    step = -(-size // n) if n else 0
    return [max(0, min(step, size - i * step)) for i in range(n)]


def chunk_offsets(size, n):
    return [int(o) for o in np.cumsum([0] + chunk_sizes(size, n)[:-1])]


def normalize(placements, ndim):
    """Placements as a tuple with Shard dims made non-negative (and checked against ndim)."""
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"placements must be Shard, Replicate or Partial, got {p!r}")
        if isinstance(p, Shard):
            if not -ndim <= p.dim < max(ndim, 1):
                raise ValueError(f"{p!r} is out of range for a tensor of {ndim} dims")
            p = _StridedShard(p.dim % ndim, p.split_factor) if isinstance(p, _StridedShard) else Shard(p.dim % ndim)
        out.append(p)
    return tuple(out)
