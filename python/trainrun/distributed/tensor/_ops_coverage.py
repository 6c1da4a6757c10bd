"""The rest of DTensor's op surface, from tables over the rules of _sharding_rules and _ops:

- every trainrun function whose DTensor method exists (torch.abs(dt), torch.maximum(dt, other), ...), and the
  pointwise functions of the op list with several tensor inputs (addcmul, lerp), through the pointwise rule;
- the functional activations built in Python over several ops (F.elu, F.softplus, F.hardtanh, ...): elementwise,
  so they run on the local piece with the pointwise rule's layout (a Partial input is summed first);
- ops that need one or more dims whole (var/std/logsumexp/cumsum/topk/sort/triu/chunk/split, and attention
  over its last two dims): those dims are gathered where sharded, the other dims keep their sharding;
- type_as, view_as, masked_fill, new_zeros & co., and F.normalize/mse_loss/glu composed of DTensor ops."""
import functools

import trainrun
from trainrun import _C, _op_list, return_types
from trainrun.distributed.tensor import _ops
from trainrun.distributed.tensor import _sharding_rules as rules
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec
from trainrun.distributed.tensor._redistribute import all_reduced
from trainrun.distributed.tensor.placement_types import Replicate, Shard
from trainrun.nn import functional as F


def _dispatching(module, name, handler):
    """module.<name> through _ops's dispatching wrapper: handler(original, *args) for calls with a DTensor."""
    original = getattr(module, name)
    if getattr(original, "_dtensor_aware", False):  # (_ops's own rule, or installed already)
        return
    _ops._replace(module, name, _ops._dispatching(name, original, functools.partial(handler, original)))


def _pointwise_call(name):
    """original(*args) on the local pieces: DTensor operands through the pointwise rule, numbers as they are,
    plain tensors refused (or replicated under implicit_replication)."""
    def handler(original, *args, **kwargs):
        first = next(a for a in args if isinstance(a, DTensor))
        operands = [a if isinstance(a, DTensor) or not _C._is_cpp_tensor(a) else
                    _ops._number_or_dtensor(a, name, first) for a in args]
        return rules.pointwise(name, lambda *pieces: original(*pieces, **kwargs), operands)
    return handler


# ---- function forms of the methods, and the pointwise functions ----------------------------------------------
def _method_call(name):
    def handler(original, *args, **kwargs):
        if isinstance(args[0], DTensor):
            return getattr(args[0], name)(*args[1:], **kwargs)
        return _pointwise_call(name)(original, *args, **kwargs)  # torch.maximum(tensor_or_number, dtensor)
    return handler


_POINTWISE = set(_op_list.pointwise_methods(1) + _op_list.pointwise_methods(2) + _op_list.pointwise_methods(3))

# ---- activations and other elementwise functionals written over several ops ----------------------------------
_ELEMENTWISE_F = ("elu", "celu", "selu", "leaky_relu", "hardtanh", "relu6", "softplus", "mish", "hardsigmoid",
                  "hardswish", "logsigmoid", "softsign", "tanhshrink", "softshrink", "hardshrink", "sigmoid",
                  "tanh", "threshold", "rrelu", "alpha_dropout")
# trainrun's elementwise functions written over several ops (functions and Tensor methods alike).
_ELEMENTWISE = ("nan_to_num", "erfc", "expm1", "log2", "log10", "exp2", "sinh", "cosh", "tan", "asin", "acos", "atan",
                "ceil", "trunc", "frac", "sgn", "clip", "logit", "xlogy", "hypot", "atan2", "fmod", "copysign",
                "float_power", "true_divide", "floor_divide", "heaviside", "isnan", "isinf", "isfinite", "signbit")


# ---- ops that need dims whole ---------------------------------------------------------------------------------
def _whole(x, dims):
    return _ops._whole_along(x, {d % x.ndim for d in dims})


def _spec_like(x, dims_removed=(), dims_resized=None):
    """The result's spec: x's placements (its sharded dims shifted past the removed ones) and global shape (x's,
    without the removed dims, with dims_resized {dim: size})."""
    removed = sorted(d % x.ndim for d in dims_removed)
    shape = list(x.shape)
    for d, size in (dims_resized or {}).items():
        shape[d % x.ndim] = size
    for d in reversed(removed):
        del shape[d]
    placements = tuple(Shard(p.dim - sum(1 for r in removed if r < p.dim)) if p.is_shard() else p
                       for p in x.placements)
    return DTensorSpec(x.device_mesh, placements, tuple(shape))


_KEEPDIM_AT = {"logsumexp": 0, "prod": 0, "var": 1, "std": 1}  # keepdim's place among the args after dim


def _reducing(op):
    """var/std/logsumexp/prod over dims (all of them: the result is replicated), with PyTorch's arguments."""
    def method(self, dim=None, *args, **kwargs):
        if dim is None:
            return _ops._replicated(getattr(self.full_tensor(), op)(*args, **kwargs), self)
        at = _KEEPDIM_AT[op]
        keepdim = bool(args[at]) if len(args) > at else bool(kwargs.get("keepdim", False))
        dims = [dim] if isinstance(dim, int) else list(dim)
        x = _whole(self, dims)
        local = getattr(x.to_local(), op)(dim, *args, **kwargs)
        if keepdim:
            return DTensor(local, _spec_like(x, (), {d: 1 for d in dims}))
        return DTensor(local, _spec_like(x, dims))
    method.__name__ = op
    return method


def _along(op):
    """cumsum & co.: the same shape, dim whole."""
    def method(self, dim, *args, **kwargs):
        return rules.along_whole_dim(op, lambda t: getattr(t, op)(dim, *args, **kwargs), self, dim)
    method.__name__ = op
    return method


def _topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    x = _whole(self, [dim])
    values, indices = x.to_local().topk(k, dim, largest, sorted)
    spec = _spec_like(x, (), {dim: k})
    return return_types.topk(DTensor(values, spec), DTensor(indices, spec))


def _sort(self, dim=-1, descending=False, stable=False):
    x = _whole(self, [dim])
    values, indices = x.to_local().sort(dim=dim, descending=descending, stable=stable)
    spec = _spec_like(x)
    return return_types.sort(DTensor(values, spec), DTensor(indices, spec))


def _triangle(op):
    def method(self, diagonal=0):
        x = _whole(self, [-2, -1])
        return DTensor(getattr(x.to_local(), op)(diagonal), _spec_like(x))
    method.__name__ = op
    return method


def _split(self, split_size_or_sections, dim=0):
    """split/chunk along dim: that dim whole (gathered if sharded), the pieces keep the other dims' sharding."""
    x = _whole(self, [dim])
    return tuple(DTensor(piece, _spec_like(x, (), {dim: piece.shape[dim % x.ndim]}))
                 for piece in x.to_local().split(split_size_or_sections, dim))


def _chunk(self, chunks, dim=0):
    size = self.shape[dim % self.ndim]
    return _split(self, -(-size // chunks), dim)


def _unbind(self, dim=0):
    return tuple(piece.reshape(list(piece.shape[:dim % self.ndim]) + list(piece.shape[dim % self.ndim + 1:]))
                 for piece in _split(self, 1, dim))


def _masked_fill(self, mask, value):
    mask = mask if isinstance(mask, DTensor) else _ops._number_or_dtensor(mask, "masked_fill", self)
    if isinstance(value, DTensor):
        value = value.full_tensor().item()
    return rules.pointwise("masked_fill", lambda t, m: t.masked_fill(m, value), [self, mask])


def _new_factory(name):
    """new_zeros & co.: a replicated DTensor of that global size (as PyTorch's DTensor gives)."""
    def method(self, *size, **kwargs):
        kwargs.setdefault("dtype", self.dtype)
        local = getattr(self.to_local(), name)(*size, **kwargs)
        return _ops._replicated(local, self)
    method.__name__ = name
    return method


def _sdpa(original, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    """Attention over the last two dims: those whole on every rank; batch and head dims keep their sharding
    (query, key and value sharded alike)."""
    pieces = []
    for t in (query, key, value):
        if not isinstance(t, DTensor):
            raise TypeError("DTensor scaled_dot_product_attention: query, key and value must all be DTensors")
        pieces.append(_whole(t, [-2, -1]))
    q = pieces[0]
    k, v = (p.redistribute(q.device_mesh, q.placements) for p in pieces[1:])
    mask = attn_mask.redistribute(q.device_mesh, q.placements).to_local() if isinstance(attn_mask, DTensor) \
        else attn_mask
    local = original(q.to_local(), k.to_local(), v.to_local(), attn_mask=mask, dropout_p=dropout_p,
                     is_causal=is_causal, scale=scale, **kwargs)
    return DTensor(local, _spec_like(q, (), {-1: value.shape[-1]}))


def _normalize(original, input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    if out is not None:
        raise TypeError("DTensor normalize: out= is not supported")
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def _mse_loss(original, input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    if size_average is not None or reduce is not None:
        raise NotImplementedError("DTensor mse_loss: the legacy size_average/reduce arguments are not supported")
    squared = (input - target) ** 2
    return squared.mean() if reduction == "mean" else squared.sum() if reduction == "sum" else squared


def _glu(original, input, dim=-1):  # noqa: A002
    a, b = _chunk(input, 2, dim)
    return a * b.sigmoid()


def _expand(self, *sizes):
    """A view with size-1 dims broadcast and new leading dims; a sharded dim keeps its size (its shards stay)."""
    sizes = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple, trainrun.Size)) else list(sizes)
    lead = len(sizes) - self.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({self.ndim})")
    shape = [self.shape[d - lead] if s == -1 and d >= lead else s for d, s in enumerate(sizes)]
    local = list(shape)
    sharded = {p.dim for p in self.placements if p.is_shard()}
    for d in sharded:
        if shape[d + lead] != self.shape[d]:
            raise RuntimeError(f"DTensor expand: dim {d} is sharded, so its size ({self.shape[d]}) cannot change "
                               f"to {shape[d + lead]}")
        local[d + lead] = self.to_local().shape[d]
    placements = tuple(Shard(p.dim + lead) if p.is_shard() else p for p in self.placements)
    return DTensor(self.to_local().expand(local), DTensorSpec(self.device_mesh, placements, tuple(shape)))


def _scaled_sum(original, name, product):
    """addmm & co.: beta * input + alpha * product(a, b), composed of DTensor ops (beta=0 ignores input)."""
    def handler(_original, input, a, b, *, beta=1, alpha=1, out=None):  # noqa: A002
        if out is not None:
            raise TypeError(f"DTensor {name}: out= is not supported")
        result = product(a, b)
        if alpha != 1:
            result = result * alpha
        if beta == 0:
            return result
        return result + (input if beta == 1 else input * beta)
    return handler


def _agree(original, name):
    """allclose/equal on DTensors: the answer of the whole tensors, the same on every rank (the local pieces
    compared where both are laid out alike and hold no partial sums, then agreed over the mesh)."""
    def handler(_original, a, b, *args, **kwargs):
        if not (isinstance(a, DTensor) and isinstance(b, DTensor)):
            raise TypeError(f"DTensor {name}: both arguments must be DTensors (got {type(a).__name__} and "
                            f"{type(b).__name__})")
        if tuple(a.shape) != tuple(b.shape):
            if name == "equal":
                return False
            raise RuntimeError(f"allclose: the shapes {list(a.shape)} and {list(b.shape)} differ")
        if any(p.is_partial() for p in a.placements):
            a = a.redistribute(a.device_mesh, [Replicate() if p.is_partial() else p for p in a.placements])
        b = b.redistribute(a.device_mesh, a.placements)
        differs = trainrun.tensor([0.0 if original(a.to_local(), b.to_local(), *args, **kwargs) else 1.0],
                                  device=a.to_local().device)
        for i in range(a.device_mesh.ndim):
            differs = all_reduced(differs, a.device_mesh._group(i), "max")
        return differs.item() == 0.0
    return handler


def install():
    for name, method in (("var", _reducing("var")), ("std", _reducing("std")),
                         ("logsumexp", _reducing("logsumexp")), ("prod", _reducing("prod")),
                         ("cumsum", _along("cumsum")), ("cumprod", _along("cumprod")),
                         ("topk", _topk), ("sort", _sort), ("triu", _triangle("triu")), ("tril", _triangle("tril")),
                         ("split", _split), ("chunk", _chunk), ("unbind", _unbind), ("masked_fill", _masked_fill),
                         ("type_as", lambda self, other: self.to(other.dtype)),
                         ("view_as", lambda self, other: self.view(tuple(other.shape))),
                         ("reshape_as", lambda self, other: self.reshape(tuple(other.shape))),
                         ("clamp_min", lambda self, min: self.clamp(min=min)),  # noqa: A002
                         ("clamp_max", lambda self, max: self.clamp(max=max)),  # noqa: A002
                         ("expand", _expand)):
        if name not in vars(DTensor):
            setattr(DTensor, name, method)
    for name in ("new_zeros", "new_ones", "new_empty", "new_full"):
        setattr(DTensor, name, _new_factory(name))
    for name in sorted(_POINTWISE):
        if hasattr(trainrun, name) and name not in vars(DTensor):
            _dispatching(trainrun, name, _pointwise_call(name))
    for name in sorted(n for n in vars(DTensor) if not n.startswith("_") and callable(vars(DTensor)[n])):
        if hasattr(trainrun, name) and callable(getattr(trainrun, name)) and name not in ("from_local",):
            _dispatching(trainrun, name, _method_call(name))
    for name in _ELEMENTWISE_F:
        if hasattr(F, name):
            _dispatching(F, name, _pointwise_call(name))
    for name in _ELEMENTWISE:
        if hasattr(trainrun, name) and name not in vars(DTensor):
            function = getattr(trainrun, name)
            setattr(DTensor, name, lambda self, *args, _fn=function, _name=name, **kwargs: _pointwise_call(_name)(
                _fn, self, *args, **kwargs))
            _dispatching(trainrun, name, _pointwise_call(name))
    for name, handler in (("scaled_dot_product_attention", _sdpa), ("normalize", _normalize),
                          ("mse_loss", _mse_loss), ("glu", _glu)):
        _dispatching(F, name, handler)
    for name, product in (("addmm", trainrun.mm), ("baddbmm", trainrun.bmm), ("addbmm", lambda a, b: (a @ b).sum(0)),
                          ("addmv", trainrun.mv)):
        _dispatching(trainrun, name, _scaled_sum(getattr(trainrun, name), name, product))
    for name in ("allclose", "equal"):
        _dispatching(trainrun, name, _agree(getattr(trainrun, name), name))
