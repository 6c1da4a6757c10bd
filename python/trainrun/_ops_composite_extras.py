"""More of PyTorch's functions as composites of core ops (their gradients come from those): isin, kron,
block_diag, cartesian_prod, rot90, nanmean, logcumsumexp, trapezoid, quantile/nanquantile, aminmax,
fill_diagonal_, and torch.nansum as a function (Tensor.nansum is an op); Tensor.apply_/map_ (Python callables
over a CPU tensor's elements); histogram and frexp (on the host, without gradients, as PyTorch's)."""
import numpy as np

import trainrun
from trainrun import _C
from trainrun._op_table import op, wrap_dim


@op()
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` is among `test_elements` (a tensor or a number)."""
    if not _C._is_cpp_tensor(test_elements):
        test_elements = trainrun.tensor([test_elements]) if not isinstance(test_elements, (list, tuple)) else \
            trainrun.tensor(list(test_elements))
    if not _C._is_cpp_tensor(elements):
        elements = trainrun.tensor(elements)
    found = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1) if test_elements.numel() else \
        trainrun.zeros(list(elements.shape), dtype=_C.dtype.bool)
    return found.logical_not() if invert else found


@op(method=True)
def kron(input, other):  # noqa: A002
    """The Kronecker product: every element of input times the whole of other, laid out block by block."""
    nd = max(input.dim(), other.dim())
    a = input.reshape([1] * (nd - input.dim()) + list(input.shape))
    b = other.reshape([1] * (nd - other.dim()) + list(other.shape))
    interleaved_a = a.reshape([s for d in a.shape for s in (d, 1)])
    interleaved_b = b.reshape([s for d in b.shape for s in (1, d)])
    product = interleaved_a * interleaved_b
    return product.reshape([x * y for x, y in zip(a.shape, b.shape)])


@op()
def block_diag(*tensors):
    """The tensors (0-, 1- or 2-d) along the diagonal of one matrix, zeros elsewhere."""
    mats = [t.reshape(1, 1) if t.dim() == 0 else (t.unsqueeze(0) if t.dim() == 1 else t) for t in tensors]
    for t in mats:
        if t.dim() != 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input has "
                               f"{t.dim()} dimensions")
    if not mats:
        return trainrun.zeros([1, 0])
    dtype = mats[0].dtype
    for t in mats[1:]:
        dtype = trainrun.promote_types(dtype, t.dtype)
    rows = sum(t.shape[0] for t in mats)
    cols = sum(t.shape[1] for t in mats)
    pieces, col = [], 0
    for t in mats:
        left = trainrun.zeros([t.shape[0], col], dtype=dtype, device=t.device)
        right = trainrun.zeros([t.shape[0], cols - col - t.shape[1]], dtype=dtype, device=t.device)
        pieces.append(trainrun.cat([left, t.to(dtype), right], 1))
        col += t.shape[1]
    return trainrun.cat(pieces, 0) if rows else trainrun.zeros([0, cols], dtype=dtype)


@op()
def cartesian_prod(*tensors):
    """Every combination of one element from each 1-d tensor, a row each (one tensor: itself)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = trainrun.meshgrid(*tensors, indexing="ij")
    return trainrun.stack([g.reshape(-1) for g in grids], 1)


@op(method=True)
def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """input rotated by k quarter turns in the plane of dims, from the first dim towards the second."""
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    d0, d1 = wrap_dim(dims[0], input.dim(), "rot90"), wrap_dim(dims[1], input.dim(), "rot90")
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k = k % 4
    if k == 1:
        return input.flip([d1]).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip([d0]).transpose(d0, d1)
    return input.clone()


@op()
def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """torch.nansum: Tensor.nansum (sum, counting NaNs as zero) as a function."""
    return input.nansum(dim, keepdim=keepdim, dtype=dtype) if dim is not None else input.nansum(dtype=dtype)


@op(method=True)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """mean over the elements that are not NaN."""
    if not input.is_floating_point():
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got {input.dtype}")
    count = input.isnan().logical_not().sum(dim, keepdim=keepdim) if dim is not None else \
        input.isnan().logical_not().sum()
    total = input.nansum(dim, keepdim=keepdim, dtype=dtype) if dim is not None else input.nansum(dtype=dtype)
    return total / count


@op(method=True)
def logcumsumexp(input, dim):  # noqa: A002
    """log(cumsum(exp(input))) along dim, computed without overflow (shifted by the running maximum's end)."""
    dim = wrap_dim(dim, input.dim(), "logcumsumexp")
    top = input.amax(dim, keepdim=True).detach()
    top = top.masked_fill(top.isinf(), 0.0)
    return (input - top).exp().cumsum(dim).log() + top


@op()
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of y along dim by the trapezoid rule: samples at x (a tensor) or spaced dx (default 1)."""
    dim = wrap_dim(dim, y.dim(), "trapezoid")
    n = y.shape[dim]
    if n == 0:
        return y.sum(dim)
    left, right = y.narrow(dim, 0, n - 1), y.narrow(dim, 1, n - 1)
    if x is not None:
        x = x if x.dim() == y.dim() else x.reshape([-1 if i == dim else 1 for i in range(y.dim())])
        widths = x.narrow(dim, 1, n - 1) - x.narrow(dim, 0, n - 1)
        return ((left + right) * widths).sum(dim) / 2
    return (left + right).sum(dim) * ((1.0 if dx is None else dx) / 2)


@op()
def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, name):  # noqa: A002
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}() interpolation must be one of {', '.join(_INTERPOLATIONS)}. Got "
                         f"'{interpolation}'")
    scalar_q = not _C._is_cpp_tensor(q)
    qs = trainrun.tensor([float(q)], dtype=input.dtype) if scalar_q else q.reshape(-1).to(input.dtype)
    if bool(((qs < 0) | (qs > 1)).any()):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    flat = dim is None
    x = input.reshape(-1) if flat else input
    d = 0 if flat else wrap_dim(dim, input.dim(), name)
    ordered = x.sort(dim=d).values  # NaNs sort last
    n = ordered.shape[d]
    valid = (~ordered.isnan()).sum(d, keepdim=True) if ignore_nan else None
    results = []
    for qv in qs.tolist():
        if ignore_nan:
            pos = (valid.to(input.dtype) - 1).clamp(min=0) * qv
        else:
            pos = trainrun.full([1] * x.dim(), (n - 1) * qv, dtype=input.dtype)
            pos = pos.expand([1 if i == d else s for i, s in enumerate(x.shape)])
        if interpolation == "lower":
            pos = pos.floor()
        elif interpolation == "higher":
            pos = pos.ceil()
        elif interpolation == "nearest":
            pos = pos.round()
        lo, hi = pos.floor().long().clamp(0, n - 1), pos.ceil().long().clamp(0, n - 1)
        a, b = ordered.gather(d, lo), ordered.gather(d, hi)
        if interpolation == "midpoint":
            value = a + (b - a) * 0.5 * (hi != lo).to(input.dtype)
        else:
            value = a + (b - a) * (pos - lo.to(input.dtype))
        if not ignore_nan:  # a NaN anywhere in the slice makes its quantile NaN
            has_nan = x.isnan().any(d, keepdim=True)
            value = value.masked_fill(has_nan, float("nan"))
        else:
            value = value.masked_fill(valid == 0, float("nan"))
        results.append(value if keepdim and not flat else value.squeeze(d))
    if flat and keepdim:
        results = [r.reshape([1] * input.dim()) for r in results]
    return results[0] if scalar_q else trainrun.stack(results, 0)


@op(method=True)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """The q-th quantiles of input along dim (all of it when None), as numpy.percentile interpolates."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@op(method=True)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """quantile over the elements that are not NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")




@op(method=True)
def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """(min, max) over dim (or all elements), as a named tuple."""
    from trainrun import return_types
    if dim is None:
        if keepdim:
            return return_types.aminmax(input.amin().reshape([1] * input.dim()),
                                        input.amax().reshape([1] * input.dim()))
        return return_types.aminmax(input.amin(), input.amax())
    return return_types.aminmax(input.amin(dim=dim, keepdim=keepdim), input.amax(dim=dim, keepdim=keepdim))


def _fill_diagonal_(self, fill_value, wrap=False):
    """Writes fill_value on the main diagonal in place (every dim the same size, or 2-D); wrap: a tall matrix
    starts the diagonal again after every cols + 1 rows, as PyTorch's."""
    if self.dim() < 2:
        raise RuntimeError("fill_diagonal_(): dimensions must larger than 1")
    if self.dim() > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("fill_diagonal_(): all dimensions of input must be of equal length")
    rows, cols = self.shape[0], self.shape[1]
    if self.dim() == 2:
        step = cols + 1
        end = self.numel() if wrap and rows > cols + 1 else min(rows, cols) * cols
        positions = list(range(0, end, step))
    else:
        n = self.shape[0]
        step = sum(n ** k for k in range(self.dim()))
        positions = [i * step for i in range(n)]
    index = trainrun.tensor(positions, dtype=trainrun.int64, device=self.device)
    filled = self.reshape([-1]).index_fill(0, index, fill_value).reshape(list(self.shape))
    return self.copy_(filled)


def _apply_(self, callable):  # noqa: A002
    """Every element replaced by callable(element), in place (CPU tensors, as PyTorch's; slow: Python per
    element)."""
    if self.device.type != "cpu":
        raise TypeError("apply_ is only implemented on CPU tensors")
    values = [callable(v) for v in self.reshape([-1]).tolist()]
    self.copy_(trainrun.tensor(values, dtype=self.dtype).reshape(list(self.shape)))
    return self


def _map_elements(self, others, callable, name):  # noqa: A002
    """Every element replaced by callable(element, each other tensor's element), the others broadcast to self,
    in place (CPU tensors, as PyTorch's; Python per element)."""
    if self.device.type != "cpu":
        raise TypeError(f"{name} is only implemented on CPU tensors")
    columns = [o.expand(list(self.shape)).reshape([-1]).tolist() for o in others]
    values = [callable(*row) for row in zip(self.reshape([-1]).tolist(), *columns)]
    self.copy_(trainrun.tensor(values, dtype=self.dtype).reshape(list(self.shape)))
    return self


def _map_(self, tensor, callable):  # noqa: A002
    return _map_elements(self, [tensor], callable, "map_")


def _map2_(self, x, y, callable):  # noqa: A002
    return _map_elements(self, [x, y], callable, "map2_")


def _resize(self, *sizes):
    """PyTorch's deprecated out-of-place resize: the tensor's values in a new shape of the same size."""
    import warnings
    warnings.warn("non-inplace resize is deprecated")
    sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else sizes
    return self.contiguous().view(list(sizes))


_C.Tensor.fill_diagonal_ = _fill_diagonal_
_C.Tensor.apply_ = _apply_
_C.Tensor.map_ = _map_
_C.Tensor.map2_ = _map2_
_C.Tensor.resize = _resize
_C.Tensor.resize_as = lambda self, tensor: _resize(self, list(tensor.shape))


def _running_extreme(input, dim, name, better):  # noqa: A002
    """(values, indices) of the running maximum or minimum along dim: the index of its latest occurrence (ties
    move it on, as PyTorch's), found on the host; the values gathered from input, so gradients reach the
    elements picked."""
    import numpy as np
    from trainrun import return_types
    d = wrap_dim(dim, max(input.dim(), 1), name)
    if input.dim() == 0:
        return getattr(return_types, name)(input.clone(), trainrun.zeros([], dtype=trainrun.int64))
    values = np.moveaxis(input.detach().cpu().numpy(), d, 0)
    index = np.zeros(values.shape, dtype=np.int64)
    best = values[0].copy()
    for i in range(1, values.shape[0]):
        take = better(values[i], best) | np.isnan(values[i])
        best = np.where(take, values[i], best)
        index[i] = np.where(take, i, index[i - 1])
    indices = _C.from_numpy(np.ascontiguousarray(np.moveaxis(index, 0, d))).to(input.device)
    return getattr(return_types, name)(input.gather(d, indices), indices)


@op(method=True)
def cummax(input, dim):  # noqa: A002
    return _running_extreme(input, dim, "cummax", lambda a, b: a >= b)


@op(method=True)
def cummin(input, dim):  # noqa: A002
    return _running_extreme(input, dim, "cummin", lambda a, b: a <= b)


@op(method=True)
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """(hist, bin_edges): counts (or weights) in `bins` equal bins over range (the data's when None), or over
    the edges a 1-D tensor `bins` gives; density divides by the total and the bin widths."""
    from trainrun import return_types
    a = input.detach().cpu().numpy().reshape(-1)
    w = None if weight is None else weight.detach().cpu().numpy().reshape(-1)
    edges_arg = bins.detach().cpu().numpy() if _C._is_cpp_tensor(bins) else int(bins)
    hist, edges = np.histogram(a, bins=edges_arg, range=range, weights=w, density=density)
    back = lambda v: _C.from_numpy(np.ascontiguousarray(v)).to(input.dtype)  # noqa: E731
    return return_types.histogram(back(hist), back(edges))


@op(method=True)
def frexp(input):  # noqa: A002
    """(mantissa, exponent): input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1)."""
    from trainrun import return_types
    mantissa, exponent = np.frexp(input.detach().cpu().numpy())
    return return_types.frexp(_C.from_numpy(np.ascontiguousarray(mantissa)).to(input.dtype),
                              _C.from_numpy(np.ascontiguousarray(exponent.astype(np.int32))))
