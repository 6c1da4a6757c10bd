"""DTensor's operators and methods, and the trainrun functions that accept
DTensors: each goes through its sharding rule in _sharding_rules. Functions
of trainrun and trainrun.nn.functional listed here check their first
arguments for a DTensor and dispatch; anything else given a DTensor fails
with a TypeError (it is not a Tensor), never a silent local answer."""
import numbers
import operator

import trainrun
from trainrun import _C, _op_list
from trainrun.distributed.tensor import _sharding_rules as rules
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec
from trainrun.distributed.tensor._implicit import replicated_like
from trainrun.distributed.tensor._redistribute import redistribute_local
from trainrun.distributed.tensor.placement_types import Replicate, Shard
from trainrun.nn import functional as F


def _number_or_dtensor(x, op, dtensor):
    if isinstance(x, DTensor) or (isinstance(x, numbers.Number) and not isinstance(x, bool)):
        return x
    x = replicated_like(x, dtensor)  # under experimental.implicit_replication
    if isinstance(x, DTensor):
        return x
    if _C._is_cpp_tensor(x) and x.ndim == 0:
        return x.item()
    raise TypeError(f"DTensor: {op} mixes a DTensor with a {type(x).__name__}; convert it with "
                    "DTensor.from_local or distribute_tensor")


def _binary(op, fn, reflected=False):
    def method(self, other):
        other = _number_or_dtensor(other, op, self)
        args = [other, self] if reflected else [self, other]
        return rules.pointwise(op, fn, args)
    return method


def _unary(op, fn):
    return lambda self, *args, **kwargs: rules.pointwise(op, lambda t: fn(t, *args, **kwargs), [self])


def _dims(dim):
    if dim is None:
        return None
    return [dim] if isinstance(dim, int) else list(dim)


def _sum(self, dim=None, keepdim=False, *, dtype=None):
    x = self if dtype is None else self.to(dtype)
    return rules.reduction("sum", lambda t, dims: t.sum(dim=dims, keepdim=keepdim), x, _dims(dim), keepdim, "sum")


def _mean(self, dim=None, keepdim=False, *, dtype=None):
    x = self if dtype is None else self.to(dtype)
    dims = _dims(dim) or list(range(x.ndim))
    count = 1
    for d in dims:
        count *= x.shape[d]
    # The sum of each piece over the global count: pieces of a sharded dim add up to the mean.
    return rules.reduction("mean", lambda t, ds: t.sum(dim=ds, keepdim=keepdim) / count, x, dims, keepdim, "sum")


def _extreme(op, partial_op):
    def method(self, dim=None, keepdim=False):
        return rules.reduction(op, lambda t, dims: getattr(t, op)(dim=dims, keepdim=keepdim), self, _dims(dim),
                               keepdim, partial_op)
    return method


def _softmax(op):
    def method(self, dim, dtype=None):
        return rules.along_whole_dim(op, lambda t: getattr(_C, op)(t, dim, dtype), self, dim)
    return method


def _to(self, *args, **kwargs):
    return rules.pointwise("to", lambda t: t.to(*args, **kwargs), [self])


def _view(op):
    def method(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return rules.reshape(op, self, shape)
    return method


_add, _sub, _mul, _div, _pow = operator.add, operator.sub, operator.mul, operator.truediv, operator.pow
for _name, _fn in (("__add__", _binary("add", _add)), ("__radd__", _binary("add", _add, True)),
                   ("__sub__", _binary("sub", _sub)), ("__rsub__", _binary("sub", _sub, True)),
                   ("__mul__", _binary("mul", _mul)), ("__rmul__", _binary("mul", _mul, True)),
                   ("__truediv__", _binary("div", _div)), ("__rtruediv__", _binary("div", _div, True)),
                   ("__pow__", _binary("pow", _pow)), ("maximum", _binary("maximum", _C.maximum)),
                   ("minimum", _binary("minimum", _C.minimum)),
                   ("add", _binary("add", _add)), ("sub", _binary("sub", _sub)), ("mul", _binary("mul", _mul)),
                   ("div", _binary("div", _div)), ("pow", _binary("pow", _pow))):
    setattr(DTensor, _name, _fn)
# Every pointwise op of the op list (tensor/ops.yaml) that is a Tensor method, with one tensor input or two, is
# a DTensor method through the pointwise rule: an op added to the list needs nothing here. Then the pointwise
# methods written in Python over the list's ops.
# (A method the list names but Tensor lacks is test_op_list's failure, not an import error here.)
for _name in _op_list.pointwise_methods(2):
    if _name not in vars(DTensor) and hasattr(_C.Tensor, _name):
        setattr(DTensor, _name, _binary(_name, getattr(_C.Tensor, _name)))
for _name in _op_list.pointwise_methods(1) + ["gelu", "silu", "square", "reciprocal"]:
    if hasattr(_C.Tensor, _name):
        setattr(DTensor, _name, _unary(_name, getattr(_C.Tensor, _name)))
for _name in ("neg", "clone", "detach", "contiguous", "float", "double", "half", "bfloat16"):
    setattr(DTensor, _name, _unary(_name, getattr(_C.Tensor, _name)))
DTensor.__neg__ = DTensor.neg
# Comparisons as operators, elementwise as a tensor's; hashing stays identity (dict keys and set members find a
# DTensor by identity before they compare), as PyTorch's.
DTensor.__gt__, DTensor.__lt__, DTensor.__ge__, DTensor.__le__ = DTensor.gt, DTensor.lt, DTensor.ge, DTensor.le
DTensor.__eq__, DTensor.__ne__, DTensor.__hash__ = DTensor.eq, DTensor.ne, object.__hash__
DTensor.to = _to
DTensor.__matmul__ = lambda self, other: rules.matmul("matmul", self, other)
DTensor.matmul = DTensor.__matmul__
DTensor.mm = lambda self, other: rules.matmul("mm", self, other)
DTensor.bmm = lambda self, other: rules.matmul("bmm", self, other)
DTensor.sum, DTensor.mean = _sum, _mean
DTensor.amax, DTensor.amin = _extreme("amax", "max"), _extreme("amin", "min")
DTensor.softmax, DTensor.log_softmax = _softmax("softmax"), _softmax("log_softmax")
DTensor.transpose = lambda self, dim0, dim1: rules.transpose(self, dim0, dim1)
DTensor.t = lambda self: rules.transpose(self, 0, 1)
DTensor.T = property(lambda self: rules.permute(self, list(range(self.ndim))[::-1]))
DTensor.permute = lambda self, *dims: rules.permute(self, list(dims[0]) if len(dims) == 1 and isinstance(
    dims[0], (tuple, list)) else list(dims))
DTensor.view, DTensor.reshape = _view("view"), _view("reshape")


def _operand_piece(self, other, op):
    """other as the piece matching self's local piece: a DTensor redistributed to self's placements, a
    whole tensor of self's shape cut the same way, a number as it is."""
    if isinstance(other, DTensor):
        if other.device_mesh != self.device_mesh:
            raise ValueError(f"DTensor {op}: the operands are on different meshes")
        if tuple(other.shape) != tuple(self.shape):
            raise ValueError(f"DTensor {op}: the operand's shape {list(other.shape)} is not {list(self.shape)}")
        return other.redistribute(self.device_mesh, self.placements).to_local()
    if _C._is_cpp_tensor(other) and other.ndim > 0:
        if tuple(other.shape) != tuple(self.shape):
            raise ValueError(f"DTensor {op}: a plain operand must have the whole tensor's shape "
                             f"{list(self.shape)}, got {list(other.shape)}")
        replicated = tuple(Replicate() for _ in self.placements)
        return redistribute_local(other, tuple(self.shape), self.device_mesh, replicated, self.placements)
    return other


def _in_place(op, partial_ok):
    """self.op(*args) in place on the local piece (tensor operands cut to match it). On a Partial DTensor
    (its pieces are summands) only what is linear in it is allowed, by partial_ok(args)."""
    def method(self, *args, **kwargs):
        if any(p.is_partial() for p in self.placements) and not partial_ok(args):
            raise ValueError(f"DTensor {op}{tuple(type(a).__name__ for a in args)} is not linear in a Partial "
                             "DTensor's pieces; redistribute it first")
        getattr(self._local_tensor, op)(*[_operand_piece(self, a, op) for a in args], **kwargs)
        return self
    method.__name__ = op
    return method


def _is_number(x):
    return isinstance(x, numbers.Number)


_TENSOR_OPERAND = lambda args: bool(args) and not _is_number(args[0])  # noqa: E731  (add_/sub_: pieces add up)
_NUMBER_OPERAND = lambda args: bool(args) and _is_number(args[0])  # noqa: E731  (mul_/div_ by a number)
for _op_name, _partial_ok in (("add_", _TENSOR_OPERAND), ("sub_", _TENSOR_OPERAND), ("mul_", _NUMBER_OPERAND),
                              ("div_", _NUMBER_OPERAND), ("copy_", lambda args: True),
                              ("neg_", lambda args: True)):
    setattr(DTensor, _op_name, _in_place(_op_name, _partial_ok))
for _op_name in ("clamp_", "clamp_min_", "clamp_max_", "abs_", "sqrt_", "exp_", "relu_", "sigmoid_", "tanh_",
                 "lerp_", "addcmul_", "addcdiv_"):
    setattr(DTensor, _op_name, _in_place(_op_name, lambda args: False))


# ---- ops that need a dim whole: it is gathered first (Partial summed) -------------------------------------
def _whole_along(x, dims):
    """x redistributed so that no mesh dim splits any of `dims` (those Shards, and any Partial, become
    Replicate)."""
    wanted = tuple(Replicate() if p.is_partial() or (p.is_shard() and p.dim in dims) else p for p in x.placements)
    return x if wanted == tuple(x.placements) else x.redistribute(x.device_mesh, wanted)


def _replicated(local, like):
    mesh = like.device_mesh
    return DTensor(local, DTensorSpec(mesh, tuple(Replicate() for _ in range(mesh.ndim)), tuple(local.shape)))


def _extreme_along(op):
    """max/min (values, indices) and argmax/argmin: over all elements (gathered), or along dim with that dim
    whole on every rank (the other dims keep their sharding, and the indices are global)."""
    from trainrun import return_types

    def method(self, dim=None, keepdim=False):
        if dim is None:
            if op in ("max", "min"):
                return getattr(self, "amax" if op == "max" else "amin")()
            return _replicated(getattr(self.full_tensor(), op)(), self)
        d = dim % self.ndim
        x = _whole_along(self, (d,))
        result = getattr(x.to_local(), op)(dim=d, keepdim=keepdim)
        placements = tuple(Shard(p.dim - (1 if p.dim > d and not keepdim else 0)) if p.is_shard() else p
                           for p in x.placements)
        shape = list(x.shape)
        if keepdim:
            shape[d] = 1
        else:
            del shape[d]
        spec = DTensorSpec(x.device_mesh, placements, tuple(shape))
        if op in ("max", "min"):
            return getattr(return_types, op)(DTensor(result[0], spec), DTensor(result[1], spec))
        return DTensor(result, spec)
    method.__name__ = op
    return method


for _name in ("max", "min", "argmax", "argmin"):
    setattr(DTensor, _name, _extreme_along(_name))


def _norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    """The p-norm from pointwise ops and a sum (a sharded dim's partial sums are added before the root)."""
    order = 2.0 if p in ("fro", None) else float(p)
    x = self if dtype is None else self.to(dtype)
    if order == float("inf"):
        return x.abs().amax(dim=dim, keepdim=keepdim) if dim is not None else x.abs().amax()
    return _sum(x.abs() ** order, dim, keepdim) ** (1.0 / order)


def _getitem(self, key):
    """Indexing gathers the whole tensor first (every rank then holds the result, replicated)."""
    if isinstance(key, DTensor):
        key = key.full_tensor()
    elif isinstance(key, tuple):
        key = tuple(k.full_tensor() if isinstance(k, DTensor) else k for k in key)
    return _replicated(self.full_tensor()[key], self)


def _like(factory):
    """zeros_like & co. of a DTensor: the factory on the local piece, same layout (a Partial input's result is
    replicated: a factory's values are whole on every rank)."""
    def make(input, *args, **kwargs):  # noqa: A002
        placements = tuple(Replicate() if p.is_partial() else p for p in input.placements)
        return DTensor(factory(input.to_local(), *args, **kwargs),
                       DTensorSpec(input.device_mesh, placements, tuple(input.shape)))
    return make


DTensor.norm = _norm
DTensor.__getitem__ = _getitem


def _replace(module, name, fn):
    """module.<name> = fn, where pickle finds it by that name: a model holding F.gelu as its activation still
    pickles once DTensor has wrapped F.gelu."""
    fn.__module__, fn.__qualname__ = module.__name__, name
    setattr(module, name, fn)


def _dispatching(name, original, handler):
    """trainrun.<name> that hands calls with a DTensor positional argument to `handler` and everything else to
    the original."""
    def fn(*args, **kwargs):
        if any(isinstance(a, DTensor) for a in args):
            return handler(*args, **kwargs)
        return original(*args, **kwargs)
    fn.__name__, fn.__doc__, fn.__wrapped__ = name, getattr(original, "__doc__", None), original
    fn._dtensor_aware = True
    return fn


_PLAIN_WHERE = trainrun.where  # (numbers for either branch; the wrapped one is set below)
_FUNCTIONS = {
    "matmul": lambda a, b: rules.matmul("matmul", a, b), "mm": lambda a, b: rules.matmul("mm", a, b),
    "bmm": lambda a, b: rules.matmul("bmm", a, b),
    "add": lambda a, b, alpha=1: _binary("add", _add)(a, b * alpha if alpha != 1 else b) if isinstance(a, DTensor)
    else _binary("add", _add, True)(b, a),
    "mul": lambda a, b: DTensor.__mul__(a, b) if isinstance(a, DTensor) else DTensor.__rmul__(b, a),
    "sum": lambda x, dim=None, keepdim=False, **k: _sum(x, dim, keepdim, **k),
    "mean": lambda x, dim=None, keepdim=False, **k: _mean(x, dim, keepdim, **k),
    "softmax": lambda x, dim, dtype=None: x.softmax(dim, dtype),
    "log_softmax": lambda x, dim, dtype=None: x.log_softmax(dim, dtype),
    "transpose": lambda x, d0, d1: x.transpose(d0, d1), "t": lambda x: x.t(),
    "relu": lambda x: x.relu(), "tanh": lambda x: x.tanh(), "sigmoid": lambda x: x.sigmoid(),
    "exp": lambda x: x.exp(),
    "where": lambda condition, input, other: rules.pointwise("where", _PLAIN_WHERE, [
        condition, *[_number_or_dtensor(v, "where", condition) for v in (input, other)]]),
    "max": lambda x, *a, **k: x.max(*a, **k), "min": lambda x, *a, **k: x.min(*a, **k),
    "argmax": lambda x, *a, **k: x.argmax(*a, **k), "argmin": lambda x, *a, **k: x.argmin(*a, **k),
    "norm": lambda x, *a, **k: x.norm(*a, **k),
}
for _name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"):
    if hasattr(trainrun, _name):
        _FUNCTIONS[_name] = _like(getattr(trainrun, _name))
def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-05):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    params = [p for p in (weight, bias) if p is not None]
    for p in params:
        if not isinstance(p, DTensor):
            raise TypeError("DTensor layer_norm: weight and bias must be DTensors too (distribute_tensor them)")

    def fn(t, *ps):
        kw = {}
        rest = list(ps)
        if weight is not None:
            kw["weight"] = rest.pop(0)
        if bias is not None:
            kw["bias"] = rest.pop(0)
        return _C.layer_norm(t, shape, eps=eps, **kw)
    return rules.normalized("layer_norm", fn, x, params, len(shape))


def _rms_norm(x, normalized_shape, weight=None, eps=None):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    params = [weight] if weight is not None else []
    return rules.normalized("rms_norm", lambda t, *ps: _PLAIN_F["rms_norm"](t, shape, ps[0] if ps else None, eps),
                            x, params, len(shape))


def _dropout(x, p=0.5, training=True, inplace=False):
    return rules.pointwise("dropout", lambda t: _C.dropout(t, p, training), [x])


def _cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
                   reduction="mean", label_smoothing=0.0):
    if weight is not None or label_smoothing or size_average is not None or reduce is not None:
        raise NotImplementedError("DTensor cross_entropy: weight, label_smoothing and the legacy arguments are "
                                  "not supported")
    return rules.cross_entropy(input, target, reduction, ignore_index)


_PLAIN_F = {name: getattr(F, name) for name in ("rms_norm",)}
_FUNCTIONAL = {
    "layer_norm": _layer_norm, "rms_norm": _rms_norm, "dropout": _dropout,
    "embedding": lambda input, weight, *a, **k: rules.embedding(
        input if isinstance(input, DTensor) else DTensor.from_local(
            input, weight.device_mesh, [Replicate()] * weight.device_mesh.ndim), weight),
    "cross_entropy": _cross_entropy,
    "linear": rules.linear, "relu": lambda x, inplace=False: x.relu(), "gelu": lambda x, approximate="none":
    rules.pointwise("gelu", lambda t: _C.gelu(t, approximate), [x]), "silu": lambda x, inplace=False: x.silu(),
    "softmax": lambda x, dim=None, _stacklevel=3, dtype=None: x.softmax(dim, dtype),
    "log_softmax": lambda x, dim=None, _stacklevel=3, dtype=None: x.log_softmax(dim, dtype),
}


def _concatenating(name, original):
    """trainrun.cat/stack that hand a sequence of DTensors to the concat rule."""
    def fn(tensors, *args, **kwargs):
        tensors = list(tensors)
        if tensors and isinstance(tensors[0], DTensor):
            if kwargs.get("out") is not None:
                raise TypeError(f"DTensor {name}: out= is not supported")
            dim = args[0] if args else kwargs.get("dim", kwargs.get("axis", 0))
            return rules.concat("stack" if name == "stack" else "cat", original, tensors, dim)
        return original(tensors, *args, **kwargs)  # (every form the plain function takes: axis=, out=)
    fn.__name__, fn.__doc__, fn.__wrapped__ = name, getattr(original, "__doc__", None), original
    fn._dtensor_aware = True
    return fn


for _name in ("cat", "concat", "concatenate", "stack"):
    if hasattr(trainrun, _name):
        _replace(trainrun, _name, _concatenating(_name, getattr(trainrun, _name)))
DTensor.unsqueeze = lambda self, dim: rules.reshape(
    "reshape", self, list(self.shape[:dim % (self.ndim + 1)]) + [1] + list(self.shape[dim % (self.ndim + 1):]))
DTensor.flatten = lambda self, start_dim=0, end_dim=-1: rules.reshape(
    "reshape", self, _flattened(self.shape, start_dim % max(self.ndim, 1), end_dim % max(self.ndim, 1)))


def _flattened(shape, start, end):
    merged = 1
    for s in shape[start:end + 1]:
        merged *= s
    return list(shape[:start]) + [merged] + list(shape[end + 1:])


for _name, _handler in _FUNCTIONS.items():
    _replace(trainrun, _name, _dispatching(_name, getattr(trainrun, _name), _handler))
for _name, _handler in _FUNCTIONAL.items():
    _replace(F, _name, _dispatching(_name, getattr(F, _name), _handler))

__all__ = ["DTensor", "DTensorSpec"]
