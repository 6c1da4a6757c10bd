"""Indexing ops with PyTorch's signatures: scatter/index updates, masked
scatter, nonzero/where, unique, bincount, searchsorted. The differentiable
ones build on the core's scatter, scatter_add, index_add and index_select;
the ones with integer results (unique, bincount, searchsorted) run in NumPy
on the host, as they have no gradient."""
import numpy as np

from trainrun import _C
from trainrun._op_table import op, wrap_dim

_ops = _C._ops


def _from_numpy(a, device):
    a = np.require(a, requirements="C")  # keeps a 0-d result 0-d (ascontiguousarray does not)
    if a.dtype.kind in "iu" and a.dtype != np.uint8:
        a = a.astype(np.int64)
    return _C.from_numpy(a).to(device)


def _host(t):
    return np.asarray(t.detach().cpu().contiguous().numpy())


@op(method=True, inplace=True)
def scatter_add(input, dim, index, src):  # noqa: A002
    """input with src added at index along dim (repeated indices add up)."""
    return _ops.scatter_add(input, dim, index, src)


_scatter = _C.scatter


@op(method=True, inplace=True)
def scatter(input, dim, index, src=None, value=None, *, reduce=None):  # noqa: A002
    """input with src (or a scalar value) written at index along dim; reduce="add"/"multiply" combines."""
    if src is None and value is None:
        raise TypeError("scatter(): give src (a tensor) or value (a number)")
    if src is not None and not _C._is_cpp_tensor(src):
        src, value = None, src
    if reduce is not None:
        if reduce == "add":
            source = src if src is not None else _C.full(list(index.shape), value, dtype=input.dtype,
                                                         device=input.device)
            return _ops.scatter_add(input, dim, index, source)
        if reduce == "multiply":
            return scatter_reduce(input, dim, index, src if src is not None else _C.full(
                list(index.shape), value, dtype=input.dtype, device=input.device), "prod")
        raise ValueError(f"scatter(): reduce must be 'add' or 'multiply', got {reduce!r}")
    if src is not None:
        return _scatter(input, dim, index, src)
    return _ops.scatter_value(input, dim, index, value)


@op(method=True, inplace=True)
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """input with src reduced into index along dim: reduce is "sum", "mean" (differentiable), "prod",
    "amax" or "amin" (computed on the host, without a gradient)."""
    d = wrap_dim(dim, input.ndim, "scatter_reduce")
    if reduce in ("sum", "mean"):
        base = input if include_self else _ops.scatter_value(input, d, index, 0)
        total = _ops.scatter_add(base, d, index, src)
        if reduce == "sum":
            return total
        ones = _C.ones(list(index.shape), dtype=total.dtype, device=input.device)
        start = _C.ones(list(input.shape), dtype=total.dtype, device=input.device) if include_self else \
            _C.zeros(list(input.shape), dtype=total.dtype, device=input.device)
        count = _ops.scatter_add(start, d, index, ones)
        count = _C.maximum(count, _C.ones([], dtype=count.dtype, device=count.device))
        out = total / count
        return out if input.is_floating_point() else _C.div(total, count).floor().to(input.dtype)
    ufunc = {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}.get(reduce)
    if ufunc is None:
        raise ValueError(f"scatter_reduce(): reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    if _C.is_grad_enabled() and (input.requires_grad or src.requires_grad):
        raise NotImplementedError(f"scatter_reduce(reduce={reduce!r}) has no gradient in trainrun; "
                                  "use 'sum' or 'mean', or call it under no_grad()")
    out, idx, values = _host(input).copy(), _host(index), _host(src)
    if not include_self:
        fill = {"prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        touched = np.zeros(out.shape, dtype=bool)
        np.put_along_axis(touched, idx, True, axis=d)
        out = np.where(touched, np.array(fill).astype(out.dtype) if out.dtype.kind == "f" else
                       (np.iinfo(out.dtype).min if reduce == "amax" else np.iinfo(out.dtype).max
                        if reduce == "amin" else 1), out).astype(out.dtype)
    grid = list(np.indices(idx.shape))
    grid[d] = idx
    ufunc.at(out, tuple(grid), values[tuple(slice(0, n) for n in idx.shape)])
    return _from_numpy(out.astype(_host(input).dtype), input.device)


@op(function=False, inplace=True)  # Tensor.index_add_ (index_add itself is generated from the op list)
def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    return _C.index_add(input, dim, index, source, alpha=alpha)


def _slice_mask(input, dim, index):  # noqa: A002
    """A bool tensor, broadcastable to input, true on the slices index picks along dim."""
    d = wrap_dim(dim, input.ndim, "index_fill")
    n = input.shape[d] if input.ndim else 1
    flat = _C.index_add(_C.zeros([n], device=input.device), 0, index.reshape([-1]).to(_C.dtype.int64),
                        _C.ones([index.numel()], device=input.device)) > 0
    return flat.reshape([n] + [1] * (input.ndim - d - 1)) if input.ndim else flat.reshape([])


@op(method=True, inplace=True)
def index_fill(input, dim, index, value):  # noqa: A002
    """input with the slices index picks along dim set to value."""
    if _C._is_cpp_tensor(value):
        value = value.item()
    return _C.masked_fill(input, _slice_mask(input, dim, index), value)


@op(method=True, inplace=True)
def index_copy(input, dim, index, source):  # noqa: A002
    """input with slice i of source written to slice index[i] along dim; where index repeats a position, the
    last slice written there wins (as PyTorch's CPU kernel, and x[idx] = v, do), not their sum."""
    positions = index.reshape([-1]).cpu().numpy() if index.dim() else index.reshape([1]).cpu().numpy()
    if np.unique(positions).size != positions.size:
        _, first_from_end = np.unique(positions[::-1], return_index=True)
        keep = np.sort(positions.size - 1 - first_from_end)
        keep_index = _C.from_numpy(np.ascontiguousarray(keep, dtype=np.int64)).to(index.device)
        index = index.reshape([-1]).index_select(0, keep_index)
        source = source.index_select(dim, keep_index) if source.dim() else source
    cleared = _C.masked_fill(input, _slice_mask(input, dim, index), 0)
    return _C.index_add(cleared, dim, index, source)


@op(method=True, inplace=True)
def masked_scatter(input, mask, source):  # noqa: A002
    """input with source's leading elements written, in order, where mask (broadcast) is true."""
    shape = list(np.broadcast_shapes(tuple(input.shape), tuple(mask.shape)))
    positions = _ops.nonzero(mask.expand(shape).reshape([-1])).reshape([-1])
    k = positions.shape[0]
    if source.numel() < k:
        raise ValueError(f"masked_scatter(): the mask selects {k} elements but source has {source.numel()}")
    flat = input.expand(shape).reshape([-1])
    return _C.scatter(flat, 0, positions, source.reshape([-1]).narrow(0, 0, k)).view(shape)


@op(method=True)
def masked_fill(input, mask, value):  # noqa: A002
    """input with value (a number or a 0-dim tensor) where mask (broadcast) is true."""
    return _C.masked_fill(input, mask, value.item() if _C._is_cpp_tensor(value) else value)


_C.Tensor.masked_fill_ = lambda self, mask, value: _ops.masked_fill_(
    self, mask, value.item() if _C._is_cpp_tensor(value) else value)


@op(method=True)
def nonzero(input, *, as_tuple=False):  # noqa: A002
    """(n, ndim) int64 indices of the non-zero elements, or one index tensor per dim with as_tuple=True."""
    idx = _ops.nonzero(input)
    if not as_tuple:
        return idx
    if input.ndim == 0:
        return (idx.reshape([-1]),)
    return tuple(idx.select(1, i) for i in range(input.ndim))


@op(method=True)
def argwhere(input):  # noqa: A002
    return _ops.nonzero(input)


@op(method=True)
def count_nonzero(input, dim=None):  # noqa: A002
    return (input != 0).sum(dim=dim)


_where = _C.where


def _as_tensor_like(value, like):
    if _C._is_cpp_tensor(value):
        return value
    dtype = like.dtype
    if isinstance(value, float) and not like.is_floating_point():
        dtype = _C.dtype.float32
    return _C.full([], value, dtype=dtype, device=like.device)


@op(method=False)
def where(condition, input=None, other=None, *, out=None):  # noqa: A002
    """where(condition, input, other): input where condition holds, else other (either may be a number);
    where(condition) alone: nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where(): give both input and other, or neither")
    like = input if _C._is_cpp_tensor(input) else other if _C._is_cpp_tensor(other) else condition
    if not _C._is_cpp_tensor(like) or like is condition:
        like = _C.full([], 0.0 if isinstance(input, float) or isinstance(other, float) else 0,
                       dtype=_C.dtype.float32 if isinstance(input, float) or isinstance(other, float) else
                       _C.dtype.int64, device=condition.device)
    result = _where(condition, _as_tensor_like(input, like), _as_tensor_like(other, like))
    if out is None:
        return result
    out.copy_(result)
    return out


_C.Tensor.where = lambda self, condition, other: where(condition, self, other)


@op(method=True)
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values (sorted), with the inverse indices and counts when asked."""
    a = _host(input)
    result = np.unique(a, return_inverse=return_inverse, return_counts=return_counts, axis=dim)
    if not isinstance(result, tuple):
        return _from_numpy(result.astype(a.dtype), input.device)
    values, *rest = result
    out = [_from_numpy(values.astype(a.dtype), input.device)]
    if return_inverse:
        inverse = rest.pop(0)
        out.append(_from_numpy(inverse.reshape(a.shape if dim is None else (-1,)), input.device))
    if return_counts:
        out.append(_from_numpy(rest.pop(0), input.device))
    return tuple(out)


@op(method=True)
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    if dim is not None:
        raise NotImplementedError("unique_consecutive(dim=...) is not supported")
    a = _host(input).reshape(-1)
    starts = np.concatenate([[True], a[1:] != a[:-1]]) if a.size else np.zeros(0, dtype=bool)
    out = [_from_numpy(a[starts], input.device)]
    if return_inverse:
        out.append(_from_numpy((np.cumsum(starts) - 1).reshape(_host(input).shape), input.device))
    if return_counts:
        out.append(_from_numpy(np.diff(np.append(np.flatnonzero(starts), a.size)), input.device))
    return out[0] if len(out) == 1 else tuple(out)


@op(method=True)
def bincount(input, weights=None, minlength=0):  # noqa: A002
    a = _host(input)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ValueError(f"bincount(): input must be a 1-D integer tensor, got {a.ndim}-D {input.dtype}")
    if a.size and a.min() < 0:
        raise ValueError("bincount(): input must be non-negative")
    w = None if weights is None else _host(weights)
    counts = np.bincount(a, weights=w, minlength=minlength)
    if w is not None:
        counts = counts.astype(np.float64 if w.dtype == np.float64 else np.float32)
    return _from_numpy(counts, input.device)


@op()
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, the index in sorted_sequence (last dim) where it would be inserted."""
    side = side or ("right" if right else "left")
    seq = _host(sorted_sequence)
    vals = _host(values) if _C._is_cpp_tensor(values) else np.asarray(values)
    if seq.ndim == 1:
        out = np.searchsorted(seq, vals, side=side)
    else:
        out = np.stack([np.searchsorted(s, v, side=side) for s, v in
                        zip(seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1]))]).reshape(vals.shape)
    out = _from_numpy(np.asarray(out, dtype=np.int32 if out_int32 else np.int64), sorted_sequence.device)
    return out


@op()
def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


@op(method=True)
def take(input, index):  # noqa: A002
    flat = input.reshape([-1])
    idx = index.reshape([-1]).to(_C.dtype.int64)
    idx = _where(idx < 0, idx + flat.shape[0], idx)
    return _C.index_select(flat, 0, idx).reshape(list(index.shape))


@op(method=True)
def take_along_dim(input, indices, dim=None):  # noqa: A002
    if dim is None:
        return take(input, indices)
    d = wrap_dim(dim, input.ndim, "take_along_dim")
    shape = list(np.broadcast_shapes(tuple(input.shape[:d]) + (1,) + tuple(input.shape[d + 1:]),
                                     tuple(indices.shape[:d]) + (1,) + tuple(indices.shape[d + 1:])))
    in_shape, idx_shape = list(shape), list(shape)
    in_shape[d], idx_shape[d] = input.shape[d], indices.shape[d]
    return _C.gather(input.expand(in_shape), d, indices.expand(idx_shape))
