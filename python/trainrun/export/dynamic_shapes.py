"""torch.export.dynamic_shapes: Dim and the dynamic_shapes argument of export(). A program for varying sizes is
the forward recorded at a lattice of the dims' sizes, each integer of it that changes fitted as a polynomial of
them and checked at more sizes (compile/dynamic_shapes.h)."""
from trainrun import _C
from trainrun._compile import GraphBreakError
from trainrun._dynamo.exc import UserError
from trainrun.export._recording import _no_grad, _record

__all__ = ["Dim", "dims"]

_NO_MAX = 2 ** 63 - 1  # (a dim with no upper bound)


class ValueRange(tuple):
    """A dynamic dim's range: lower and upper (None: unbounded), inclusive."""

    def __new__(cls, lower, upper):
        return super().__new__(cls, (lower, upper))

    lower = property(lambda self: self[0])
    upper = property(lambda self: self[1])

    def __repr__(self):
        return f"VR[{self.lower}, {'int_oo' if self.upper is None else self.upper}]"


class _DimHint:
    """Dim.AUTO, Dim.DYNAMIC (the dim varies; export names it) and Dim.STATIC (it does not)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Dim.{self.name}"


class Dim:
    """torch.export.Dim(name, min=None, max=None): a dimension that varies, for export's dynamic_shapes. Its sizes
    are min..max inclusive (min defaults to 0, max to unbounded). One Dim used at several inputs' dims makes them
    equal; `2 * dim`, `dim + 1` are dims derived from it. Dim.AUTO and Dim.DYNAMIC make a dim vary under a name
    of export's own, Dim.STATIC keeps it at the example's size."""

    AUTO = _DimHint("AUTO")
    DYNAMIC = _DimHint("DYNAMIC")
    STATIC = _DimHint("STATIC")

    def __init__(self, name, *, min=None, max=None):  # noqa: A002
        if not isinstance(name, str) or not name:
            raise ValueError(f"Dim: the name must be a non-empty string, got {name!r}")
        for what, v in (("min", min), ("max", max)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ValueError(f"Dim {name!r}: {what} must be a non-negative int, got {v!r}")
        if min is not None and max is not None and min > max:
            raise ValueError(f"Dim {name!r}: min ({min}) is greater than max ({max})")
        self.__name__ = name
        self.min = 0 if min is None else min
        self.max = _NO_MAX if max is None else max

    def __repr__(self):
        return f"Dim({self.__name__!r}, min={self.min}, max={'int_oo' if self.max == _NO_MAX else self.max})"

    def _affine(self, mul, add):
        return _DerivedDim(self, mul, add)

    def __mul__(self, k):
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            return NotImplemented
        return self._affine(k, 0)

    __rmul__ = __mul__

    def __add__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        return self._affine(1, k)

    __radd__ = __add__

    def __sub__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        return self._affine(1, -k)


class _DerivedDim:
    """mul * root + add: a dim whose size follows another's (2 * batch, seq + 1)."""

    def __init__(self, root, mul, add):
        self.root, self.mul, self.add = root, mul, add
        self.__name__ = f"{mul}*{root.__name__}" if mul != 1 else root.__name__
        if add:
            self.__name__ += f" + {add}" if add > 0 else f" - {-add}"

    def __mul__(self, k):
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            return NotImplemented
        return _DerivedDim(self.root, self.mul * k, self.add * k)

    __rmul__ = __mul__

    def __add__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            return NotImplemented
        return _DerivedDim(self.root, self.mul, self.add + k)

    __radd__ = __add__

    def __sub__(self, k):
        return self.__add__(-k) if isinstance(k, int) and not isinstance(k, bool) else NotImplemented

    def __repr__(self):
        return self.__name__


def dims(*names, min=None, max=None):  # noqa: A002
    """torch.export.dims: one Dim per name, with the same range."""
    return tuple(Dim(n, min=min, max=max) for n in names)



def _dynamic_dims(dynamic_shapes, names, tensors, unify_auto=False):
    """([Dim, ...] the dims that vary, in order of first use; per input, per dim, None or (index into them, mul,
    add)) from export's dynamic_shapes, checked against the example inputs. ([], None): nothing varies.
    unify_auto: Dim.AUTO and Dim.DYNAMIC dims of equal example size are one dim (else each is its own)."""
    if dynamic_shapes is None:
        return [], None
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            raise UserError(f"export: dynamic_shapes names {unknown}, which are not inputs; the inputs are {names}")
        per_input = [dynamic_shapes.get(n) for n in names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(names):
            raise UserError(f"export: dynamic_shapes has {len(dynamic_shapes)} entries for {len(names)} inputs "
                             f"({', '.join(names)})")
        per_input = list(dynamic_shapes)
    else:
        raise TypeError(f"export: dynamic_shapes must be a dict by input name or a tuple, got "
                        f"{type(dynamic_shapes).__name__}")
    roots, values, where = [], [], []  # the varying Dims, their example values, where each was first met
    input_dims = []
    auto = {}  # the Dims made for Dim.AUTO / Dim.DYNAMIC, by example size when unified
    for name, t, spec in zip(names, tensors, per_input):
        ndim = t.dim()
        if spec is None:
            by_dim = {}
        elif isinstance(spec, dict):
            by_dim = {}
            for d, dim in spec.items():
                if not isinstance(d, int) or not -ndim <= d < ndim:
                    raise UserError(f"export: dynamic_shapes['{name}'] names dim {d!r}; the input has {ndim} dims")
                by_dim[d % ndim] = dim
        elif isinstance(spec, (tuple, list)):
            if len(spec) != ndim:
                raise UserError(f"export: dynamic_shapes['{name}'] has {len(spec)} entries; the input has {ndim} dims")
            by_dim = dict(enumerate(spec))
        else:
            raise TypeError(f"export: dynamic_shapes['{name}'] must be None, a dict {{dim: Dim}} or a tuple of Dims, "
                            f"got {type(spec).__name__}")
        entries = []
        for d in range(ndim):
            dim, size = by_dim.get(d), t.shape[d]
            if isinstance(dim, int) and not isinstance(dim, bool):  # (an int: that dim is static, of that size)
                if dim != size:
                    raise UserError(f"export: dynamic_shapes['{name}'] gives dim {d} the static size {dim}, but the "
                                     f"example's is {size}")
                dim = None
            if dim is None or dim is Dim.STATIC:
                entries.append(None)
                continue
            if dim is Dim.AUTO or dim is Dim.DYNAMIC:
                key = size if unify_auto else object()
                if key not in auto:
                    auto[key] = Dim(f"s{len(auto)}")
                dim = auto[key]
            if isinstance(dim, Dim):
                root, mul, add = dim, 1, 0
            elif isinstance(dim, _DerivedDim):
                root, mul, add = dim.root, dim.mul, dim.add
            else:
                raise TypeError(f"export: dynamic_shapes['{name}'] dim {d} is {dim!r}; expected a Dim, Dim.AUTO, "
                                "Dim.DYNAMIC, Dim.STATIC, an int or None")
            at = f"{name}.shape[{d}]"
            if size < 2:
                raise UserError(f"export: {at} is {size} in the example and {dim.__name__} is dynamic; a size of 0 or "
                                 "1 broadcasts into another program, so export from an example of 2 or more there "
                                 "(as torch.export requires); the program then runs at 0 and 1 too")
            if (size - add) % mul:
                raise UserError(f"export: {at} is {size}, which is not {dim.__name__} for any {root.__name__}")
            value = (size - add) // mul
            found = next((i for i, r in enumerate(roots) if r.__name__ == root.__name__), None)
            if found is None:
                if not root.min <= value <= root.max:
                    raise UserError(f"export: {at} is {size}, so {root.__name__} = {value}, outside {root!r}")
                roots.append(root)
                values.append(value)
                where.append(at)
                found = len(roots) - 1
            else:
                other = roots[found]
                if (other.min, other.max) != (root.min, root.max):
                    raise UserError(f"export: two Dims are named {root.__name__!r} with different ranges: {other!r} "
                                     f"and {root!r}")
                if values[found] != value:
                    raise UserError(f"export: {at} is {size}, so {root.__name__} = {value}; but {root.__name__} = "
                                     f"{values[found]} at {where[found]}: the example inputs disagree")
            entries.append((found, mul, add))
        input_dims.append(entries)
    if not roots:
        return [], None
    return [(r, v) for r, v in zip(roots, values)], input_dims


def _monomials(k, degree):
    """Exponents of the monomials of total degree <= degree in k variables, in compile/dynamic_shapes.cc's order."""
    out = []

    def fill(i, left, e):
        if i == k:
            out.append(tuple(e))
            return
        for d in range(left + 1):
            fill(i + 1, left - d, e + [d])

    fill(0, degree, [])
    return out


def _resized(t, sizes):
    """t with the given sizes, its values taken cyclically along each dim that changes (so indices stay valid)."""
    for d, n in enumerate(sizes):
        if n != t.shape[d]:
            t = t.index_select(d, _C.arange(n) % t.shape[d])
    return t.contiguous()


def _generalize(mod, tensors, num_args, kwarg_names, dims, input_dims, graph, source):
    """The program for all sizes of the dims: recordings at a lattice of their sizes fitted by
    compile/dynamic_shapes.h, and checked at more: one past the lattice, the example's, and twice the example's
    (a forward that branches on a size in that span is caught). Sizes recorded start at 2 (a size of 1 would
    broadcast) and stay in each Dim's range."""
    roots = [r for r, _ in dims]
    example = tuple(v for _, v in dims)
    lows = []
    for i, root in enumerate(roots):
        low = max(root.min, 2)
        for entries in input_dims:  # (a derived dim's sizes too start at 2)
            for e in entries:
                if e is not None and e[0] == i and e[1] * low + e[2] < 2:
                    low = max(low, -(-(2 - e[2]) // e[1]))
        lows.append(low)
    span = min(root.max - low for root, low in zip(roots, lows))
    degree = min(3, span - 1)
    if degree < 1:
        narrow = [r for r, low in zip(roots, lows) if r.max - low < 2][0]
        raise UserError(f"export: {narrow!r} allows too few sizes to record the program at (it needs 3 from 2 up); "
                         "make that dim static")
    origin = tuple(min(low, root.max - degree - 1) for low, root in zip(lows, roots))
    points = [tuple(o + e for o, e in zip(origin, exps)) for exps in _monomials(len(roots), degree)]
    checks = [tuple(o + (degree + 1 if j == i else 0) for j, o in enumerate(origin)) for i in range(len(roots))]
    if len(roots) > 1:
        checks.append(tuple(o + 2 for o in origin))
    checks.append(example)
    checks.append(tuple(min(r.max, max(2 * v, o + degree + 2)) for r, v, o in zip(roots, example, origin)))
    points += [c for c in checks if c not in points and all(c[i] <= roots[i].max for i in range(len(roots)))]
    if len(points) == len(_monomials(len(roots), degree)):
        raise UserError("export: the dynamic dims' ranges leave no size to check the program at; make them static")
    buffers = [(b, b.clone()) for b in mod.buffers()] if hasattr(mod, "buffers") else []
    graphs = []
    try:
        for point in points:
            if point == example:
                graphs.append(graph)
                continue
            inputs = []
            for t, entries in zip(tensors, input_dims):
                sizes = [t.shape[d] if e is None else e[1] * point[e[0]] + e[2] for d, e in enumerate(entries)]
                inputs.append(_resized(t, sizes))
            try:
                g, _, _ = _record(mod, inputs, num_args, kwarg_names)
            except GraphBreakError:
                raise
            except Exception as e:
                at = ", ".join(f"{r.__name__}={v}" for r, v in zip(roots, point))
                message = (f"export with dynamic shapes: the forward fails at {at}, a size in the dims' ranges: {e}. "
                           "Give the Dim a range the model takes (Dim(name, min=..., max=...)), or make the dim static")
                try:
                    error = type(e)(message)
                except Exception:  # (an exception type with other arguments)
                    error = RuntimeError(message)
                raise error from e
            g, _, s = _C._fuse_graph(g)
            if s != source:
                at = ", ".join(f"{r.__name__}={v}" for r, v in zip(roots, point))
                raise UserError(f"export with dynamic shapes: the program's fused loops at {at} differ from those at "
                                 "the example's sizes; its ops depend on the dynamic dims' values")
            graphs.append(g)
    finally:
        with _no_grad():  # (recording ran the forward: a BatchNorm in training mode updated its statistics)
            for b, saved in buffers:
                b.copy_(saved)
    specs = [(r.__name__, r.min, r.max) for r in roots]
    return _C._DynamicProgram.generalize(specs, input_dims, graphs, [list(p) for p in points], degree,
                                         points.index(example))
