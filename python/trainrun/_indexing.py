"""Advanced indexing (NumPy's and PyTorch's rules) for x[...] and x[...] = v.

Basic indices (ints, slices, None, Ellipsis) make a view. Integer tensors,
lists and boolean masks anywhere in the index select elements: they are
broadcast together to one shape B, and the result has B where the advanced
indices stood when they are next to each other, or in front otherwise:

    x[torch.arange(n), labels]   # (n,): one element per row
    x[:, [0, 2]]                 # columns 0 and 2
    x[idx] = 0; x[:, cols] = v   # writes through to x

Reading is differentiable (a permute, a reshape and one index_select);
writing copies the selected region back into the view it came from."""
import builtins

import numpy as np

from trainrun import _C

Tensor = _C.Tensor


def _as_index_tensor(i, device):
    if _C._is_cpp_tensor(i):
        return i
    import trainrun
    return trainrun.tensor(i, device=device)


def is_advanced(index):
    """Whether an index (or an entry of an index tuple) needs advanced indexing."""
    items = index if isinstance(index, tuple) else (index,)
    return builtins.any(isinstance(i, (list, np.ndarray)) or (_C._is_cpp_tensor(i) and (i.ndim > 0 or i.dtype ==
                                                                                          _C.dtype.bool))
                        for i in items)


def _split(self, index):
    """Applies the basic part of `index`; returns (view, [(dim in view, index tensor)])."""
    items = list(index) if isinstance(index, tuple) else [index]
    expanded = []
    for i in items:  # masks become one integer index per dim they cover
        if isinstance(i, (list, np.ndarray)):
            i = _as_index_tensor(i, self.device)
        if _C._is_cpp_tensor(i) and i.dtype == _C.dtype.bool:
            if i.ndim == 0:
                raise IndexError("a 0-dim boolean index is not supported")
            expanded.extend(_C._ops.nonzero(i).unbind(1))
        else:
            expanded.append(i)
    consumed = builtins.sum(1 for i in expanded if i is not None and i is not Ellipsis)
    if consumed > self.ndim:
        raise IndexError(f"too many indices for tensor of dimension {self.ndim}")
    result, dim, advanced, seen_ellipsis = self, 0, [], False
    for i in expanded:
        if i is Ellipsis:
            if seen_ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...')")
            seen_ellipsis = True
            dim += self.ndim - consumed
        elif i is None:
            result = result.unsqueeze(dim)
            dim += 1
        elif isinstance(i, slice):
            step = 1 if i.step is None else i.step
            if step <= 0:
                raise ValueError("slice step must be positive")
            result = result.slice(dim, i.start, i.stop, step)
            dim += 1
        elif _C._is_cpp_tensor(i) and i.ndim > 0:
            if i.is_floating_point():
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            size = result.shape[dim]
            if i.numel() and (bool((i >= size).any()) or bool((i < -size).any())):
                bad = int(i[(i >= size) | (i < -size)].reshape(-1)[0])
                raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
            advanced.append((dim, i.to(_C.dtype.int64) % size if size else i.to(_C.dtype.int64)))
            dim += 1
        elif isinstance(i, (builtins.int, np.integer)) or (_C._is_cpp_tensor(i) and not i.is_floating_point()):
            size = result.shape[dim]
            k = builtins.int(i)
            if k < -size or k >= size:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {size}")
            result = result.select(dim, k)
            # an int drops a dim: advanced indices recorded after it keep their positions (none yet here)
        else:
            raise TypeError(f"indices must be ints, slices, None, Ellipsis, lists or tensors, not {type(i).__name__}")
    return result, advanced


def _layout(view, advanced):
    """The permutation that brings the advanced dims to the front, the broadcast index shape B, the flat
    position of every selected element among the advanced dims, and where B goes in the result."""
    dims = [d for d, _ in advanced]
    others = [d for d in range(view.ndim) if d not in dims]
    shape = list(np.broadcast_shapes(*[tuple(t.shape) for _, t in advanced]))
    linear = None
    for d, t in advanced:  # row-major position over the advanced dims
        t = t.expand(*shape)
        linear = t if linear is None else linear * view.shape[d] + t
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    return dims + others, shape, linear.reshape(-1), (dims[0] if adjacent else 0), others


def getitem(self, index):
    view, advanced = _split(self, index)
    if not advanced:
        return view
    order, shape, linear, at, others = _layout(view, advanced)
    moved = view.permute(*order)
    rest = [view.shape[d] for d in others]
    flat = moved.reshape([-1] + rest)
    picked = flat.index_select(0, linear).reshape(shape + rest)
    if at == 0:
        return picked
    # Adjacent advanced dims keep their place: the dims before them come back in front.
    b = len(shape)
    return picked.permute(*(list(range(b, b + at)) + list(range(b)) + list(range(b + at, b + len(rest)))))


def setitem(self, index, value):
    view, advanced = _split(self, index)
    order, shape, linear, at, others = _layout(view, advanced)
    moved = view.permute(*order)  # still a view of self
    rest = [view.shape[d] for d in others]
    if not _C._is_cpp_tensor(value):
        import trainrun
        value = trainrun.tensor(value, dtype=self.dtype, device=self.device)
    b = len(shape)
    target = shape + rest if at == 0 else rest[:at] + shape + rest[at:]
    value = value.to(self.dtype).expand(*target)
    if at:  # back to the advanced-first order of `moved`
        value = value.permute(*(list(range(at, at + b)) + list(range(at)) + list(range(at + b, b + len(rest)))))
    values = value.reshape([-1] + rest)
    flat = moved.reshape([-1] + rest)
    moved.copy_(flat.index_copy(0, linear, values).reshape(list(moved.shape)))
