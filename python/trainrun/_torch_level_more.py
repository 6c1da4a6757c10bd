"""More of torch's top level and Tensor methods that scripts and generated code call:

- the `*_copy` forms of the view ops (torch.view_copy, torch.select_copy, ...: the view, materialized), made
  from one table;
- the `sym_*` helpers of shape code (sym_int, sym_max, sym_ite, ...; shapes here are plain ints);
- the ATen-level losses at torch.* (torch.kl_div, torch.margin_ranking_loss, ...) whose reduction is an int
  (0 none, 1 mean, 2 sum) or PyTorch's string;
- bitwise shifts, igamma/igammac, nonzero_static, triangular_solve, histogramdd, put, threshold, geqrf/orgqr/ormqr,
  constant_pad_nd, and the Tensor methods to match (x.bitwise_left_shift_(1), x.igamma(a), x.cauchy_(), ...);
- the build flags PyTorch reports (has_lapack, has_mkl, ...) and the autocast cache switches."""
import builtins
import collections
import math

import trainrun
from trainrun import _C

# ---- the *_copy ops: (name, how the view is taken) --------------------------------------------------------------
_COPY_OF_VIEW = {
    "alias_copy": lambda x: x.view_as(x),
    "as_strided_copy": lambda x, size, stride, storage_offset=None: x.as_strided(size, stride, storage_offset),
    "detach_copy": lambda x: x.detach(),
    "diagonal_copy": lambda x, offset=0, dim1=0, dim2=1: x.diagonal(offset, dim1, dim2),
    "expand_copy": lambda x, size, *, implicit=False: x.expand(*size),
    "permute_copy": lambda x, dims: x.permute(*dims),
    "select_copy": lambda x, dim, index: x.select(dim, index),
    "slice_copy": lambda x, dim=0, start=None, end=None, step=1: x[(slice(None),) * (dim % x.ndim)
                                                                     + (slice(start, end, step),)],
    "squeeze_copy": lambda x, dim=None: x.squeeze() if dim is None else x.squeeze(dim),
    "t_copy": lambda x: x.t(),
    "transpose_copy": lambda x, dim0, dim1: x.transpose(dim0, dim1),
    "unfold_copy": lambda x, dimension, size, step: x.unfold(dimension, size, step),
    "unsqueeze_copy": lambda x, dim: x.unsqueeze(dim),
    "view_copy": lambda x, size: x.view(size) if not isinstance(size, _C.dtype) else x.view(size),
    "view_as_real_copy": lambda x: trainrun.view_as_real(x),
    "view_as_complex_copy": lambda x: trainrun.view_as_complex(x),
}
_COPIES_OF_VIEWS = {  # views returning several tensors
    "split_copy": lambda x, split_size, dim=0: x.split(split_size, dim),
    "split_with_sizes_copy": lambda x, split_sizes, dim=0: x.split(list(split_sizes), dim),
    "unbind_copy": lambda x, dim=0: x.unbind(dim),
}


def _copy_op(name, view):
    def copy(input, *args, out=None, **kwargs):  # noqa: A002  (PyTorch's argument name)
        result = view(input, *args, **kwargs).clone()
        if out is not None:
            out.resize_(result.shape).copy_(result)
            return out
        return result
    copy.__name__ = copy.__qualname__ = name
    copy.__doc__ = f"torch.{name}: {name[:-5]}'s result as a new tensor (not a view of the input)."
    return copy


def _copies_op(name, view):
    def copies(input, *args, **kwargs):  # noqa: A002
        return [t.clone() for t in view(input, *args, **kwargs)]
    copies.__name__ = copies.__qualname__ = name
    return copies


# ---- sym_*: shape arithmetic helpers (here sizes are ints, so these are the Python operations) --------------------
def sym_int(a):
    return math.trunc(a) if isinstance(a, float) else int(a)


def sym_float(a):
    return float(a)


def sym_not(a):
    return not a


def sym_max(a, b):
    return max(a, b)


def sym_min(a, b):
    return min(a, b)


def sym_ite(b, t, f):
    return t if b else f


def sym_sqrt(a):
    return math.sqrt(a)


def sym_sum(args):
    return sum(args)


def sym_fresh_size(expr):
    return expr


def sym_constrain_range(size, *, min=None, max=None):  # noqa: A002  (PyTorch's names)
    if (min is not None and size < min) or (max is not None and size > max):
        raise RuntimeError(f"Invalid value {size} for range [{min}:{max}]")


def sym_constrain_range_for_size(size, *, min=None, max=None):  # noqa: A002
    sym_constrain_range(size, min=min if min is not None else 0, max=max)


# ---- ATen-level losses: reduction as an int (PyTorch's Reduction enum) or a string. Called without one, these
# reduce nothing, as PyTorch's torch.* forms do (F.* defaults to the mean) -------------------------------------
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(reduction):
    if isinstance(reduction, str):
        return reduction
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction!r}")
    return _REDUCTIONS[reduction]


def kl_div(input, target, reduction=0, *, log_target=False):  # noqa: A002
    return trainrun.nn.functional.kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):  # noqa: A002
    return trainrun.nn.functional.binary_cross_entropy_with_logits(input, target, weight=weight,
                                                                    pos_weight=pos_weight,
                                                                    reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return trainrun.nn.functional.cosine_embedding_loss(input1, input2, target, margin=margin,
                                                        reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):  # noqa: A002
    return trainrun.nn.functional.hinge_embedding_loss(input, target, margin=margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return trainrun.nn.functional.margin_ranking_loss(input1, input2, target, margin=margin,
                                                      reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):  # noqa: A002
    return trainrun.nn.functional.poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                                                   reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=0):
    return trainrun.nn.functional.triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps,
                                                      swap=swap, reduction=_reduction(reduction))


# ---- elementwise and indexing ------------------------------------------------------------------------------------
def bitwise_left_shift(input, other, *, out=None):  # noqa: A002
    return _into(out, input << other if _C._is_cpp_tensor(input) else trainrun.tensor(input) << other)


def bitwise_right_shift(input, other, *, out=None):  # noqa: A002
    return _into(out, input >> other if _C._is_cpp_tensor(input) else trainrun.tensor(input) >> other)


def igamma(input, other, *, out=None):  # noqa: A002
    """The regularized lower incomplete gamma function P(input, other) (torch.special.gammainc)."""
    return _into(out, trainrun.special.gammainc(input, other))


def igammac(input, other, *, out=None):  # noqa: A002
    """The regularized upper incomplete gamma function Q(input, other) (torch.special.gammaincc)."""
    return _into(out, trainrun.special.gammaincc(input, other))


def _into(out, result):
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


def nonzero_static(input, *, size, fill_value=-1):  # noqa: A002
    """nonzero() as a (size, ndim) tensor whatever the count: cut to `size` rows or padded with fill_value."""
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size}")
    found = input.nonzero()
    if found.shape[0] >= size:
        return found[:size].clone()
    pad = trainrun.full((size - found.shape[0], input.ndim), fill_value, dtype=found.dtype)
    return trainrun.cat([found, pad], 0)


_TriangularSolve = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):  # noqa: N803
    """X with op(A) X = b, A triangular (PyTorch's deprecated form of torch.linalg.solve_triangular); returns
    (solution, a copy of A)."""
    coefficient = A.transpose(-2, -1) if transpose else A
    solution = trainrun.linalg.solve_triangular(coefficient, b, upper=(upper != transpose),
                                                unitriangular=unitriangular)
    return _TriangularSolve(solution, A.clone())


_Histogramdd = collections.namedtuple("histogramdd", ["hist", "bin_edges"])


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    """The D-dimensional histogram of the rows of `input` (N, D): (hist, [edges per dimension]), as NumPy's
    histogramdd (bins: a count for all dimensions, one per dimension, or the edges themselves)."""
    import numpy as np
    points = input.detach().reshape(-1, input.shape[-1]).double().numpy()
    if _C._is_cpp_tensor(bins):
        bins = bins.tolist()
    elif isinstance(bins, (list, tuple)) and bins and _C._is_cpp_tensor(bins[0]):
        bins = [b.double().numpy() for b in bins]
    if range is not None:  # (PyTorch's flat [min0, max0, min1, max1, ...])
        range = [(range[2 * i], range[2 * i + 1]) for i in builtins.range(len(range) // 2)]
    w = weight.detach().reshape(-1).double().numpy() if weight is not None else None
    hist, edges = np.histogramdd(points, bins=bins, range=range, weights=w, density=density)
    dtype = input.dtype
    return _Histogramdd(trainrun.from_numpy(hist).to(dtype), [trainrun.from_numpy(e).to(dtype) for e in edges])


def threshold(input, threshold, value, *, out=None):  # noqa: A002
    return _into(out, trainrun.nn.functional.threshold(input, threshold, value))


def constant_pad_nd(input, pad, value=0):  # noqa: A002
    return trainrun.nn.functional.pad(input, list(pad), mode="constant", value=value)


def put(input, index, source, accumulate=False):  # noqa: A002
    return input.clone().put_(index, source, accumulate)


# ---- in-place random fills ---------------------------------------------------------------------------------------
def _uniform_open(self, generator):
    """Uniform samples in (0, 1), shaped like self, in float64."""
    u = trainrun.empty(self.shape, dtype=trainrun.float64).uniform_(generator=generator)
    return u.clamp_(min=1e-300, max=1.0 - 1e-16)


def _fill_from(self, values):
    with trainrun.no_grad():
        self.copy_(values.to(self.dtype))
    return self


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    return _fill_from(self, median + sigma * trainrun.tan(math.pi * (_uniform_open(self, generator) - 0.5)))


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    normal = trainrun.empty(self.shape, dtype=trainrun.float64).normal_(mean, std, generator=generator)
    return _fill_from(self, normal.exp())


def _geometric_(self, p, *, generator=None):
    """Trials until the first success (1, 2, ...), each succeeding with probability p."""
    if not 0 < p <= 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1], but got p={p}")
    if p == 1:
        return _fill_from(self, trainrun.ones(self.shape, dtype=trainrun.float64))
    return _fill_from(self, trainrun.ceil(trainrun.log(_uniform_open(self, generator)) / math.log1p(-p)))


def _dim_order(self, *, ambiguity_check=False):
    """The dims from outermost to innermost in memory (by stride, largest first; ties keep their order)."""
    strides = self.stride()
    return tuple(sorted(builtins.range(self.ndim), key=lambda d: -strides[d]))


def _in_place_of(fn):
    def in_place(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    in_place.__name__ = fn.__name__ + "_"
    return in_place


def install(namespace):
    for name, view in _COPY_OF_VIEW.items():
        namespace[name] = _copy_op(name, view)
    for name, view in _COPIES_OF_VIEWS.items():
        namespace[name] = _copies_op(name, view)
    for fn in (sym_int, sym_float, sym_not, sym_max, sym_min, sym_ite, sym_sqrt, sym_sum, sym_fresh_size,
               sym_constrain_range, sym_constrain_range_for_size, kl_div, binary_cross_entropy_with_logits,
               cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss, poisson_nll_loss,
               triplet_margin_loss, bitwise_left_shift, bitwise_right_shift, igamma, igammac, nonzero_static,
               triangular_solve, histogramdd, threshold, constant_pad_nd, put):
        namespace.setdefault(fn.__name__, fn)
    namespace.update(
        has_lapack=True, has_spectral=True,  # (linalg and fft run here)
        has_mkl=False, has_openmp=False,  # (OpenBLAS and trainrun's own thread pool)
        is_vulkan_available=lambda: False, init_num_threads=lambda: None,
        is_distributed=lambda input: False,
        is_autocast_cache_enabled=lambda: _autocast_cache[0],
        set_autocast_cache_enabled=lambda enabled: _autocast_cache.__setitem__(0, bool(enabled)),
        clear_autocast_cache=lambda: None,  # (trainrun's autocast keeps no cache of cast weights)
    )
    from trainrun import _linalg_householder as householder
    for name in ("geqrf", "orgqr", "ormqr"):
        namespace.setdefault(name, getattr(householder, name))
    T = _C.Tensor
    T.geqrf, T.orgqr, T.ormqr = householder.geqrf, householder.orgqr, householder.ormqr
    T.bitwise_left_shift = bitwise_left_shift
    T.bitwise_right_shift = bitwise_right_shift
    T.bitwise_left_shift_ = _in_place_of(bitwise_left_shift)
    T.bitwise_right_shift_ = _in_place_of(bitwise_right_shift)
    T.igamma, T.igammac = igamma, igammac
    T.igamma_, T.igammac_ = _in_place_of(igamma), _in_place_of(igammac)
    T.nonzero_static = nonzero_static
    T.triangular_solve = triangular_solve
    T.cauchy_, T.log_normal_, T.geometric_ = _cauchy_, _log_normal_, _geometric_
    T.dim_order = _dim_order
    T.is_distributed = lambda self: False
    T.has_names = lambda self: False
    T.names = property(lambda self: (None,) * self.ndim)
    for flag in ("is_xla", "is_maia", "is_mtia", "is_ipu", "is_mps", "is_vulkan", "is_xpu"):
        if not hasattr(T, flag):
            setattr(T, flag, property(lambda self: False))


_autocast_cache = [True]
