"""max/min/sort/topk with PyTorch's overloads and named-tuple results."""
import numbers

from trainrun import _C, return_types


def _extreme(name, reduce_all, along, pairwise, result):
    def op(input, dim=None, keepdim=False, *, out=None):  # noqa: A002
        if out is not None:
            raise NotImplementedError(f"{name}(out=...) is not supported")
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): keepdim needs a dim")
            return reduce_all(input, [], False)
        if _C._is_cpp_tensor(dim):  # max(input, other): elementwise
            return pairwise(input, dim)
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"{name}(): dim must be an int or a tensor (other), got {type(dim).__name__}")
        values, indices = along(input, int(dim), keepdim)
        return result(values, indices)
    op.__name__ = name
    op.__doc__ = (f"{name}(input) over everything; {name}(input, dim, keepdim=False) -> (values, indices); "
                  f"{name}(input, other) elementwise.")
    return op


max = _extreme("max", _C.amax, _C.max_dim, _C.maximum, return_types.max)  # noqa: A001
min = _extreme("min", _C.amin, _C.min_dim, _C.minimum, return_types.min)  # noqa: A001


def sort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    values, indices = _C.sort(input, dim, descending)
    return return_types.sort(values, indices)


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    values, indices = _C.topk(input, k, dim, largest, sorted)
    return return_types.topk(values, indices)
