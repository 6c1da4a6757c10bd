"""Shape ops with PyTorch's signatures: flips, rolls, repeats, triangles,
diagonals, splits and stacks. Each is a composite of core views and
index_select/cat, so its gradient comes from theirs."""
import numpy as np

from trainrun import _C
from trainrun._op_table import int_list, op, wrap_dim

_ops = _C._ops


def _index(values, device):
    return _C.from_numpy(np.ascontiguousarray(values, dtype=np.int64)).to(device)


@op(method=True)
def flip(input, *dims_, dims=None):  # noqa: A002
    """A copy with the order of elements reversed along each of `dims`."""
    out = input
    for d in int_list(dims_, "flip", "dims", dims):
        d = wrap_dim(d, input.ndim, "flip")
        out = _C.index_select(out, d, _C.arange(input.shape[d] - 1, -1, -1, device=input.device))
    return out if out is not input else input.clone()


@op(method=True)
def as_strided(input, size, stride, storage_offset=None):  # noqa: A002
    """A view of input's storage with the given sizes, strides and offset (in elements)."""
    return _ops.as_strided(input, int_list((size,), "as_strided", "size"), int_list((stride,), "as_strided", "stride"),
                           storage_offset)


@op(method=True)
def fliplr(input):  # noqa: A002
    if input.ndim < 2:
        raise ValueError(f"fliplr(): the input must have at least 2 dimensions, got {input.ndim}")
    return flip(input, 1)


@op(method=True)
def flipud(input):  # noqa: A002
    if input.ndim < 1:
        raise ValueError("flipud(): the input must have at least 1 dimension")
    return flip(input, 0)


@op(method=True)
def roll(input, shifts, dims=None):  # noqa: A002
    """Elements shifted along dims, wrapping around; without dims the tensor is flattened, rolled and reshaped."""
    shifts = [shifts] if not isinstance(shifts, (tuple, list)) else list(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(f"roll(): without dims, shifts must be one int, got {shifts}")
        return roll(input.flatten(), shifts, 0).view(list(input.shape))
    dims = [dims] if not isinstance(dims, (tuple, list)) else list(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll(): shifts and dims must have the same length, got {len(shifts)} and {len(dims)}")
    out = input
    for s, d in zip(shifts, dims):
        d = wrap_dim(d, input.ndim, "roll")
        n = input.shape[d]
        s = s % n if n else 0
        if s:
            out = _C.cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out if out is not input else input.clone()


def _repeat(input, *sizes, repeats=None):  # noqa: A002
    """Tensor.repeat: the tensor tiled sizes[i] times along dim i (leading sizes add dims)."""
    sizes = int_list(sizes, "repeat", "repeats", repeats)
    if len(sizes) < input.ndim:
        raise ValueError(f"repeat(): the number of repeat dims ({len(sizes)}) cannot be smaller than the "
                         f"tensor's dims ({input.ndim})")
    if any(s < 0 for s in sizes):
        raise ValueError(f"repeat(): repeats must be non-negative, got {sizes}")
    shape = [1] * (len(sizes) - input.ndim) + list(input.shape)
    interleaved, expanded, result = [], [], []
    for r, s in zip(sizes, shape):
        interleaved += [1, s]
        expanded += [r, s]
        result.append(r * s)
    return input.reshape(interleaved).expand(expanded).reshape(result)


_C.Tensor.repeat = _repeat


@op(method=True)
def tile(input, dims):  # noqa: A002
    dims = int_list((dims,) if not isinstance(dims, (tuple, list)) else (dims,), "tile", "dims")
    return _repeat(input, [1] * (input.ndim - len(dims)) + dims)


@op(method=True)
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """Each element repeated `repeats` times (an int, or a tensor of one count per element) along dim
    (flattened when dim is None); repeat_interleave(counts) alone gives the indices 0, 0, 1, ..."""
    if repeats is None:  # repeat_interleave(repeats): arange(len) repeated
        counts = np.asarray(input.cpu().tolist(), dtype=np.int64)
        return _index(np.repeat(np.arange(len(counts)), counts), input.device)
    if dim is None:
        input, dim = input.flatten(), 0
    d = wrap_dim(dim, input.ndim, "repeat_interleave")
    if _C._is_cpp_tensor(repeats) and repeats.numel() != 1:
        counts = np.asarray(repeats.cpu().tolist(), dtype=np.int64).reshape(-1)
        if len(counts) != input.shape[d]:
            raise ValueError(f"repeat_interleave(): repeats has {len(counts)} counts but dim {d} has "
                             f"{input.shape[d]} elements")
        return _C.index_select(input, d, _index(np.repeat(np.arange(len(counts)), counts), input.device))
    r = int(repeats.item() if _C._is_cpp_tensor(repeats) else repeats)
    shape = list(input.shape)
    expanded = shape[:d + 1] + [r] + shape[d + 1:]
    return input.unsqueeze(d + 1).expand(expanded).reshape(shape[:d] + [shape[d] * r] + shape[d + 1:])


def _triangle(input, diagonal, upper, where):  # noqa: A002
    if input.ndim < 2:
        raise ValueError(f"{where}(): the input must have at least 2 dimensions, got {input.ndim}")
    rows, cols = input.shape[-2], input.shape[-1]
    # (made of trainrun ops, not numpy: a compiled or exported call replays the mask, at any size)
    # Column c of row r is dropped where c - r is past the diagonal: compared as c against r + diagonal, a
    # broadcast comparison that writes the bool mask alone (no rows x cols int64 offsets first).
    column = _C.arange(cols, device=input.device).reshape([1, cols])
    limit = (_C.arange(rows, device=input.device) + diagonal).reshape([rows, 1])
    drop = column < limit if upper else column > limit
    return _C.masked_fill(input, drop, 0)


@op(method=True, inplace=True)
def triu(input, diagonal=0):  # noqa: A002
    """The upper triangle (on and above the `diagonal`-th diagonal) of the last two dims; the rest is 0."""
    return _triangle(input, diagonal, True, "triu")


@op(method=True, inplace=True)
def tril(input, diagonal=0):  # noqa: A002
    """The lower triangle (on and below the `diagonal`-th diagonal) of the last two dims; the rest is 0."""
    return _triangle(input, diagonal, False, "tril")


@op(method=True)
def diag(input, diagonal=0):  # noqa: A002
    """1-D: a square matrix with `input` on the `diagonal`-th diagonal; 2-D: that diagonal as a 1-D copy."""
    if input.ndim == 2:
        return _C.diagonal(input, diagonal, 0, 1).clone()
    if input.ndim != 1:
        raise ValueError(f"diag(): the input must be 1-D or 2-D, got {input.ndim} dimensions")
    m = input.shape[0]
    n = m + abs(diagonal)
    start = diagonal if diagonal >= 0 else -diagonal * n
    positions = _index(np.arange(m) * (n + 1) + start, input.device)
    return _C.scatter(_C.zeros([n * n], dtype=input.dtype, device=input.device), 0, positions, input).view([n, n])


@op(method=True)
def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """Matrices (at dims dim1, dim2 of the result) whose offset-th diagonal is input's last dim, zeros elsewhere
    (built from core ops: differentiable)."""
    n = input.shape[-1]
    out = input.unsqueeze(-1) * _C.eye(n, dtype=input.dtype, device=input.device)
    if offset:  # shift the diagonal: pad columns before and rows after (above it), or the other way
        k = abs(offset)
        from trainrun.nn import functional as F
        out = F.pad(out, (k, 0, 0, k) if offset > 0 else (0, k, k, 0))
    ndim = input.dim() + 1
    d1, d2 = dim1 % ndim, dim2 % ndim
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return out if (d1, d2) == (ndim - 2, ndim - 1) else out.movedim((-2, -1), (d1, d2))


@op(method=True)
def trace(input):  # noqa: A002
    if input.ndim != 2:
        raise ValueError(f"trace(): expected a 2-D tensor, got {input.ndim} dimensions")
    return _C.diagonal(input, 0, 0, 1).sum()


@op(method=True)
def unbind(input, dim=0):  # noqa: A002
    return tuple(_ops.unbind(input, dim))


@op(method=True)
def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Views split like numpy.array_split: n sections (the first n % size get one more), or at indices."""
    d = wrap_dim(dim, input.ndim, "tensor_split")
    size = input.shape[d]
    if _C._is_cpp_tensor(indices_or_sections):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise ValueError(f"tensor_split(): the number of sections must be positive, got {n}")
        lengths = [size // n + (1 if i < size % n else 0) for i in range(n)]
        bounds = np.cumsum([0] + lengths).tolist()
    else:
        bounds = [0] + [min(max(int(i), 0), size) for i in indices_or_sections] + [size]
    return tuple(input.narrow(d, lo, max(hi - lo, 0)) for lo, hi in zip(bounds[:-1], bounds[1:]))


def _split(tensor, split_size_or_sections=None, dim=0, *, split_size=None):
    """Views of `split_size` elements along dim (the last may be smaller), or of the given sizes.
    (Tensor.split names its first argument split_size: either keyword is taken.)"""
    if split_size is not None:
        if split_size_or_sections is not None:
            raise TypeError("split() got its split size both positionally and as split_size=")
        split_size_or_sections = split_size
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = int_list((split_size_or_sections,), "split", "split sizes")
        if sum(sizes) != tensor.shape[wrap_dim(dim, tensor.ndim, "split")]:
            raise ValueError(f"split(): split sizes {sizes} add up to {sum(sizes)}, but dim {dim} has size "
                             f"{tensor.shape[dim]}")
        return tuple(_ops.split_with_sizes(tensor, sizes, dim))
    return tuple(_C.split(tensor, split_size_or_sections, dim))


op(method=True, name="split")(_split)


@op(method=True)
def chunk(input, chunks, dim=0):  # noqa: A002
    return tuple(_C.chunk(input, chunks, dim))


@op(method=True)
def unflatten(input, dim, sizes):  # noqa: A002
    return _ops.unflatten(input, dim, int_list((sizes,), "unflatten"))


@op(method=True, aliases=("moveaxis",))
def movedim(input, source, destination):  # noqa: A002
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim(): source and destination must have the same length, got {src} and {dst}")
    n = input.ndim
    src = [wrap_dim(s, n, "movedim") for s in src]
    dst = [wrap_dim(d, n, "movedim") for d in dst]
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return input.permute([o if o is not None else next(rest) for o in order])


@op(method=True, aliases=("swapdims",))
def swapaxes(input, axis0, axis1):  # noqa: A002
    return input.transpose(axis0, axis1)


@op(method=True)
def broadcast_to(input, size):  # noqa: A002
    return input.expand(list(size))


@op(aliases=("concat", "concatenate"))
def cat(tensors, dim=0, *, axis=None, out=None):
    """The tensors joined along dim (axis= is NumPy's name for it, which PyTorch also takes)."""
    if out is not None:
        raise NotImplementedError("cat(out=...) is not supported")
    if axis is not None:
        if dim != 0:
            raise TypeError("cat() got both dim and axis")
        dim = axis
    return _C.cat(list(tensors), dim)



@op()
def broadcast_shapes(*shapes):
    from trainrun._size import Size
    return Size(np.broadcast_shapes(*[tuple(s) if isinstance(s, (tuple, list)) else (s,) for s in shapes]))


@op()
def broadcast_tensors(*tensors):
    shape = list(broadcast_shapes(*[t.shape for t in tensors]))
    return tuple(t.expand(shape) for t in tensors)


@op()
def atleast_1d(*tensors):
    out = [t.reshape([1]) if t.ndim == 0 else t for t in _tensors(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


@op()
def atleast_2d(*tensors):
    out = [t.reshape([1, 1]) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t for t in _tensors(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


@op()
def atleast_3d(*tensors):
    def lift(t):
        if t.ndim == 0:
            return t.reshape([1, 1, 1])
        if t.ndim == 1:
            return t.reshape([1, t.shape[0], 1])
        if t.ndim == 2:
            return t.unsqueeze(-1)
        return t
    out = [lift(t) for t in _tensors(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def _tensors(args):
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)


@op(aliases=("row_stack",))
def vstack(tensors):
    return _C.cat([atleast_2d(t) for t in tensors], 0)


@op()
def hstack(tensors):
    tensors = [atleast_1d(t) for t in tensors]
    return _C.cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@op()
def dstack(tensors):
    return _C.cat([atleast_3d(t) for t in tensors], 2)


@op()
def column_stack(tensors):
    return _C.cat([t.reshape([t.numel(), 1]) if t.ndim <= 1 else t for t in tensors], 1)


@op()
def meshgrid(*tensors, indexing="ij"):
    """Grids from 1-D tensors; indexing "ij" (matrix, PyTorch's default) or "xy" (Cartesian)."""
    tensors = _tensors(tensors)
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid(): indexing must be 'ij' or 'xy', got {indexing!r}")
    shape = [t.numel() for t in tensors]
    grids = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[i] = -1
        grids.append(t.reshape(view).expand(shape))
    if indexing == "xy" and len(tensors) >= 2:  # Cartesian: the first two output dims swap
        grids = [g.transpose(0, 1) for g in grids]
    return tuple(grids)


@op(method=True)
def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    d = wrap_dim(dim, input.ndim, "diff")
    if prepend is not None or append is not None:
        input = _C.cat([t for t in (prepend, input, append) if t is not None], d)
    for _ in range(n):
        size = input.shape[d]
        input = input.narrow(d, 1, size - 1) - input.narrow(d, 0, size - 1)
    return input


# Views and reshapes under their function names, with PyTorch's keyword names.
@op()
def reshape(input, shape):  # noqa: A002
    return input.reshape(int_list((shape,), "reshape", "shape"))


@op(method=True)
def view_as(input, other):  # noqa: A002
    return input.view(list(other.shape))


@op(method=True)
def reshape_as(input, other):  # noqa: A002
    return input.reshape(list(other.shape))


_original = {n: getattr(_C.Tensor, n) for n in ("squeeze", "transpose", "flatten", "narrow", "t")}


@op(method=True)
def squeeze(input, dim=None):  # noqa: A002
    if isinstance(dim, (tuple, list)):
        for d in sorted((wrap_dim(d, input.ndim, "squeeze") for d in dim), reverse=True):
            input = _original["squeeze"](input, d)
        return input
    return _original["squeeze"](input, dim)


@op(method=True)
def transpose(input, dim0, dim1):  # noqa: A002
    return _original["transpose"](input, dim0, dim1)


@op(method=True)
def flatten(input, start_dim=0, end_dim=-1):  # noqa: A002
    return _original["flatten"](input, start_dim, end_dim)


@op(method=True)
def narrow(input, dim, start, length):  # noqa: A002
    if _C._is_cpp_tensor(start):
        start = int(start.item())
    return _original["narrow"](input, dim, start, length)


@op()
def t(input):  # noqa: A002
    return _original["t"](input)


@op()
def permute(input, dims):  # noqa: A002
    return input.permute(int_list((dims,), "permute", "dims"))


_C.Tensor.mT = property(lambda self: self.transpose(-2, -1))
_C.Tensor.mH = _C.Tensor.mT  # (real dtypes only)
_C.Tensor.H = property(lambda self: self.t())
