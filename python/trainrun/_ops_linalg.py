"""Products and distances with PyTorch's signatures: mv, addmm, addmv,
baddbmm, addbmm, inner, tensordot, einsum (pairwise batched matrix products,
planned once per equation and shapes), cdist, cross. Composites of core
ops, so their gradients come from the core's."""
import collections
import functools

import numpy as np

import trainrun as _trainrun
from trainrun import _C
from trainrun._op_table import op, wrap_dim

_ops = _C._ops


@op(method=True)
def mv(input, vec):  # noqa: A002
    return _ops.mv(input, vec)


@op(method=True)
def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    out = _ops.mv(mat, vec)
    return (input * beta if beta != 1 else input) + (out * alpha if alpha != 1 else out)


@op(method=True)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    out = _C.bmm(batch1, batch2).sum(dim=0)
    return (input * beta if beta != 1 else input) + (out * alpha if alpha != 1 else out)


@op(method=True)
def inner(input, other):  # noqa: A002
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return _C.matmul(input, other.transpose(-1, -2) if other.ndim > 1 else other) if input.ndim <= 2 and \
        other.ndim <= 2 else einsum("...i,...i", input, other)


@op()
def tensordot(a, b, dims=2):
    if isinstance(dims, int):
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                          [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    dims_a = [wrap_dim(d, a.ndim, "tensordot") for d in dims_a]
    dims_b = [wrap_dim(d, b.ndim, "tensordot") for d in dims_b]
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = int(np.prod([a.shape[d] for d in dims_a]))
    left = a.permute(free_a + dims_a).reshape([-1, k])
    right = b.permute(dims_b + free_b).reshape([k, -1])
    return _C.mm(left, right).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])


def _parse_einsum(equation, n):
    equation = equation.replace(" ", "")
    if "->" in equation:
        lhs, rhs = equation.split("->")
    else:
        lhs, rhs = equation, None
    terms = lhs.split(",")
    if len(terms) != n:
        raise ValueError(f"einsum(): the equation has {len(terms)} operands but {n} tensors were given")
    return terms, rhs


def _expand_ellipsis(term, ndim, letters):
    if "..." not in term:
        if len(term) != ndim:
            raise ValueError(f"einsum(): subscript {term!r} has {len(term)} letters for a tensor of {ndim} dims")
        return term
    k = ndim - (len(term) - 3)
    return term.replace("...", letters[len(letters) - k:] if k else "")


@op()
def einsum(equation, *operands):
    """Einstein summation, contracted pairwise left to right with batched matrix products (so it costs what
    the equivalent bmm calls cost); a letter repeated within one operand takes its diagonal first. The
    sequence of view, sum and bmm calls is planned once per (equation, shapes) and replayed."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    program = _einsum_program(equation, tuple(tuple(t.shape) for t in operands))
    values = list(operands)
    # (tensor-likes such as DTensor: through trainrun.bmm, which hands them to their own rules)
    bmm = _C.bmm if all(_C._is_cpp_tensor(t) for t in operands) else _trainrun.bmm
    for call, inputs, args in program:
        if call == "bmm":
            values.append(bmm(values[inputs[0]], values[inputs[1]]))
        else:
            values.append(getattr(values[inputs[0]], call)(*args))
    return values[-1] if program else operands[0]


class _Planned:
    """A stand-in tensor that records the calls made on it (einsum's plan is made on these, then replayed)."""

    def __init__(self, shape, program, index, base):
        self.shape, self.ndim, self._program, self._index, self._base = tuple(shape), len(shape), program, index, base

    def _record(self, op, args, shape, inputs=None):
        """Appends the call; its result is value number base + (its position in the program)."""
        self._program.append((op, inputs or (self._index,), args))
        return _Planned(shape, self._program, self._base + len(self._program) - 1, self._base)

    def sum(self, dim):
        return self._record("sum", (dim,), [s for k, s in enumerate(self.shape) if k not in dim])

    def permute(self, dims):
        return self._record("permute", (list(dims),), [self.shape[d] for d in dims])

    def expand(self, shape):
        return self._record("expand", (list(shape),), list(shape))

    def reshape(self, shape):
        return self._record("reshape", (list(shape),), list(shape))

    def diagonal(self, offset, dim1, dim2):
        shape = [s for k, s in enumerate(self.shape) if k not in (dim1, dim2)] + [self.shape[dim1]]
        return self._record("diagonal", (offset, dim1, dim2), shape)


def _bmm(a, b):
    if isinstance(a, _Planned):
        return a._record("bmm", (), [a.shape[0], a.shape[1], b.shape[2]], (a._index, b._index))
    return _C.bmm(a, b)


@functools.lru_cache(maxsize=1024)
def _einsum_program(equation, shapes):
    program = []
    operands = [_Planned(s, program, i, len(shapes)) for i, s in enumerate(shapes)]
    result = _einsum_plan(equation, operands)
    if result is operands[0] and not program:
        return ()
    return tuple(program)


def _einsum_plan(equation, operands):
    terms, rhs = _parse_einsum(equation, len(operands))
    ell = "".join(chr(c) for c in range(ord("A"), ord("Z") + 1) if chr(c) not in equation)[:12]
    max_ell = max((t.ndim - (len(s) - 3) for s, t in zip(terms, operands) if "..." in s), default=0)
    ell = ell[:max_ell]
    terms = [_expand_ellipsis(s, t.ndim, ell) for s, t in zip(terms, operands)]
    if rhs is None:
        counts = collections.Counter("".join(terms))
        rhs = ell + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    else:
        rhs = rhs.replace("...", ell)
    operands = list(operands)
    for k, s in enumerate(terms):  # a letter repeated within one operand: its diagonal ('ii->i', 'bii->b')
        while len(set(s)) != len(s):
            c = next(c for c in s if s.count(c) > 1)
            i, j = s.index(c), s.index(c, s.index(c) + 1)
            if operands[k].shape[i] != operands[k].shape[j]:
                raise ValueError(f"einsum(): subscript {c!r} is repeated in operand {k} for dims of sizes "
                                 f"{operands[k].shape[i]} and {operands[k].shape[j]}")
            operands[k] = operands[k].diagonal(0, i, j)  # (the diagonal becomes the last dim)
            s = s[:i] + s[i + 1:j] + s[j + 1:] + c
        terms[k] = s
    sizes = {}
    for s, t in zip(terms, operands):
        for c, n in zip(s, t.shape):
            if sizes.get(c, 1) != n and n != 1 and sizes.get(c) is not None:
                raise ValueError(f"einsum(): subscript {c!r} has size {n} in one operand and {sizes[c]} in another")
            sizes[c] = max(sizes.get(c, 1), n)
    current, cur = operands[0], terms[0]
    for i in range(1, len(operands)):
        later = set(rhs) | set("".join(terms[i + 1:]))
        current, cur = _contract(current, cur, operands[i], terms[i], later, sizes)
    # Letters only this operand has and the output lacks are summed away; then order as the output.
    gone = [k for k, c in enumerate(cur) if c not in rhs]
    if gone:
        current = current.sum(dim=gone)
        cur = "".join(c for c in cur if c in rhs)
    return current.permute([cur.index(c) for c in rhs]) if cur != rhs else current


def _contract(a, sa, b, sb, keep, sizes):
    """a (letters sa) times b (letters sb), summing the shared letters not in `keep`, as one bmm."""
    # Sum first what appears in one operand only and is not kept.
    for t_name in ("a", "b"):
        t, s, other = (a, sa, sb) if t_name == "a" else (b, sb, sa)
        drop = [k for k, c in enumerate(s) if c not in other and c not in keep]
        if drop:
            t = t.sum(dim=drop)
            s = "".join(c for k, c in enumerate(s) if k not in drop)
        if t_name == "a":
            a, sa = t, s
        else:
            b, sb = t, s
    batch = [c for c in sa if c in sb and c in keep]
    contracted = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]

    def arrange(t, s, order):
        t = t.permute([s.index(c) for c in order]) if order else t
        return t.expand([sizes[c] for c in order])

    def prod(cs):
        return int(np.prod([sizes[c] for c in cs])) if cs else 1

    A = arrange(a, sa, batch + left + contracted).reshape([prod(batch), prod(left), prod(contracted)])
    B = arrange(b, sb, batch + contracted + right).reshape([prod(batch), prod(contracted), prod(right)])
    out = _bmm(A, B).reshape([sizes[c] for c in batch + left + right])
    return out, "".join(batch + left + right)


@op()
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Pairwise p-norm distances between the rows of x1 and of x2 (batched over leading dims)."""
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == 2.0:
        return _C.sqrt((diff * diff).sum(dim=-1))
    return _C.norm(diff, float(p), [-1], False)


@op(method=True)
def cross(input, other, dim=None):  # noqa: A002
    if dim is None:
        dim = next((d for d in range(input.ndim) if input.shape[d] == 3), None)
        if dim is None:
            raise ValueError("cross(): no dimension of size 3")
    d = wrap_dim(dim, input.ndim, "cross")
    if input.shape[d] != 3:
        raise ValueError(f"cross(): dim {dim} must have size 3, got {input.shape[d]}")
    a = [input.select(d, i) for i in range(3)]
    b = [other.select(d, i) for i in range(3)]
    return _C.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)
