"""Named-tuple results, as torch.return_types: `x.max(dim=1).values`,
`values, indices = x.sort()`."""
import collections

max = collections.namedtuple("max", ["values", "indices"])  # noqa: A001  (PyTorch's names)
min = collections.namedtuple("min", ["values", "indices"])  # noqa: A001
sort = collections.namedtuple("sort", ["values", "indices"])
topk = collections.namedtuple("topk", ["values", "indices"])
aminmax = collections.namedtuple("aminmax", ["min", "max"])
svd = collections.namedtuple("svd", ["U", "S", "V"])
cummax = collections.namedtuple("cummax", ["values", "indices"])
cummin = collections.namedtuple("cummin", ["values", "indices"])
histogram = collections.namedtuple("histogram", ["hist", "bin_edges"])
frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])
for _t in (max, min, sort, topk, aminmax, svd, cummax, cummin, histogram, frexp):
    _t.__module__ = "trainrun.return_types"
del _t
